"""Broker CPU per record produced, for two or more source trees of Odradek in the same run: what record validation
costs and what a change to it wins back.

`python -m bench.validation_cost before=/path/to/old/tree after=.` starts a fresh broker from each tree in turn
(PYTHONPATH set to the tree and the tree as the current directory, which `python -m` puts first on the path, so the
broker and its validation workers run that code), interleaved round by round,
and produces keyed records from one confluent-kafka producer (acks=1, linger 5 ms, 1 MB batches), 100-byte and
1 KiB values, codecs none, lz4 and zstd, on an ordinary and on a compacted topic. It prints records/s and the
broker's CPU per record (its threads and its worker processes, bench.peers' accounting), medians of the rounds.
On a shared, loaded two-core machine the figures move by 20-30% from run to run; compare trees within one run.
"""

from __future__ import annotations

import argparse
import itertools
import os
import statistics
import tempfile
import time

from confluent_kafka.admin import AdminClient, NewTopic

from bench import client
from bench.peers import Broker
from odradek.embedded import BrokerProcess

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="+", help="label=path of an Odradek source tree")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = [(label, os.path.abspath(path)) for label, path in (tree.split("=", 1) for tree in args.trees)]
    cases = list(itertools.product(RECORDS, CODECS, POLICIES))
    figures: dict[tuple, list[tuple[float, float]]] = {}
    for round_number in range(args.rounds):
        for label, path in trees:
            os.environ["PYTHONPATH"] = os.path.abspath(path)
            os.chdir(path)
            with tempfile.TemporaryDirectory(prefix="bench-validation-") as data_dir:
                broker = BrokerProcess(data_dir).start()
                try:
                    one_case(broker, "warm-up", 1024, "none", "delete")  # the broker's first Produce starts workers
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
