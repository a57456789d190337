"""Produce and consume throughput with confluent-kafka, Odradek beside the peer brokers in the same run.

100-byte records into one topic; each point is repeated and reported as the median with the spread, because these
machines are shared and noisy. Usage: python bench/throughput.py [--records N] [--repeat R] [--partitions P]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from confluent_kafka import Consumer, Producer, TopicPartition  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import peers  # noqa: E402


def produce(bootstrap: str, topic: str, records: int, acks: str) -> float:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
                         "queue.buffering.max.kbytes": 2_000_000})
    value = b"x" * 100
    started = time.perf_counter()
    for _ in range(records):
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.01)
            producer.produce(topic, value)
    producer.flush(120)
    return records / (time.perf_counter() - started)


def consume(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    seen = 0
    started = time.perf_counter()
    deadline = started + 120
    while seen < records and time.perf_counter() < deadline:
        seen += sum(1 for m in consumer.consume(10000, 1.0) if not m.error())
    elapsed = time.perf_counter() - started
    consumer.close()
    return seen / elapsed


def run(broker_name: str, records: int, repeat: int, partitions: int, acks: str) -> dict:
    produced, consumed = [], []
    with peers.BROKERS[broker_name]() as bootstrap:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for attempt in range(repeat):
            topic = f"bench-{attempt}-{int(time.time())}"
            admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(20)
            produced.append(produce(bootstrap, topic, records, acks))
            consumed.append(consume(bootstrap, topic, partitions, records))
    return {"produce": produced, "consume": consumed}


def summary(rates: list[float]) -> str:
    return f"{statistics.median(rates) / 1000:8.0f}k/s (spread {min(rates) / 1000:.0f}-{max(rates) / 1000:.0f}k)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--acks", default="1")
    parser.add_argument("--brokers", default=",".join(peers.BROKERS))
    args = parser.parse_args()
    results = {}
    for name in args.brokers.split(","):
        try:
            results[name] = run(name, args.records, args.repeat, args.partitions, args.acks)
        except RuntimeError as exc:
            print(f"{name}: skipped ({exc})")
    print(f"{args.records} records of 100 bytes, {args.partitions} partition(s), acks={args.acks}, "
          f"median of {args.repeat}")
    for name, rates in results.items():
        print(f"  {name:9s} produce {summary(rates['produce'])}   consume {summary(rates['consume'])}")
    if "odradek" in results:
        ours = {kind: statistics.median(r) for kind, r in results["odradek"].items()}
        for name, rates in results.items():
            if name != "odradek":
                print(f"  odradek / {name}: produce {ours['produce'] / statistics.median(rates['produce']):.2f}x, "
                      f"consume {ours['consume'] / statistics.median(rates['consume']):.2f}x")


if __name__ == "__main__":
    main()
