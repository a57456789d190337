"""Iceberg topics beside `odradek pipeline warehouse-load`, on the same data: what each costs in CPU and how far
behind the log its output stays.

A real broker (`odradek serve`, iceberg.commit.interval.ms 1000) gets N 100-byte records over two partitions of a
topic with odradek.iceberg.mode disabled. Then, on those same records:
- warehouse-load: `odradek pipeline warehouse-load --master local[2]` in a child process, loading them to Parquet;
  its CPU is that of the whole process tree (the Python driver, Spark's JVM and its Python workers), sampled from
  /proc every 50 ms, and its wall time from start to exit, JVM start included (what a scheduled load costs);
- Iceberg: the topic is switched to key_value and the broker's writer catches up on all N; its CPU is the broker
  process's (idle otherwise: no client is connected meanwhile), its wall time until the table's last commit
  covers the log end;
- steady state: records produced at a fixed rate for a while with the writer on; the table's lag behind the log
  end (records, and the age of the oldest record not yet in the table) sampled every 100 ms, and the broker's CPU
  per record over the run (produce and write together).
Prints a table and writes bench/results/<date>-iceberg.json.
Usage: python -m bench.iceberg_bench [--records 1000000] [--rate 20000] [--seconds 20]
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, NewTopic

from bench.processes import cpu_seconds, tree_cpu
from bench.suite import RESULTS_DIR, load, versions
from odradek.embedded import BrokerProcess
from odradek.iceberg.table import committed_offsets, open_catalog

PARTITIONS = 2
def fill(bootstrap: str, topic: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1_000_000})
    value = b"x" * 100
    for number in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=number % PARTITIONS)
                break
            except BufferError:
                producer.poll(0.01)
    assert producer.flush(120) == 0


def ends(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench-ends"})
    try:
        return {index: consumer.get_watermark_offsets(TopicPartition(topic, index), timeout=10)[1]
                for index in range(PARTITIONS)}
    finally:
        consumer.close()


def set_mode(bootstrap: str, topic: str, mode: str) -> None:
    resource = ConfigResource("topic", topic, incremental_configs=[
        ConfigEntry("odradek.iceberg.mode", mode, incremental_operation=AlterConfigOpType.SET)])
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.incremental_alter_configs([resource])[resource].result(30)


def table_offsets(catalog, topic: str) -> dict[int, int]:
    try:
        return committed_offsets(catalog.load_table(("odradek", topic)))
    except Exception:  # not made yet
        return {}


def warehouse_load(bootstrap: str, topic: str, output: Path) -> dict:
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "odradek", "pipeline", "warehouse-load", "--topics", topic,
                              "--output", str(output), "--master", "local[2]", "--bootstrap-server", bootstrap],
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    done = threading.Event()
    sampled: dict[int, float] = {}
    sampler = threading.Thread(target=lambda: sampled.update(tree_cpu(child.pid, done)))
    sampler.start()
    out, _ = child.communicate(timeout=1800)
    done.set()
    sampler.join()
    assert child.returncode == 0, out
    return {"wall_s": time.perf_counter() - started, "cpu_s": sum(sampled.values()), "output": out.strip()[-200:]}


def iceberg_catch_up(broker: BrokerProcess, catalog, topic: str, wanted: dict[int, int]) -> dict:
    before = cpu_seconds(broker.process.pid)
    started = time.perf_counter()
    set_mode(broker.bootstrap_servers, topic, "key_value")
    while any(table_offsets(catalog, topic).get(index, 0) < end for index, end in wanted.items()):
        time.sleep(0.05)
    return {"wall_s": time.perf_counter() - started, "cpu_s": cpu_seconds(broker.process.pid) - before}


def steady(broker: BrokerProcess, catalog, topic: str, rate: int, seconds: float) -> dict:
    """Produce `rate` records/s for `seconds` with the writer on; the table's lag, sampled."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5})
    value = b"y" * 100
    produced_at: list[float] = []  # when the n-th record of this run was produced, by partition order below
    lags, ages = [], []
    start_ends = ends(broker.bootstrap_servers, topic)
    before = cpu_seconds(broker.process.pid)
    started = time.perf_counter()
    next_sample = started
    sent = 0
    while (now := time.perf_counter()) - started < seconds:
        due = int((now - started) * rate)
        while sent < due:
            producer.produce(topic, value, partition=sent % PARTITIONS)
            produced_at.append(time.perf_counter())
            sent += 1
        producer.poll(0)
        if now >= next_sample:
            producer.flush(10)
            end = {index: start_ends[index] + (sent + PARTITIONS - 1 - index) // PARTITIONS
                   for index in range(PARTITIONS)}
            table = table_offsets(catalog, topic)
            behind = {index: end[index] - table.get(index, 0) for index in range(PARTITIONS)}
            lags.append(sum(behind.values()))
            oldest = min((table.get(index, 0) - start_ends[index]) * PARTITIONS + index
                         for index in range(PARTITIONS))  # the first record of this run not in the table
            ages.append(time.perf_counter() - produced_at[oldest] if 0 <= oldest < sent else 0.0)
            next_sample = now + 0.1
        time.sleep(0.001)
    producer.flush(30)
    cpu = cpu_seconds(broker.process.pid) - before
    lags.sort()
    ages.sort()
    return {"records": sent, "rate": rate, "seconds": seconds, "broker_cpu_s": cpu,
            "broker_cpu_us_per_record": cpu / sent * 1e6,
            "lag_records_p50": lags[len(lags) // 2], "lag_records_max": lags[-1],
            "lag_s_p50": ages[len(ages) // 2], "lag_s_max": ages[-1]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=20.0)
    args = parser.parse_args()
    meta = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "host": socket.gethostname(),
            "cpus": os.cpu_count(), "load_before": load(),
            "sizes": {"records": args.records, "value_bytes": 100, "partitions": PARTITIONS,
                      "iceberg.commit.interval.ms": 1000, "steady_rate": args.rate, "steady_seconds": args.seconds},
            "versions": versions()}
    with tempfile.TemporaryDirectory(prefix="odradek-iceberg-bench-") as scratch:
        broker = BrokerProcess(Path(scratch) / "data", settings={"iceberg.commit.interval.ms": 1000})
        broker.start()
        try:
            topic = "bench"
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(30)
            fill(broker.bootstrap_servers, topic, args.records)
            wanted = ends(broker.bootstrap_servers, topic)
            catalog = open_catalog({"iceberg.catalog.uri": "", "iceberg.warehouse": ""}, broker.data_dir)
            loaded = warehouse_load(broker.bootstrap_servers, topic, Path(scratch) / "warehouse")
            caught_up = iceberg_catch_up(broker, catalog, topic, wanted)
            steady_state = steady(broker, catalog, topic, args.rate, args.seconds)
        finally:
            broker.stop()
    meta["load_after"] = load()
    rows = {"warehouse-load": {**loaded, "cpu_us_per_record": loaded["cpu_s"] / args.records * 1e6},
            "iceberg catch-up": {**caught_up, "cpu_us_per_record": caught_up["cpu_s"] / args.records * 1e6},
            "iceberg steady": steady_state}
    print(f"{args.records} records of 100 bytes, {PARTITIONS} partitions (load {meta['load_before']})")
    for name in ("warehouse-load", "iceberg catch-up"):
        row = rows[name]
        print(f"{name:18} wall {row['wall_s']:7.1f} s  CPU {row['cpu_s']:7.1f} s  "
              f"{row['cpu_us_per_record']:6.1f} us/record")
    print(f"iceberg steady     {args.rate} records/s for {args.seconds:.0f} s: broker CPU "
          f"{steady_state['broker_cpu_us_per_record']:.1f} us/record (produce and write), table lag p50 "
          f"{steady_state['lag_s_p50']:.2f} s / max {steady_state['lag_s_max']:.2f} s "
          f"({steady_state['lag_records_p50']} / {steady_state['lag_records_max']} records)")
    RESULTS_DIR.mkdir(exist_ok=True)
    path = RESULTS_DIR / f"{datetime.date.today()}-iceberg.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=2) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
