"""Time from spawn to ready (the first ApiVersions answer), empty, and with a big log after SIGKILL and cleanly.

Empty start is measured for every broker. The crash case fills one partition through the client (10 KB values in 1 MB
batches, so the fill is quick), kills the broker with SIGKILL at once, so nothing has been fsynced or checkpointed, and
times the restart, which must recover that log; then stops it cleanly and times one more start. Odradek and Kafka get
the full log size (1 GiB by default; each recovers its unflushed segments before it answers); noida-db keeps its whole
state in one JSON file, so it gets a smaller fill (named in the metric) to stay within the run's time; Tansu here keeps
everything in memory, so a restart has nothing to recover and is not measured. Kafka's storage is formatted before its
first start and not timed (bench/peers.py). Ready means little if the data is gone, so the share of acknowledged records
still there after the restart is recorded beside it (acks=1, no fsync was asked for: the page cache keeps them across a
process crash). Every repetition starts from a fresh data directory.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench import client, peers
from bench.measure import Results

WORKLOAD = "startup"
FILL_VALUE_SIZE = 10_000
FILL_PRODUCER = {"acks": "1", "linger.ms": 20, "batch.size": 1_000_000, "message.max.bytes": 1_000_000,
                 "queue.buffering.max.kbytes": 1_000_000}


def fresh_broker(name: str, tmp: str, round_number: int) -> peers.Broker | peers.KafkaBroker:
    return peers.broker(name, Path(tmp) / f"{name}-{round_number}")


def crash_restart(results: Results, name: str, fill_bytes: int, round_number: int) -> None:
    label = f"{fill_bytes >> 20} MiB log"
    with tempfile.TemporaryDirectory(prefix=f"bench-startup-{name}-") as tmp:
        broker = fresh_broker(name, tmp, round_number)
        broker.start()
        try:
            client.create_topic(broker.bootstrap, "filled", 1)
            producer = client.producer(broker.bootstrap, **FILL_PRODUCER)
            records = fill_bytes // FILL_VALUE_SIZE
            client.produce(producer, "filled", records, 1, value_size=FILL_VALUE_SIZE)
            del producer
            broker.kill()
            results.add(WORKLOAD, f"ready after SIGKILL, {label}", name, broker.start(), unit="s", better="lower")
            kept = client.high_watermark(broker.bootstrap, "filled") / (records + 1)  # + the warm-up record
            results.add(WORKLOAD, f"acked records kept after SIGKILL, {label}", name, kept,
                        unit="fraction")
            broker.stop()
            results.add(WORKLOAD, f"ready after clean stop, {label}", name, broker.start(), unit="s",
                        better="lower")
        finally:
            broker.stop()


def run(results: Results, brokers: list[str], sizes) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        for round_number in range(sizes.repeat):
            for name in brokers:
                try:
                    broker = fresh_broker(name, tmp, round_number)
                    results.add(WORKLOAD, "ready, empty", name, broker.start(), unit="s", better="lower")
                    broker.stop()
                except Exception as exc:
                    results.error(WORKLOAD, "ready, empty", name, repr(exc), unit="s", better="lower")
    fills = {"noida-db": sizes.peer_crash_log_bytes}
    for round_number in range(sizes.repeat):
        for name in brokers:
            if not peers.PERSISTENT[name]:
                continue
            try:
                crash_restart(results, name, fills.get(name, sizes.crash_log_bytes), round_number)
            except Exception as exc:
                results.error(WORKLOAD, "ready after SIGKILL", name, repr(exc), unit="s", better="lower")
    for name in brokers:
        if not peers.PERSISTENT[name]:
            results.note(WORKLOAD, "ready after SIGKILL", f"{name}: keeps its data in memory, nothing to recover")
