"""Transactions on a compacted topic, against a real broker process and real clients (confluent-kafka): after the
cleaner has run, read_uncommitted and read_committed consumers from the start both see exactly the last committed
value of every key at its original offset, no aborted value; the transaction markers stay within
delete.retention.ms and go after it (unless their transaction still has a batch in the log); and the same
transactional and idempotent producers carry on after the cleaning, also across a restart that has to rebuild
producer state from the cleaned log alone."""

from __future__ import annotations

import time
from pathlib import Path

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource

from odradek.embedded import BrokerProcess, wait_until
from odradek.records.batch import BATCH_HEADER_SIZE, parse_header

from .test_compaction_broker import CLEANER_SETTINGS, assert_compacted_view, create_topic, read_all

RETENTION_MS = 4000
KEYS = 100
ROUNDS = 6  # committed, aborted, committed, ...: the last transaction aborts, so an aborted value is every key's last


def segment_markers(partition_dir: Path) -> dict[int, int | None]:
    """offset -> delete horizon (None: not stamped) of every transaction marker in the partition's `.log` files,
    read under a running broker: a listing that changed while it was read (a swap) is read again."""
    while True:
        names = sorted(path.name for path in partition_dir.glob("*.log"))
        found: dict[int, int | None] = {}
        try:
            for name in names:
                data = (partition_dir / name).read_bytes()
                position = 0
                while position + BATCH_HEADER_SIZE <= len(data):
                    header = parse_header(data, position)
                    if position + header.size > len(data):
                        break  # the active segment's last batch, still being written
                    if header.is_control:
                        found[header.base_offset] = header.base_timestamp if header.has_delete_horizon else None
                    position += header.size
        except FileNotFoundError:
            continue
        if sorted(path.name for path in partition_dir.glob("*.log")) == names:
            return found


class Sender:
    """A confluent-kafka producer that records the offset of every acknowledged message and fails on any error."""

    def __init__(self, broker, topic: str, **settings):
        self.topic = topic
        self.acknowledged: dict[int, tuple[bytes, bytes]] = {}
        self.producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5, "acks": "all",
                                  "enable.idempotence": True, "batch.size": 8192, **settings})

    def _on_delivery(self, error, message) -> None:
        assert error is None, error
        self.acknowledged[message.offset()] = (message.key(), message.value())

    def send(self, pairs) -> dict[int, tuple[bytes, bytes]]:
        before = set(self.acknowledged)
        for key, value in pairs:
            self.producer.produce(self.topic, value, key, on_delivery=self._on_delivery)
            self.producer.poll(0)
        assert self.producer.flush(30) == 0
        return {offset: pair for offset, pair in self.acknowledged.items() if offset not in before}

    def transaction(self, pairs, commit: bool) -> dict[int, tuple[bytes, bytes]]:
        self.producer.begin_transaction()
        sent = self.send(pairs)
        if commit:
            self.producer.commit_transaction(30)
        else:
            self.producer.abort_transaction(30)
        return sent


def round_values(round_: int) -> list[tuple[bytes, bytes]]:
    state = "committed" if round_ % 2 == 0 else "aborted"
    return [(b"key-%d" % index, f"{state}-{round_}-{index}".encode().ljust(60, b".")) for index in range(KEYS)]


def filler(tag: str, count: int = 200) -> list[tuple[bytes, bytes]]:
    return [(f"filler-{tag}-{index}".encode(), b"x" * 100) for index in range(count)]


def transactional_view(records) -> list[tuple[int, bytes, bytes]]:
    return [record for record in records if record[1].startswith(b"key-")]


