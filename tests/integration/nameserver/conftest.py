"""The config center the controller tests run against (one, on a real etcd member)."""

from __future__ import annotations

import pytest
from tidemq.configclient.client import ConfigClient


@pytest.fixture
def center(etcd_server, services):
    return services("tidemq.configcenter", ["--etcd-endpoints", etcd_server.endpoints])


@pytest.fixture
def config(center):
    with ConfigClient(center.addr) as client:
        yield client
