"""Spark over a broker: format("odradek") beside Spark's own connector, format("kafka"), and beside Parquet.

A real broker in a child process gets N 100-byte records over two partitions; a local[2] session (with Spark's
Kafka connector, spark-sql-kafka-0-10 4.2.0 from build/java/spark-kafka, `make java-jars`) then, in the same run:
- reads them through format("odradek") into Spark's noop sink (broker -> Fetch answers -> records.arrow -> Arrow
  batches -> Spark), and from a Parquet copy written by the data source itself;
- runs one job through each of format("kafka") and format("odradek"): read the N records into a count, and read
  them and write their keys and values to another topic (a new one each run),
so every figure comes from the same machine under the same load. Prints the table and writes
bench/results/<date>-spark.json (meta: load, sizes, versions; rows: every run's rows/s per job and source).
Usage: python -m bench.spark_bench [--records 2000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import json
import os
import socket
import tempfile
import time

from confluent_kafka import Producer

from bench.measure import summarise
from bench.suite import RESULTS_DIR, load, versions
from odradek.embedded import BrokerProcess
from odradek.spark.kafka_io import ensure_topic
from odradek.spark.session import spark_session
from tests.jvm import SPARK_KAFKA_JARS, spark_kafka_jars

TOPIC = "bench"
PARTITIONS = 2
FORMATS = ("kafka", "odradek")


def fill(bootstrap: str, records: int) -> None:
    ensure_topic({"bootstrap.servers": bootstrap}, TOPIC, PARTITIONS)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5,
                         "queue.buffering.max.messages": 1_000_000, "log.connection.close": False})
    value = b"x" * 100
    for number in range(records):
        while True:
            try:
                producer.produce(TOPIC, value, partition=number % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0


def timed_rows_per_s(action, records: int) -> float:
    started = time.perf_counter()
    action()
    return records / (time.perf_counter() - started)


def source(spark, fmt: str, bootstrap: str):
    return spark.read.format(fmt).option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC).load()


def copy_to(df, fmt: str, bootstrap: str, topic: str) -> None:
    df.select("key", "value").write.format(fmt).option("kafka.bootstrap.servers", bootstrap) \
        .option("topic", topic).mode("append").save()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    meta = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "host": socket.gethostname(),
            "cpus": os.cpu_count(), "load_before": load(), "sizes": {"records": args.records, "value_bytes": 100,
                                                                   "partitions": PARTITIONS, "repeat": args.repeat},
            "versions": {**versions(), "pyspark": importlib.metadata.version("pyspark"),
                         "spark-sql-kafka": sorted(p.name for p in SPARK_KAFKA_JARS.glob("spark-sql-kafka*.jar"))}}
    rates: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="odradek-spark-bench-") as scratch, \
            BrokerProcess(f"{scratch}/broker") as broker:
        bootstrap = broker.bootstrap_servers
        started = time.perf_counter()
        fill(bootstrap, args.records)
        print(f"produced {args.records} records in {time.perf_counter() - started:.1f}s")
        spark = spark_session(app_name="odradek-spark-bench", settings={"spark.jars": spark_kafka_jars()})
        try:
            source(spark, "odradek", bootstrap).write.parquet(f"{scratch}/parquet")
            parquet = spark.read.parquet(f"{scratch}/parquet")
            assert parquet.count() == args.records
            for run in range(args.repeat):
                for name, df in (("odradek source -> noop", source(spark, "odradek", bootstrap)),
                                 ("parquet -> noop", parquet)):
                    rates.setdefault(name, []).append(timed_rows_per_s(
                        lambda: df.write.format("noop").mode("overwrite").save(), args.records))
                for fmt in FORMATS:
                    df = source(spark, fmt, bootstrap)
                    counted = []
                    rates.setdefault(f"format({fmt}): read, count", []).append(timed_rows_per_s(
                        lambda: counted.append(df.count()), args.records))
                    assert counted == [args.records], (fmt, counted)
                    target = f"copy-{fmt}-{run}"
                    ensure_topic({"bootstrap.servers": bootstrap}, target, PARTITIONS)
                    rates.setdefault(f"format({fmt}): read, write to a topic", []).append(timed_rows_per_s(
                        lambda: copy_to(df, fmt, bootstrap, target), args.records))
                    copied = spark.read.format("odradek").option("kafka.bootstrap.servers", bootstrap) \
                        .option("subscribe", target).load().count()
                    assert copied == args.records, (fmt, target, copied)
        finally:
            spark.stop()
    meta["load_after"] = load()
    rows = [{"job": name, "unit": "rows/s", "summary": summarise(values)} for name, values in rates.items()]
    for row in rows:
        summary = row["summary"]
        print(f"{row['job']:38s} median {summary['median']:>12,.0f} rows/s  "
              f"(min {summary['min']:,.0f}, max {summary['max']:,.0f}, {len(summary['runs'])} runs)")
    out = RESULTS_DIR / f"{datetime.date.today().isoformat()}-spark.json"
    out.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"written to {out}")


if __name__ == "__main__":
    main()
