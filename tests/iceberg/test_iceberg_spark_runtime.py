"""A key_value topic's table read by Apache Iceberg's own Spark runtime: Spark's SparkCatalog over Iceberg's
JdbcCatalog on the broker's SQLite catalog, as docs/iceberg.md ("Spark") configures it, returns every record once
with its key, value, headers, partition, offset and timestamp, and the snapshot summary's odradek.offsets.

No Iceberg runtime runs on the suite's pyspark 4.3, so Spark here is the pyspark 4.1 that `make iceberg-spark`
installs into build/spark-4.1/python, with iceberg-spark-runtime-4.1_2.13 and sqlite-jdbc from `make java-jars`
(tests/java/iceberg-spark/pom.xml), run in a child process of the venv's python with that pyspark first on its
path (the reader below): one Spark start for the module. Missing, they are an error naming the make target, never
a skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from odradek.embedded import BrokerProcess

from .conftest import create_topic, end_offsets, produce, wait_committed

ROOT = Path(__file__).resolve().parents[2]
PYSPARK_4_1 = ROOT / "build" / "spark-4.1" / "python"
ICEBERG_JARS = ROOT / "build" / "java" / "iceberg-spark"

# Run by the child: argv is the broker's data directory, the topic and the output file; it writes the table's rows
# (bytes as hex, the timestamp in epoch microseconds) and the current snapshot's odradek.offsets as JSON.
READER = r"""
import json, sys, time
started = time.monotonic()
from pyspark.sql import SparkSession
data, topic, jars, output = sys.argv[1:]
spark = (SparkSession.builder.master("local[1]").appName("iceberg-runtime")
         .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
         .config("spark.driver.host", "127.0.0.1").config("spark.sql.session.timeZone", "UTC")
         .config("spark.jars", jars)
         .config("spark.sql.catalog.odradek", "org.apache.iceberg.spark.SparkCatalog")
         .config("spark.sql.catalog.odradek.type", "jdbc")
         .config("spark.sql.catalog.odradek.uri", f"jdbc:sqlite:{data}/iceberg/catalog.db")
         .config("spark.sql.catalog.odradek.jdbc.catalog-name", "odradek")
         .config("spark.sql.catalog.odradek.warehouse", f"file://{data}/iceberg/warehouse")
         .getOrCreate())
spark.sparkContext.setLogLevel("ERROR")
session_started = time.monotonic() - started
table = f"odradek.odradek.`{topic}`"
rows = spark.sql(f"SELECT hex(key) AS key, hex(value) AS value, "
                 f"transform(headers, h -> named_struct('key', h.key, 'value', hex(h.value))) AS headers, "
                 f"unix_micros(timestamp) AS timestamp, partition, offset FROM {table}").collect()
summary = spark.sql(f"SELECT summary['odradek.offsets'] AS offsets FROM {table}.snapshots "
                    f"ORDER BY committed_at DESC LIMIT 1").collect()[0].offsets
with open(output, "w") as out:
    json.dump({"spark": spark.version, "session_started": session_started, "read": time.monotonic() - started,
               "offsets": json.loads(summary), "rows": [row.asDict(recursive=True) for row in rows]}, out)
spark.stop()
"""


def fetched_spark() -> tuple[Path, str]:
    if not (PYSPARK_4_1 / "pyspark").is_dir():
        raise RuntimeError(f"pyspark 4.1 is not in {PYSPARK_4_1}: run `make iceberg-spark` (PyPI)")
    jars = sorted(ICEBERG_JARS.glob("*.jar"))
    if not (ICEBERG_JARS / ".fetched").exists() or not jars:
        raise RuntimeError(f"Iceberg's Spark runtime is not in {ICEBERG_JARS}: run `make java-jars` (Maven Central)")
    return PYSPARK_4_1, ",".join(str(jar) for jar in jars)


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("iceberg-runtime") / "data",
                            settings={"iceberg.commit.interval.ms": 200})
    process.start()
    yield process
    process.stop()


def test_iceberg_spark_runtime_reads_every_record_once(broker, topic_name, tmp_path):
    pyspark_path, jars = fetched_spark()
    create_topic(broker, topic_name, 3, **{"odradek.iceberg.mode": "key_value"})
    records = [(i % 3, None if i % 7 == 0 else f"k{i}".encode(), None if i % 11 == 0 else f"v{i}".encode(),
                [("n", str(i).encode()), ("both", b"\x00\xff")] if i % 2 else None) for i in range(300)]
    before = time.time()
    for start in range(0, len(records), 100):  # three produce rounds: the table gets several commits
        produce(broker, topic_name, records[start:start + 100])
    after = time.time()
    ends = end_offsets(broker, topic_name, 3)
    assert ends == {0: 100, 1: 100, 2: 100}
    wait_committed(broker.data_dir, topic_name, ends)

    output = tmp_path / "read.json"
    env = {key: value for key, value in os.environ.items()
           if not key.startswith(("PYSPARK", "SPARK_")) and key != "PYTHONPATH"}
    env.update(PYTHONPATH=str(pyspark_path), SPARK_LOCAL_IP="127.0.0.1")
    child = subprocess.run([sys.executable, "-c", READER, str(broker.data_dir.resolve()), topic_name, jars,
                            str(output)], env=env, capture_output=True, text=True, timeout=240)
    assert child.returncode == 0, child.stderr[-4000:]
    read = json.loads(output.read_text())
    print(f"Spark {read['spark']}: session in {read['session_started']:.1f} s, "
          f"{len(read['rows'])} rows in {read['read']:.1f} s")
    assert read["spark"].startswith("4.1.")
    assert read["offsets"] == {str(partition): end for partition, end in ends.items()}

    expected = []
    for index, (partition, key, value, headers) in enumerate(records):
        offset = index // 3  # partition p gets records p, p + 3, ...: offsets in that order
        expected.append((partition, offset, key.hex().upper() if key is not None else None,
                         value.hex().upper() if value is not None else None,
                         [(name, data.hex().upper()) for name, data in headers] if headers else None))
    got = sorted((row["partition"], row["offset"], row["key"], row["value"],
                  [(header["key"], header["value"]) for header in row["headers"]] if row["headers"] else None)
                 for row in read["rows"])
    assert got == sorted(expected, key=lambda row: (row[0], row[1]))
    assert all(int(before * 1e6) - 1000 <= row["timestamp"] <= int(after * 1e6) + 1000 for row in read["rows"])
