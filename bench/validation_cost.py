"""Broker CPU per record produced, for two or more source trees of Odradek in the same run: what record validation
costs and what a change to it wins back.

`python -m bench.validation_cost before=/path/to/old/tree after=.` starts a fresh broker from each tree in turn
(PYTHONPATH set to the tree and the tree as the current directory, which `python -m` puts first on the path, so the
broker and its validation workers run that code), interleaved round by round,
and produces keyed records from one confluent-kafka producer (acks=1, linger 5 ms, 1 MB batches), 100-byte and
1 KiB values, codecs none, lz4 and zstd, on an ordinary and on a compacted topic. It prints records/s and the
broker's CPU per record (its threads and its worker processes, bench.peers' accounting), medians of the rounds.
On a shared, loaded two-core machine the figures move by 20-30% from run to run; compare trees within one run.

`--in-process` measures the validation alone instead, which a loaded machine disturbs far less: for each tree, a
child process (this file run with the tree first on the path) times `validation.validate_records` on the batches
that producer sends (1 MB, the same records, checked as the broker checks them on the event loop) in thread CPU,
and prints its cost per record beside the walker alone on 8,000 100-byte records.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka.admin import AdminClient, NewTopic

if __name__ == "__main__" and "--child" in sys.argv:  # run as a file, with a tree first on the path
    sys.path.insert(0, os.getcwd())
from bench import client  # noqa: E402
from bench.peers import Broker  # noqa: E402
from odradek.embedded import BrokerProcess  # noqa: E402

RECORDS = {100: 1_000_000, 1024: 200_000}
CODECS = ("none", "lz4", "zstd")
POLICIES = ("delete", "compact")


class _Measured(Broker):
    """bench.peers' CPU accounting (threads, children) over an embedded broker process."""

    def __init__(self, process: BrokerProcess):  # noqa: the parent's constructor builds a command we do not use
        self.process = process.process


def one_case(broker: BrokerProcess, topic: str, size: int, codec: str, policy: str) -> tuple[float, float]:
    records = RECORDS[size]
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": policy})])[topic].result(60)
    producer = client.producer(broker.bootstrap_servers, acks="1", **client.THROUGHPUT_PRODUCER,
                               **{"compression.type": codec})
    chunk = [{"key": b"key-%05d" % i, "value": os.urandom(8).hex().encode() + b"x" * (size - 16)}
             for i in range(client.CHUNK)]
    measured = _Measured(broker)
    before = measured.cpu_seconds()
    rate = client.produce(producer, topic, records, 1, messages=chunk)
    return rate, (measured.cpu_seconds() - before) / records * 1e6


BATCH_BYTES = 1_000_000  # the producer's batch.size
REPEATS = 200  # timings per case in a child, of which the median


def child_figures() -> dict[str, float]:
    """In a child process: us of thread CPU per record that validate_records costs on each case's batch, and us
    per 8,000 100-byte records that the walker alone costs."""
    from odradek.config import LogConfig
    from odradek.records import compression
    from odradek.records.batch import BATCH_HEADER_SIZE, Record, encode_batch, validate_batches
    from odradek.records.validation import validate_records

    def thread_us(call) -> float:
        call()
        samples = []
        for _ in range(REPEATS):
            started = time.thread_time_ns()
            call()
            samples.append(time.thread_time_ns() - started)
        return statistics.median(samples) / 1000

    def records(size: int, count: int) -> list[Record]:  # as one_case produces them
        return [Record(i, now, b"key-%05d" % i, os.urandom(8).hex().encode() + b"x" * (size - 16))
                for i in range(count)]

    figures = {}
    now = int(time.time() * 1000)
    time_range = LogConfig.resolve().create_time_range(now)
    for size, codec, policy in itertools.product(RECORDS, CODECS, POLICIES):
        count = BATCH_BYTES // (size + 20)
        batch = encode_batch(records(size, count), compression=getattr(compression, codec.upper()))
        headers = validate_batches(batch)
        figures[f"{size} {codec} {policy}"] = thread_us(lambda: validate_records(
            batch, headers, topic_partition="t-0", keys_required=policy == "compact",
            create_time_range=time_range)) / count
    body = memoryview(encode_batch(records(100, 8000)))[BATCH_HEADER_SIZE:]
    try:
        from odradek.records.walk import check_records
        figures["walk"] = thread_us(lambda: check_records(body, 8000, now, keys_required=True,
                                                          create_time_range=time_range, max_errors=10_000))
    except ImportError:  # the numpy walker: its two steps, as records.validation took them
        import numpy as np
        from odradek.records.walk import header_fields, record_begins, record_fields
        buffer = np.frombuffer(body, np.uint8)

        def numpy_walk():
            begins, _ = record_begins(body, buffer, 0, 8000, len(body))
            fields = record_fields(buffer, begins)
            header_fields(buffer, fields.headers_at, fields.header_counts, fields.record_ends)
        figures["walk"] = thread_us(numpy_walk)
    return figures


def in_process(trees: list[tuple[str, str]]) -> None:
    """The --in-process table: each tree's child_figures."""
    figures = {}
    for label, path in trees:
        answer = subprocess.run([sys.executable, os.path.abspath(__file__), "--child"], cwd=path, check=True,
                                env={**os.environ, "PYTHONPATH": path}, capture_output=True, text=True)
        figures[label] = dict(line.rsplit(" ", 1) for line in answer.stdout.splitlines())
    print(f"{'validate_records, thread CPU':32}" + "".join(f"{label + ' us/rec':>16}" for label, _ in trees))
    for case in figures[trees[0][0]]:
        name = "walk alone, us per 8,000 100 B" if case == "walk" else case
        print(f"{name:32}" + "".join(f"{float(figures[label][case]):16.3f}" for label, _ in trees))


def main() -> None:
    if "--child" in sys.argv:
        for case, figure in child_figures().items():
            print(case, figure)
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", help="label=path of an Odradek source tree")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--in-process", action="store_true", help="time the validation alone, in thread CPU")
    args = parser.parse_args()
    trees = [(label, os.path.abspath(path)) for label, path in (tree.split("=", 1) for tree in args.trees)]
    if args.in_process:
        in_process(trees)
        return
    cases = list(itertools.product(RECORDS, CODECS, POLICIES))
    figures: dict[tuple, list[tuple[float, float]]] = {}
    for round_number in range(args.rounds):
        for label, path in trees:
            os.environ["PYTHONPATH"] = os.path.abspath(path)
            os.chdir(path)
            with tempfile.TemporaryDirectory(prefix="bench-validation-") as data_dir:
                broker = BrokerProcess(data_dir).start()
                try:
                    one_case(broker, "warm-up", 1024, "none", "delete")  # what a fresh broker does once (files, caches)
                    for size, codec, policy in cases:
                        topic = f"r{round_number}-{size}-{codec}-{policy}"
                        figures.setdefault((label, size, codec, policy), []).append(
                            one_case(broker, topic, size, codec, policy))
                finally:
                    broker.stop()
            time.sleep(1)
    print(f"{'case':32}" + "".join(f"{label + ' rec/s':>16}{label + ' us/rec':>16}" for label, _ in trees))
    for size, codec, policy in cases:
        row = f"{size:>5} B {codec:5} {policy:8}" + " " * 10
        for label, _ in trees:
            rates, cpus = zip(*figures[(label, size, codec, policy)])
            row += f"{statistics.median(rates):16,.0f}{statistics.median(cpus):16.3f}"
        print(row)


if __name__ == "__main__":
    main()
