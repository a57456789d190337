"""A Spark session with the "odradek" data source registered: the one way pipelines, tests and benchmarks get one.

Local sessions get the light settings measured on small machines (no UI, two shuffle partitions, 1 GB driver,
loopback driver address). Every session runs its Python workers with this interpreter unless $PYSPARK_PYTHON says
otherwise (odradek.spark.worker_python), so the workers import the same odradek, confluent-kafka and pyarrow as the
driver.
"""

from __future__ import annotations

import os

from odradek.spark.worker_python import default_to_this_python

LOCAL_SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.shuffle.partitions": "2",
    "spark.driver.memory": "1g",
    "spark.driver.host": "127.0.0.1",
    "spark.sql.session.timeZone": "UTC",
}


def spark_session(master: str = "local[2]", app_name: str = "odradek", settings: dict[str, str] | None = None):
    """Get or create a session with the data source registered; settings override LOCAL_SETTINGS."""
    default_to_this_python()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master).appName(app_name)
    for key, value in {**LOCAL_SETTINGS, **(settings or {})}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    return spark


def register(spark) -> None:
    """Make format("odradek") available in an existing session."""
    from odradek.spark.source import OdradekDataSource

    spark.dataSource.register(OdradekDataSource)
