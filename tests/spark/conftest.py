"""Spark test fixtures: one local[2] session per module (UI off, two shuffle partitions, 1 GB driver) and helpers.

Every session carries Spark's own Kafka connector (format("kafka"), beside format("odradek")): a JVM takes
spark.jars only when it starts, and all the modules' sessions share the JVM of the first. Skipped as a whole when
the spark extra (pyspark) is not installed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark():
    from odradek.spark.session import spark_session
    from tests.jvm import spark_kafka_jars

    session = spark_session(app_name="odradek-tests", settings={"spark.jars": spark_kafka_jars()})
    yield session
    session.stop()
