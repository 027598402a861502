"""Real Redis + real config-center processes on ephemeral ports."""

from __future__ import annotations

import pytest
from tidemq.configclient.client import ConfigClient

MODULE = "tidemq.configcenter"


@pytest.fixture
def start_config_center(services, redis_server):
    """`start_config_center()` starts one more instance in front of the test's Redis."""

    def start(*extra: str):
        return services(MODULE, ["--redis-url", redis_server.url, "--shutdown-grace-s", "1",
                                 *extra])

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
    """One Redis + config center for a whole module of tests that use distinct keys."""
    from tests.support.processes import start_redis, start_service

    workdir = tmp_path_factory.mktemp("config-center")
    redis = start_redis(workdir)
    center = start_service(MODULE, ["--redis-url", redis.url, "--shutdown-grace-s", "1"], workdir)
    yield center
    center.kill()
    redis.kill()


@pytest.fixture
def shared_client(shared_center):
    with ConfigClient(shared_center.addr, timeout=3.0) as config:
        yield config