def test_transactions_on_a_compacted_topic_are_cleaned_as_kafka_cleans_them(tmp_path, topic_name):
    broker = BrokerProcess(tmp_path / "data", settings={**CLEANER_SETTINGS, "transaction.state.log.num.partitions": 1,
                                                        "transaction.state.log.segment.bytes": 16384})
    broker.start()
    try:
        # compacted only once everything is written, so that the first cleaning sees it all in one pass
        create_topic(broker, topic_name, **{"delete.retention.ms": str(RETENTION_MS), "cleanup.policy": "delete"})
        partition_dir = broker.data_dir / f"{topic_name}-0"
        transactional = Sender(broker, topic_name, **{"transactional.id": f"txn-{topic_name}"})
        transactional.producer.init_transactions(30)
        idempotent = Sender(broker, topic_name)
        rounds = [transactional.transaction(round_values(round_), commit=round_ % 2 == 0) for round_ in range(ROUNDS)]
        marker_offsets = [max(sent) + 1 for sent in rounds]  # one producer, one partition: right after the data
        committed = {offset: pair for round_, sent in enumerate(rounds) if round_ % 2 == 0
                     for offset, pair in sent.items()}
        committed.update(idempotent.send(filler("a")))  # rolls the segments holding the transactions
        compact = ConfigResource("topic", topic_name, incremental_configs=[
            ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.SET)])
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.incremental_alter_configs([compact])[compact].result(10)

        def cleaned():
            records = read_all(broker, topic_name, isolation="read_uncommitted")
            return records if len(transactional_view(records)) == KEYS else None

        uncommitted = wait_until(cleaned, timeout=40, interval=0.3)
        assert uncommitted, "the transactions were not cleaned"
        expected = sorted((offset, key, value) for offset, (key, value) in rounds[ROUNDS - 2].items())
        assert transactional_view(uncommitted) == expected  # the last committed round, at its offsets, in order
        assert_compacted_view(uncommitted, committed)
        read_committed = read_all(broker, topic_name, isolation="read_committed")
        assert transactional_view(read_committed) == expected
        assert_compacted_view(read_committed, committed)
        assert segment_markers(partition_dir) == dict.fromkeys(marker_offsets)  # all kept, none stamped yet

        # the next cleaning finds the first rounds' transactions empty and stamps their markers' delete horizon
        committed.update(idempotent.send(filler("b")))
        stamped = wait_until(lambda: {offset: horizon for offset, horizon in segment_markers(partition_dir).items()
                                      if horizon is not None}, timeout=30, interval=0.2)
        stamped_seen_ms = time.time() * 1000
        assert set(stamped) == set(marker_offsets[:ROUNDS - 2])  # the last two transactions still have batches
        assert all(0 < horizon - stamped_seen_ms <= RETENTION_MS for horizon in stamped.values())
        assert wait_until(lambda: set(segment_markers(partition_dir)) == set(marker_offsets[ROUNDS - 2:]),
                          timeout=30, interval=0.2), "markers outlived their delete horizon"
        assert time.time() * 1000 >= min(stamped.values())  # they went only after it
        assert transactional_view(read_all(broker, topic_name, isolation="read_uncommitted")) == expected
        assert transactional_view(read_all(broker, topic_name, isolation="read_committed")) == expected

        # both producers carry on after a restart that rebuilds their state from the cleaned log alone: the
        # transactional producer's last sequence is in the emptied batch kept of its last (aborted) transaction
        broker.stop()
        for snapshot in partition_dir.glob("*.snapshot"):
            snapshot.unlink()
        broker.start()
        final = transactional.transaction([(b"key-1", b"after-restart")], commit=True)
        transactional.transaction([(b"key-2", b"aborted-after-restart")], commit=False)
        idempotent.send(filler("c"))
        expected_after = {key: value for _, key, value in expected}
        expected_after.update(final.values())

        def view(isolation: str) -> dict:
            return {key: value for _, key, value in transactional_view(read_all(broker, topic_name,
                                                                                isolation=isolation))}

        assert view("read_committed") == expected_after
        # read_uncommitted shows the aborted write until the cleaner's next pass removes it (filler "c" rolled its
        # segment, and the cleaner may already have run: this machine decides which a first read sees)
        assert view("read_uncommitted") in (expected_after, {**expected_after, b"key-2": b"aborted-after-restart"})
        assert wait_until(lambda: view("read_uncommitted") == expected_after, timeout=40, interval=0.3), \
            "the aborted transaction after the restart was never cleaned"
        transactional.producer.flush(10)
        idempotent.producer.flush(10)
    finally:
        broker.stop()
