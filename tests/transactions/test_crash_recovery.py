"""A broker killed (SIGKILL) in the middle of a transaction: after the restart the committed transaction before it is
still visible, the open one is never visible to read_committed, holds the last stable offset until its timeout, and is
then aborted; producer state comes back from snapshots and the log tail."""

from __future__ import annotations

import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess, wait_until

from .conftest import SETTINGS
from .test_confluent_transactions import consume_all, transactional_producer, values


def last_stable_offset(broker, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "watermarks",
                         "isolation.level": "read_committed"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, 0), 10)[1]
    finally:
        consumer.close()


def test_a_transaction_open_at_a_crash_is_aborted_after_the_restart(tmp_path):
    topic = f"crash-{uuid.uuid4().hex[:8]}"
    broker = BrokerProcess(tmp_path / "data", settings=SETTINGS)
    broker.start()
    try:
        client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        client.create_topics([NewTopic(topic, 1, 1)])[topic].result(10)
        producer = transactional_producer(broker, f"crash-{topic}", **{"transaction.timeout.ms": 3000})
        producer.begin_transaction()
        producer.produce(topic, b"committed")
        producer.commit_transaction(10)
        producer.begin_transaction()
        producer.produce(topic, b"in-flight")
        producer.flush(10)
        broker.kill()
        del producer
        broker.start()
        assert values(consume_all(broker, topic, 1, "read_committed", settle=0.5)) == [b"committed"]
        assert last_stable_offset(broker, topic) == 2  # held at the open transaction's first offset
        assert wait_until(lambda: last_stable_offset(broker, topic) == 4, timeout=15)  # aborted: its marker is 3
        plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
        plain.produce(topic, b"after")
        plain.flush(10)
        assert values(consume_all(broker, topic, 1, "read_committed")) == [b"committed", b"after"]
        assert values(consume_all(broker, topic, 1, "read_uncommitted")) == [b"committed", b"in-flight", b"after"]
    finally:
        broker.stop()
