"""Module-scoped cluster (tests.support.cluster with one broker group): the Spark tests share
one SparkSession and one data set per module."""

from __future__ import annotations

import logging

import pytest

from tests.integration.analytics.cluster import BROKER, AnalyticsCluster
from tests.support.cluster import running_cluster


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with running_cluster(tmp_path_factory.mktemp("analytics-cluster"),
                         broker_names=(BROKER,)) as cluster:
        yield AnalyticsCluster(cluster)


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
