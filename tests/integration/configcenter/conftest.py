"""Real Redis + real config-center processes on ephemeral ports."""

from __future__ import annotations

import pytest
from tidemq.client.config import ConfigClient

MODULE = "tidemq.configcenter"


@pytest.fixture
def start_config_center(services, redis_server):
    """`start_config_center()` starts one more instance in front of the test's Redis."""

    def start(*extra: str):
        return services(MODULE, ["--redis-url", redis_server.url, "--shutdown-grace-s", "1",
                                 "--lease-reap-interval-s", "0.1", *extra])

    return start


@pytest.fixture
def config_center(start_config_center):
    return start_config_center()


@pytest.fixture
def client(config_center):
    with ConfigClient(config_center.addr, timeout=3.0) as config:
        yield config
