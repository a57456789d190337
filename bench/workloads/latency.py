"""End-to-end latency at fixed rates: p50, p99 and p99.9, measured at the consumer, with the Python client at
`sizes.latency_rate` (10k records/s by default) and with the C load generator at each of `sizes.latency_rates`.

The C load generator's paced producer (acks=1 here, linger.ms=0) keeps its schedule, so its figures are the broker's; a
run whose producer fell behind is an error, not a figure (`c_client`, which the replication workload uses too). With the
Python client, the producer runs in its own process (spawned, so no librdkafka threads are forked) and stamps each
100-byte value with CLOCK_MONOTONIC, which is one clock for every process on the machine; the consumer subtracts that
stamp from its own clock when `poll` hands it the record. Producer and consumer are never in one interpreter, so neither
waits for the other's GIL. The producer sends with linger.ms=0 and acks=1, paced by a schedule rather than by sleeps of
one record each, and the first second of every run is a warm-up that is not counted.
"""

from __future__ import annotations

import multiprocessing
import struct
import time

from confluent_kafka import Consumer, Producer, TopicPartition

from bench import client, loadgen, peers
from bench.measure import Results, percentile

WORKLOAD = "latency"
WARMUP_SECONDS = 1.0
_STAMP = struct.Struct(">q")


def paced_producer(bootstrap: str, topic: str, rate: int, seconds: float, acks: str = "1") -> None:
    """Send rate*seconds stamped records, each when its slot on the schedule has come."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0})
    padding = b"x" * (client.RECORD_SIZE - _STAMP.size)
    total = int(rate * seconds)
    sent = 0
    started = time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - started) * rate) + 1)
        while sent < due:
            producer.produce(topic, _STAMP.pack(time.monotonic_ns()) + padding)
            sent += 1
        producer.poll(0)
        time.sleep(0.0002)
    producer.flush(30)


def measure(bootstrap: str, topic: str, rate: int, seconds: float, *, replication_factor: int = 1,
            acks: str = "1") -> list[float]:
    """Latencies in milliseconds of the records sent after the warm-up, sorted. With replication, the topic has
    min.insync.replicas=2."""
    client.create_topic(bootstrap, topic, 1, replication_factor,
                        {"min.insync.replicas": "2"} if replication_factor > 1 else None)
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", **client.CONSUMER})
    consumer.assign([TopicPartition(topic, 0, 0)])
    consumer.poll(0.5)  # connect and start fetching before the first record is sent
    sender = multiprocessing.get_context("spawn").Process(
        target=paced_producer, args=(bootstrap, topic, rate, seconds + WARMUP_SECONDS, acks))
    sender.start()
    count_from = None  # the first record's stamp plus the warm-up
    expected = int(rate * (seconds + WARMUP_SECONDS))
    latencies = []
    received = 0
    deadline = time.monotonic() + seconds + WARMUP_SECONDS + 30
    while received < expected and time.monotonic() < deadline:
        message = consumer.poll(0.1)
        if message is None or message.error():
            continue
        now = time.monotonic_ns()
        stamp = _STAMP.unpack_from(message.value())[0]
        received += 1
        if count_from is None:
            count_from = stamp + int(WARMUP_SECONDS * 1e9)
        if stamp >= count_from:
            latencies.append((now - stamp) / 1e6)
    consumer.close()
    sender.join(30)
    if received < expected:
        raise RuntimeError(f"{topic}: received {received} of {expected} records")
    return sorted(latencies)


def c_client(results: Results, workload: str, subject: str, bootstrap: str, topic: str, metric: str, rate: int,
             seconds: float, *, replication_factor: int = 1, acks: str = "1") -> None:
    """The C load generator's paced producer (linger.ms=0) and consumer on a new topic of one partition: p50, p99,
    p99.9 and max "at <metric>", and how far the producer lagged its schedule; a lagging run is recorded as an
    error, not a figure. With replication the topic has min.insync.replicas=2."""
    try:
        client.create_topic(bootstrap, topic, 1, replication_factor,
                            {"min.insync.replicas": "2"} if replication_factor > 1 else None)
        figures = loadgen.latency(bootstrap, topic, rate, seconds, config={"acks": acks, "linger.ms": 0})
    except Exception as exc:
        results.error(workload, f"p99 at {metric}", subject, repr(exc), unit="ms", better="lower")
        return
    if not figures.valid:
        results.error(workload, f"p99 at {metric}", subject, figures.verdict(), unit="ms", better="lower")
        return
    for label, value in (("p50", figures.p50), ("p99", figures.p99), ("p99.9", figures.p99_9), ("max", figures.max)):
        results.add(workload, f"{label} at {metric}", subject, value, unit="ms", better="lower")
    results.add(workload, f"producer behind schedule at {metric}", subject, figures.behind_schedule_ms, unit="ms",
                better="lower")


def run(results: Results, brokers: list[str], sizes) -> None:
    rate = sizes.latency_rate
    for round_number, broker in peers.rounds(results, WORKLOAD, brokers, sizes.repeat):
        for c_rate in sizes.latency_rates:
            if loadgen.BUILD_DIR.exists():
                c_client(results, WORKLOAD, broker.name, broker.bootstrap, f"latency-c{c_rate}-{round_number}",
                         f"{c_rate} records/s, C client", c_rate, sizes.latency_seconds)
        try:
            latencies = measure(broker.bootstrap, f"latency-{round_number}", rate, sizes.latency_seconds)
        except Exception as exc:
            results.error(WORKLOAD, f"p99 at {rate} records/s", broker.name, repr(exc), unit="ms")
            continue
        for label, fraction in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999)):
            results.add(WORKLOAD, f"{label} at {rate} records/s", broker.name, percentile(latencies, fraction),
                        unit="ms", better="lower")
