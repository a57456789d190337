"""Share consumers against a classic group on one partition: records/s with a fixed work time per record.

One partition holds `--records` records; each consumer (a thread with its own confluent-kafka client) spends
`--work-ms` per record (a sleep: the work of a real handler that waits on I/O). A share group of 1, 2, 4 and 8
ShareConsumers (implicit acknowledgement, max.poll.records `--batch`) shares the partition record by record, so its
throughput should grow with the consumers; a classic group of as many Consumers gives the partition to one member,
whatever their number. Each run is a new group reading the partition from its start (the share group reset to the
earliest offsets with AlterShareGroupOffsets before it joins, the classic group with auto.offset.reset earliest),
timed from the first consumer's start to the last record handled; every record must be handled once (accepted
records are never redelivered, and no lock runs out at these sizes). Beside each rate, the broker process's CPU
per record handled in that run (ShareFetch, acknowledgement and the state writes for the share group; Fetch, and
the offset commits for the classic one), from /proc.
Run: `python -m bench.share_bench [--records 2000 --work-ms 2]`.
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from confluent_kafka import Consumer, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from bench.processes import cpu_seconds
from odradek.embedded import BrokerProcess
from odradek.protocol import api
from odradek.client.connection import Connection

TOPIC = "share-bench"


def produce(bootstrap: str, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(TOPIC, str(i).encode())
    assert producer.flush(60) == 0


def reset_to_earliest(port: int, group: str) -> None:
    Request = api("AlterShareGroupOffsets").request
    connection = Connection(("127.0.0.1", port), 10, "share-bench", {"AlterShareGroupOffsets": (0, 0)})
    try:
        answer = connection.call("AlterShareGroupOffsets", group_id=group, topics=[
            Request.AlterShareGroupOffsetsRequestTopic(topic_name=TOPIC, partitions=[
                Request.AlterShareGroupOffsetsRequestPartition(partition_index=0, start_offset=0)])])
    finally:
        connection.close()
    assert answer.error_code == 0 and answer.responses[0].partitions[0].error_code == 0, answer


def run(broker: BrokerProcess, consumers: int, records: int, work_s: float, make, poll
        ) -> tuple[float, float, list[int]]:
    """(records/s, broker CPU µs per record, records handled by each consumer)."""
    cpu_before = cpu_seconds(broker.process.pid)
    handled: list[set[bytes]] = [set() for _ in range(consumers)]
    total = threading.Semaphore(0)
    done = threading.Event()

    def work(slot: int) -> None:
        client = make()
        try:
            while not done.is_set():
                for message in poll(client):
                    if message.error() is None:
                        time.sleep(work_s)
                        handled[slot].add(message.value())
                        total.release()
        finally:
            client.close()

    started = time.monotonic()
    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(consumers)]
    for thread in threads:
        thread.start()
    for _ in range(records):
        if not total.acquire(timeout=120):
            raise AssertionError("the consumers stopped before every record was handled")
    elapsed = time.monotonic() - started
    cpu = cpu_seconds(broker.process.pid) - cpu_before
    done.set()
    for thread in threads:
        thread.join()
    every = [value for part in handled for value in part]
    assert len(every) == len(set(every)) == records, "a record was handled twice or not at all"
    return records / elapsed, cpu / records * 1e6, [len(part) for part in handled]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=2000)
    parser.add_argument("--work-ms", type=float, default=2.0)
    parser.add_argument("--batch", type=int, default=20, help="the share consumers' max.poll.records")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        broker = BrokerProcess(Path(directory) / "data", settings={"group.initial.rebalance.delay.ms": 0})
        broker.start()
        try:
            bootstrap = broker.bootstrap_servers
            admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: a collected client ends its futures
            admin.create_topics([NewTopic(TOPIC, 1, 1)])[TOPIC].result(30)
            produce(bootstrap, args.records)
            print(f"{args.records} records on one partition, {args.work_ms} ms of work per record")
            print(f"{'consumers':>9}  {'share group rec/s':>17}  {'µs CPU/rec':>10}  {'classic group rec/s':>19}  "
                  f"{'µs CPU/rec':>10}  share split")
            for consumers in (1, 2, 4, 8):
                group = f"share-{consumers}"
                reset_to_earliest(broker.port, group)
                share_rate, share_cpu, split = run(
                    broker, consumers, args.records, args.work_ms / 1000,
                    lambda: _subscribed(ShareConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                                       "max.poll.records": args.batch})),
                    lambda client: client.poll(0.2))
                classic_group = f"classic-{consumers}"
                classic_rate, classic_cpu, _ = run(
                    broker, consumers, args.records, args.work_ms / 1000,
                    lambda: _subscribed(Consumer({"bootstrap.servers": bootstrap, "group.id": classic_group,
                                                  "auto.offset.reset": "earliest"})),
                    lambda client: client.consume(args.batch, 0.2))
                print(f"{consumers:>9}  {share_rate:>17.0f}  {share_cpu:>10.0f}  {classic_rate:>19.0f}  "
                      f"{classic_cpu:>10.0f}  {split}")
        finally:
            broker.stop()


def _subscribed(client):
    client.subscribe([TOPIC])
    return client


if __name__ == "__main__":
    main()
