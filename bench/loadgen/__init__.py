"""The C load generator (built by `make loadgen` into build/loadgen) driven from Python: spawn several of its
processes at once against one broker and sum what they report.

The Python client costs about 1 us of client CPU per record, ten times what the brokers spend, so with it every
broker measures the client. Two pairs of small C programs replace it. producer.c and consumer.c go through
librdkafka, what a C client sees; but librdkafka's own cost (0.2-0.4 us of client CPU per record) is above the
brokers' too, and on 2 cores it is what saturates. wire-producer.c and wire-consumer.c (`wire=True`) speak the
protocol themselves, a send per batch of prebuilt bytes and a read per answer (0.03 us per record), so that the
broker is what saturates. The figures that show which side did (CPU per record and cores busy, for each side) come
out of `Run`. Each process prints one JSON line (common.h):
its records, its span on CLOCK_MONOTONIC (one clock for every process) and its own CPU time from getrusage. A
run's rate is every process's records over the span from the first one's start to the last one's end.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
from pathlib import Path

BUILD_DIR = Path(__file__).resolve().parents[2] / "build" / "loadgen"
PRODUCER = BUILD_DIR / "loadgen-producer"
CONSUMER = BUILD_DIR / "loadgen-consumer"
WIRE_PRODUCER = BUILD_DIR / "loadgen-wire-producer"
WIRE_CONSUMER = BUILD_DIR / "loadgen-wire-consumer"
TIMEOUT = 300


class Unavailable(RuntimeError):
    """The binaries are not built (`make loadgen` builds them; it needs gcc and librdkafka-dev)."""


@dataclasses.dataclass(frozen=True)
class Run:
    """What all processes of one run did together."""

    records: int
    bytes: int
    seconds: float  # first start to last end
    client_cpu: float  # seconds, every process over its own timed span
    partition_records: tuple[int, ...]  # acknowledged (producers) or read (consumers) per partition

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / self.seconds / (1 << 20)

    @classmethod
    def of(cls, reports: list[dict]) -> Run:
        return cls(records=sum(r["records"] for r in reports), bytes=sum(r["bytes"] for r in reports),
                   seconds=max(r["ended"] for r in reports) - min(r["started"] for r in reports),
                   client_cpu=sum(r["cpu_user"] + r["cpu_system"] for r in reports),
                   partition_records=tuple(map(sum, zip(*(r["partition_records"] for r in reports)))))


def settings(config: dict[str, object]) -> list[str]:
    return [arg for name, value in config.items() for arg in ("-X", f"{name}={value}")]


def require() -> None:
    missing = [str(path) for path in (PRODUCER, CONSUMER, WIRE_PRODUCER, WIRE_CONSUMER) if not path.exists()]
    if missing:
        raise Unavailable(f"load generator not built ({', '.join(missing)}): run `make loadgen`")


def run_processes(commands: list[list[str]]) -> Run:
    """Start every command at once, wait for all, and sum their reports; any failure raises with its message."""
    return Run.of(reports_of(commands))


def reports_of(commands: list[list[str]]) -> list[dict]:
    """Every command's JSON report, started at once and waited for; any failure raises with its message."""
    require()
    processes = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for command in commands]
    reports, failures = [], []
    for process in processes:
        try:
            out, err = process.communicate(timeout=TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
        lines = out.strip().splitlines()
        if process.returncode != 0 or not lines:
            failures.append(f"exit {process.returncode}: {(lines[-1] if lines else '')} {err.strip()[-300:]}")
        else:
            reports.append(json.loads(lines[-1]))
    if failures:
        raise RuntimeError(f"{len(failures)} of {len(commands)} load generator processes failed: {failures[0]}")
    return reports


def produce(bootstrap: str, topic: str, records: int, *, processes: int = 1, size: int = 100, keys: int = 0,
            config: dict[str, object] | None = None, wire_partitions: int = 0) -> Run:
    """`processes` producers sending records // processes records each (the remainder to the first); with
    `wire_partitions` (the topic's partition count) the wire producers, which send no keys."""
    return run_processes(producer_commands(bootstrap, topic, records, processes, size, keys, config,
                                           wire_partitions))


def consume(bootstrap: str, topic: str, partition_records: tuple[int, ...], *, processes: int = 1,
            config: dict[str, object] | None = None, wire: bool = False) -> Run:
    """`processes` consumers (`wire`: the wire consumers) sharing the topic's partitions (p % processes), each
    reading its partitions from the start until it has the records `partition_records` says they hold (a produce
    Run's). Raises unless every partition gave exactly those records."""
    return read_exactly(topic, partition_records,
                        run_processes(consumer_commands(bootstrap, topic, partition_records, processes, config, wire)))


def produce_while_consumed(bootstrap: str, topic: str, records: int, partition_records: tuple[int, ...], *,
                           producers: int, consumers: int, config: dict[str, object] | None = None,
                           wire_partitions: int) -> tuple[Run, Run]:
    """The wire producers and the wire consumers of `produce` and `consume` started together on a new topic: the
    consumers tail it while it fills, until they have what `partition_records` says the same producers write (a
    Run of theirs before). (produced, consumed)."""
    sending = producer_commands(bootstrap, topic, records, producers, 100, 0, config, wire_partitions)
    reading = consumer_commands(bootstrap, topic, partition_records, consumers, None, True)
    reports = reports_of(sending + reading)
    produced = Run.of(reports[:len(sending)])
    if produced.partition_records != tuple(partition_records):
        raise RuntimeError(f"{topic}: producers wrote {produced.partition_records}, expected {partition_records}")
    return produced, read_exactly(topic, partition_records, Run.of(reports[len(sending):]))


def producer_commands(bootstrap: str, topic: str, records: int, processes: int, size: int, keys: int,
                      config: dict[str, object] | None, wire_partitions: int) -> list[list[str]]:
    shares = [records // processes + (records % processes if i == 0 else 0) for i in range(processes)]
    program = [str(WIRE_PRODUCER), "--partitions", str(wire_partitions)] if wire_partitions else [str(PRODUCER)]
    if wire_partitions and keys:
        raise ValueError("the wire producer sends no keys")
    return [[*program, "--bootstrap", bootstrap, "--topic", topic, "--records", str(share), "--size", str(size),
             "--keys", str(keys), *settings(config or {})] for share in shares]


def consumer_commands(bootstrap: str, topic: str, partition_records: tuple[int, ...], processes: int,
                      config: dict[str, object] | None, wire: bool) -> list[list[str]]:
    shares = [sum(partition_records[i::processes]) for i in range(processes)]
    program = [str(WIRE_CONSUMER), "--partitions", str(len(partition_records))] if wire else [str(CONSUMER)]
    return [[*program, "--bootstrap", bootstrap, "--topic", topic, "--records", str(share), "--member", str(i),
             "--members", str(processes), *settings(config or {})] for i, share in enumerate(shares) if share]


def read_exactly(topic: str, partition_records: tuple[int, ...], done: Run) -> Run:
    if done.partition_records != tuple(partition_records):
        raise RuntimeError(f"{topic}: read {done.partition_records} records per partition, "
                           f"expected {tuple(partition_records)}")
    return done


BEHIND_LIMIT_MS = 50.0  # a producer that sent any record later than this after its slot did not offer the load


@dataclasses.dataclass(frozen=True)
class Latency:
    """End-to-end latency of one paced run (producer send to consumer receipt), in ms, and whether it counts."""

    p50: float
    p99: float
    p99_9: float
    max: float
    count: int
    rate_target: float
    records_per_s: float  # achieved by the producer, first send to last acknowledgement
    behind_schedule_ms: float

    @property
    def valid(self) -> bool:
        return self.behind_schedule_ms <= BEHIND_LIMIT_MS

    def verdict(self) -> str:
        return "valid" if self.valid else (f"NOT VALID: the producer fell {self.behind_schedule_ms:.0f} ms behind its "
                                           f"schedule (limit {BEHIND_LIMIT_MS:.0f} ms)")


def latency(bootstrap: str, topic: str, rate: float, seconds: float, *, warmup_seconds: float = 1.0,
            config: dict[str, object] | None = None) -> Latency:
    """One producer at `rate` records/s for warmup_seconds + seconds into `topic` (one partition: created by the
    caller), read by one consumer started first; latencies of the warm-up's records are not counted."""
    require()
    records, warmup = int(rate * (seconds + warmup_seconds)), int(rate * warmup_seconds)
    consumer = subprocess.Popen([str(CONSUMER), "--bootstrap", bootstrap, "--topic", topic, "--records",
                                 str(records), "--latency", str(warmup), *settings(config or {})],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        consumer.stdout.readline()  # {"assigned": true}, or "" if it failed (then the run below says why)
        [sent] = reports_of([[str(PRODUCER), "--bootstrap", bootstrap, "--topic", topic, "--records",
                                   str(records), "--rate", str(rate), *settings(config or {})]])
        out, err = consumer.communicate(timeout=TIMEOUT)
    finally:
        consumer.kill()
    lines = out.strip().splitlines()
    if consumer.returncode != 0 or not lines:
        raise RuntimeError(f"latency consumer: exit {consumer.returncode}: {err.strip()[-300:]}")
    read = json.loads(lines[-1])
    figures = read["latency_ms"]
    return Latency(p50=figures["p50"], p99=figures["p99"], p99_9=figures["p99_9"], max=figures["max"],
                   count=figures["count"], rate_target=rate, records_per_s=sent["records_per_s"],
                   behind_schedule_ms=sent["behind_schedule_ms"])
