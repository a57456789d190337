"""`odradek perf produce` / `odradek perf consume`: throughput and latency, like kafka-producer-perf-test and
kafka-consumer-perf-test.

Both drive confluent-kafka directly (no per-record Python layer in the way, so they measure the broker, not our
wrapper). Produce latency is per record, from `produce()` to its delivery report, as kafka-producer-perf-test's;
consume reports kafka-consumer-perf-test's columns, as it defines them (no latency: it has none). A progress bar goes to
stderr only when stderr is a terminal; the results go to stdout.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import confluent_kafka

from odradek.cli.common import add_client_options, add_client_properties, command_config
from odradek.client import ClientError
from odradek.client.errors import LIBRDKAFKA_LOGGER

MB = 1024 * 1024
PERCENTILES = (50, 95, 99, 99.9)


def add_commands(commands) -> None:
    perf = commands.add_parser("perf", help="measure produce or consume throughput and latency",
                               description="Measure throughput and latency against a cluster.")
    actions = perf.add_subparsers(dest="action", metavar="ACTION", required=True)

    produce = actions.add_parser("produce", help="produce records as fast as allowed",
                                 description="Produce fixed-size records and report records/s, MB/s and latency "
                                             "percentiles.")
    produce.add_argument("--topic", required=True, help="topic to write to (created by the broker if missing)")
    produce.add_argument("--num-records", "-n", type=int, required=True, help="how many records to send")
    produce.add_argument("--record-size", "-s", type=int, default=100, help="value bytes per record (default 100)")
    produce.add_argument("--throughput", type=float, default=-1,
                         help="records per second to aim at (default -1: no limit)")
    add_client_properties(produce, "producer")
    produce.set_defaults(run=run_produce)

    consume = actions.add_parser("consume", help="consume records as fast as possible",
                                 description="Consume records and report kafka-consumer-perf-test's figures: MB "
                                             "and records per second, rebalance and fetch time.")
    consume.add_argument("--topic", required=True, help="topic to read, from its earliest offset")
    consume.add_argument("--messages", "-n", type=int, required=True, help="records to consume")
    consume.add_argument("--group", help="consume in this group (default: assign every partition, no group)")
    consume.add_argument("--timeout-ms", type=int, default=10_000,
                         help="give up when nothing arrives for this long (default 10000)")
    add_client_properties(consume, "consumer")
    consume.set_defaults(run=run_consume)

    for action in (produce, consume):
        add_client_options(action)


class Progress:
    """`[#####.....]  52%  12345 rec/s` redrawn in place on stderr, at most ten times a second, only on a TTY."""

    WIDTH = 30

    def __init__(self, total: int, stream=sys.stderr):
        self.total = max(total, 1)
        self.stream = stream
        self.enabled = stream.isatty()
        self.started = time.monotonic()
        self._drawn_at = 0.0

    def update(self, done: int) -> None:
        now = time.monotonic()
        if not self.enabled or now - self._drawn_at < 0.1:
            return
        self._drawn_at = now
        filled = self.WIDTH * done // self.total
        rate = done / max(now - self.started, 1e-9)
        self.stream.write(f"\r[{'#' * filled}{'.' * (self.WIDTH - filled)}] {100 * done // self.total:3d}% "
                          f"{rate:,.0f} rec/s")
        self.stream.flush()

    def finish(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * (self.WIDTH + 30) + "\r")
            self.stream.flush()


def percentile(sorted_values: list[float], p: float) -> float:
    if not sorted_values:
        return 0.0
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * p / 100))]


def latency_summary(latencies_ms: list[float]) -> str:
    latencies_ms.sort()
    average = sum(latencies_ms) / len(latencies_ms) if latencies_ms else 0.0
    maximum = latencies_ms[-1] if latencies_ms else 0.0
    parts = [f"{average:.2f} ms avg latency", f"{maximum:.2f} ms max latency"]
    parts += [f"{percentile(latencies_ms, p):.2f} ms {p}th" for p in PERCENTILES]
    return ", ".join(parts)


def run_produce(args: argparse.Namespace) -> int:
    settings = {"bootstrap.servers": args.bootstrap_server, "linger.ms": 5, "acks": "1",
                "queue.buffering.max.messages": 1_000_000, "logger": LIBRDKAFKA_LOGGER, **command_config(args)}
    producer = confluent_kafka.Producer(settings)
    payload = os.urandom(args.record_size)
    latencies: list[float] = []
    failures: list = []

    def delivered(error, _message, sent_at: float) -> None:
        if error is not None:
            failures.append(error)
        else:
            latencies.append((time.perf_counter() - sent_at) * 1000)

    progress = Progress(args.num_records)
    started = time.perf_counter()
    for i in range(args.num_records):
        if args.throughput > 0:
            delay = started + i / args.throughput - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
        sent_at = time.perf_counter()
        while True:
            try:
                producer.produce(args.topic, payload,
                                 on_delivery=lambda error, message, at=sent_at: delivered(error, message, at))
                break
            except BufferError:
                producer.poll(0.01)
        producer.poll(0)
        progress.update(len(latencies))
    remaining = producer.flush(60)
    elapsed = time.perf_counter() - started
    progress.finish()
    if failures or remaining:
        raise ClientError(f"{len(failures) + remaining} of {args.num_records} record(s) failed"
                          + (f"; first: {failures[0].str()}" if failures else ""))
    rate = args.num_records / elapsed
    print(f"{args.num_records} records sent, {rate:.1f} records/sec "
          f"({rate * args.record_size / MB:.2f} MB/sec), {latency_summary(latencies)}.")
    return 0


def run_consume(args: argparse.Namespace) -> int:
    """kafka-consumer-perf-test's figures: from the start to the last record, of which rebalance.time.ms is the
    wait for the group's assignment (none without --group) and fetch.time.ms the rest, the rates over each."""
    settings = {"bootstrap.servers": args.bootstrap_server, "group.id": args.group or "odradek-perf-consumer",
                "enable.auto.commit": args.group is not None, "auto.offset.reset": "earliest",
                "logger": LIBRDKAFKA_LOGGER, **command_config(args)}
    consumer = confluent_kafka.Consumer(settings)
    started_ms = time.time() * 1000
    started = last_arrival = time.perf_counter()
    joined: list[float] = []  # when the group's assignment came
    if args.group is not None:
        consumer.subscribe([args.topic], on_assign=lambda consumer, partitions: (
            joined or joined.append(time.perf_counter()), consumer.assign(partitions)))
    else:
        topic = consumer.list_topics(args.topic, timeout=10).topics.get(args.topic)
        if topic is None or topic.error is not None or not topic.partitions:
            consumer.close()
            raise ClientError(f"UNKNOWN_TOPIC_OR_PART: topic {args.topic!r} does not exist", "UNKNOWN_TOPIC_OR_PART")
        consumer.assign([confluent_kafka.TopicPartition(args.topic, p, confluent_kafka.OFFSET_BEGINNING)
                         for p in topic.partitions])
    progress = Progress(args.messages)
    count = size = 0
    try:
        while count < args.messages and time.perf_counter() - last_arrival < args.timeout_ms / 1000:
            batch = consumer.consume(min(1000, args.messages - count), 0.1)
            for message in batch:
                if message.error() is not None:
                    raise ClientError.of(message.error())
                count += 1
                size += len(message.value() or b"")
            if batch:
                last_arrival = time.perf_counter()
                progress.update(count)
    finally:
        consumer.close()
    progress.finish()
    elapsed = max(last_arrival - started, 1e-9)
    rebalance = min(joined[0] - started, elapsed) if joined else 0.0
    fetch = max(elapsed - rebalance, 1e-9)
    print("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, "
          "fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")
    print(f"{_clock(started_ms / 1000)}, {_clock(started_ms / 1000 + elapsed)}, {size / MB:.4f}, "
          f"{size / MB / elapsed:.4f}, {count}, {count / elapsed:.4f}, {rebalance * 1000:.0f}, {fetch * 1000:.0f}, "
          f"{size / MB / fetch:.4f}, {count / fetch:.4f}")
    if count < args.messages:
        raise ClientError(f"consumed {count} of {args.messages} records before --timeout-ms passed with nothing new")
    return 0


def _clock(epoch_seconds: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(epoch_seconds)) + f":{int(epoch_seconds * 1000) % 1000:03d}"
