"""Batch-read throughput of format("odradek") into Spark's noop sink, beside Spark reading the same rows from Parquet.

A real broker in a child process gets N 100-byte records over two partitions; a local[2] session then reads them
through the data source (broker -> Fetch answers -> records.arrow -> Arrow batches -> Spark) and, in the same run,
from a Parquet copy written by the data source itself, so both figures come from the same machine under the same
load.
Usage: python bench/spark_bench.py [--records 2000000] [--repeat 3]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

from confluent_kafka import Producer

from odradek.embedded import BrokerProcess
from odradek.spark.kafka_io import ensure_topic
from odradek.spark.session import spark_session

TOPIC = "bench"
PARTITIONS = 2


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


def timed_rows_per_s(df, records: int) -> float:
    started = time.perf_counter()
    df.write.format("noop").mode("overwrite").save()
    return records / (time.perf_counter() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="odradek-spark-bench-") as scratch, \
            BrokerProcess(f"{scratch}/broker") as broker:
        started = time.perf_counter()
        fill(broker.bootstrap_servers, args.records)
        print(f"produced {args.records} records in {time.perf_counter() - started:.1f}s")
        spark = spark_session(app_name="odradek-spark-bench")
        try:
            source = (spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
                      .option("subscribe", TOPIC).load())
            source.write.parquet(f"{scratch}/parquet")
            parquet = spark.read.parquet(f"{scratch}/parquet")
            assert parquet.count() == args.records
            odradek_rates, parquet_rates = [], []
            for _ in range(args.repeat):
                odradek_rates.append(timed_rows_per_s(source, args.records))
                parquet_rates.append(timed_rows_per_s(parquet, args.records))
        finally:
            spark.stop()
    for name, rates in (("odradek source", odradek_rates), ("parquet", parquet_rates)):
        print(f"{name:15s} median {statistics.median(rates):>12,.0f} rows/s  "
              f"(min {min(rates):,.0f}, max {max(rates):,.0f}, {len(rates)} runs)")


if __name__ == "__main__":
    main()
