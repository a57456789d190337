"""Spark test fixtures: one local[2] session per module (UI off, two shuffle partitions, 1 GB driver) and helpers.

Skipped as a whole when the spark extra (pyspark) is not installed.
"""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")


@pytest.fixture(scope="module")
def spark():
    from odradek.spark.session import spark_session

    session = spark_session(app_name="odradek-tests")
    yield session
    session.stop()
