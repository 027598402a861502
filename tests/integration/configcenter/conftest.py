"""Real etcd + real config-center processes on ephemeral ports."""

from __future__ import annotations

import pytest
from tidemq.configclient.client import ConfigClient

MODULE = "tidemq.configcenter"


@pytest.fixture
def start_config_center(services, etcd_server):
    """`start_config_center()` starts one more instance in front of the test's etcd."""

    def start(*extra: str):
        return services(MODULE, ["--etcd-endpoints", etcd_server.endpoints,
                                 "--shutdown-grace-s", "1", *extra])

    return start


@pytest.fixture
def config_center(start_config_center):
    return start_config_center()


@pytest.fixture
def client(config_center):
    with ConfigClient(config_center.addr, timeout=3.0) as config:
        yield config


@pytest.fixture(scope="module")
def shared_center(tmp_path_factory):
    """One etcd + config center for a whole module of tests that use distinct keys."""
    from tests.support.etcd import start_etcd
    from tests.support.processes import start_service

    workdir = tmp_path_factory.mktemp("config-center")
    etcd = start_etcd(workdir)
    center = start_service(MODULE, ["--etcd-endpoints", etcd.endpoints,
                                    "--shutdown-grace-s", "1"], workdir)
    yield center
    center.kill()
    etcd.kill()


@pytest.fixture
def shared_client(shared_center):
    with ConfigClient(shared_center.addr, timeout=3.0) as config:
        yield config
