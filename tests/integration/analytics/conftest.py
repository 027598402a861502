"""The Spark tests run on the session's shared one-broker cluster (tests/conftest.py: each module
owns its topics) and share one SparkSession per module."""

from __future__ import annotations

import logging

import pytest

from tests.integration.analytics.cluster import AnalyticsCluster


@pytest.fixture(scope="module")
def cluster(shared_one_broker_cluster):
    return AnalyticsCluster(shared_one_broker_cluster)


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
