"""Module-scoped cluster: the Spark tests share one SparkSession and one data set per module.

Built with the same process helpers as the `redis_server` and `services` fixtures.
"""

from __future__ import annotations

import logging

import pytest

from tests.integration.analytics.cluster import BROKER, Cluster
from tests.support.processes import ServiceProcess, start_redis, start_service


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("analytics-cluster")
    started: list[ServiceProcess] = []
    redis = start_redis(tmp)
    try:
        config_center = start_service("tidemq.configcenter", ["--redis-url", redis.url], tmp)
        started.append(config_center)
        namesrv = start_service("tidemq.nameserver", [], tmp)
        started.append(namesrv)
        broker = start_service("tidemq.broker", [
            "--cluster-name", "AnalyticsCluster", "--broker-name", BROKER, "--broker-id", "0",
            "--namesrv-addrs", namesrv.addr, "--config-center", config_center.addr,
            "--register-interval-s", "0.5",
        ], tmp)
        started.append(broker)
        yield Cluster(config_center, namesrv, broker)
    finally:
        for process in reversed(started):
            process.kill()
        redis.kill()


@pytest.fixture(scope="module")
def spark():
    """A local[2] session; after the first module the JVM is already up, so later ones are cheap."""
    from tidemq.analytics.session import build_session

    # py4j logs each connection it closes at INFO, some only at interpreter exit, after pytest
    # closed the streams its handlers write to ("--- Logging error ---" at the end of a run).
    logging.getLogger("py4j").setLevel(logging.WARNING)
    session = build_session("tidemq-analytics-tests", "local[2]", {
        "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "2",
        "spark.default.parallelism": "2",
    })
    yield session
    session.stop()
