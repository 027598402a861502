"""A SparkSession with the `tidemq` source registered, for jobs and tests.

Spark needs Java 17 (`java` on PATH or JAVA_HOME). Python workers run this interpreter
(PYSPARK_PYTHON defaults to sys.executable) so they import the same tidemq packages.
"""

from __future__ import annotations

import os
import sys

from tidemq.analytics.source import TideMQDataSource


def build_session(app_name: str, master: str | None = "local[*]",
                  conf: dict[str, str] | None = None):
    """Get or create a session; `master=None` leaves it to spark-submit."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app_name)
    if master:
        builder = builder.master(master)
    settings = {
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.session.timeZone": "UTC",
        **(conf or {}),
    }
    if master and master.startswith("local"):
        # Everything is on this machine: bind to loopback rather than guess an interface.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        settings = {"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                    **settings}
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.dataSource.register(TideMQDataSource)
    return spark
