"""Transactions with confluent-kafka (librdkafka) against a real broker: commit and abort as read_committed and
read_uncommitted consumers see them, an open transaction holding back read_committed, fencing of a zombie producer,
consume-transform-produce with offsets committed inside the transaction, and abandoned transactions aborted by
timeout."""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic


def create_topic(broker, name: str, partitions: int = 1) -> None:
    client = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    client.create_topics([NewTopic(name, partitions, 1)])[name].result(10)


def transactional_producer(broker, transactional_id: str | None = None, **settings) -> Producer:
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 5,
                         "transactional.id": transactional_id or f"txn-{uuid.uuid4().hex[:8]}", **settings})
    producer.init_transactions(10)
    return producer


def consume_all(broker, topic: str, partitions: int, isolation: str, settle: float = 1.5) -> list:
    """Everything readable now: polls until nothing new arrives for `settle` seconds counted from the first fetch
    answer of every partition (librdkafka's cached watermarks), so a slow start does not end the read early."""
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "assign-only",
                         "enable.auto.commit": False, "isolation.level": isolation,
                         "enable.partition.eof": False})
    assigned = [TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(assigned)
    messages = []
    deadline = time.monotonic() + 30
    quiet_since = None
    try:
        while quiet_since is None or time.monotonic() - quiet_since < settle:
            batch = consumer.consume(500, 0.2)
            for message in batch:
                if message.error():
                    raise KafkaException(message.error())
                messages.append(message)
            if quiet_since is None:
                fetched = all(consumer.get_watermark_offsets(tp, cached=True)[1] >= 0 for tp in assigned)
                assert fetched or time.monotonic() < deadline, "no fetch answered within 30 s"
                if fetched:
                    quiet_since = time.monotonic()
            elif batch:
                quiet_since = time.monotonic()
    finally:
        consumer.close()
    return messages


def values(messages) -> list[bytes]:
    return [m.value() for m in messages]


def test_commits_and_aborts_as_each_isolation_level_sees_them(broker, topic_name):
    create_topic(broker, topic_name, partitions=2)
    producer = transactional_producer(broker)
    for round_name, commit in (("a", True), ("b", False), ("c", True)):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic_name, f"{round_name}{i}".encode(), partition=i % 2)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.flush(10)
            producer.abort_transaction(10)
    committed = consume_all(broker, topic_name, 2, "read_committed")
    everything = consume_all(broker, topic_name, 2, "read_uncommitted")
    expected = {p: [f"{r}{i}".encode() for r in "ac" for i in range(p, 10, 2)] for p in (0, 1)}
    assert {p: values(m for m in committed if m.partition() == p) for p in (0, 1)} == expected
    assert sorted(values(everything)) == sorted(f"{r}{i}".encode() for r in "abc" for i in range(10))
    # each transaction's marker takes an offset that no application sees
    assert [m.offset() for m in everything if m.partition() == 0] == [*range(0, 5), *range(6, 11), *range(12, 17)]


def test_an_open_transaction_holds_back_read_committed(broker, topic_name):
    create_topic(broker, topic_name)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    plain.produce(topic_name, b"before")
    plain.flush(10)
    producer = transactional_producer(broker)
    producer.begin_transaction()
    producer.produce(topic_name, b"inside")
    producer.flush(10)
    plain.produce(topic_name, b"after")
    plain.flush(10)
    assert values(consume_all(broker, topic_name, 1, "read_committed")) == [b"before"]
    assert values(consume_all(broker, topic_name, 1, "read_uncommitted")) == [b"before", b"inside", b"after"]
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "watermarks",
                         "isolation.level": "read_committed"})
    try:
        low, high = consumer.get_watermark_offsets(TopicPartition(topic_name, 0), 10)
    finally:
        consumer.close()
    assert high == 1  # ListOffsets latest under read_committed: the last stable offset
    producer.commit_transaction(10)
    assert values(consume_all(broker, topic_name, 1, "read_committed")) == [b"before", b"inside", b"after"]


def test_a_zombie_producer_is_fenced(broker, topic_name):
    create_topic(broker, topic_name)
    transactional_id = f"zombie-{uuid.uuid4().hex[:8]}"
    zombie = transactional_producer(broker, transactional_id)
    zombie.begin_transaction()
    zombie.produce(topic_name, b"from-the-zombie")
    zombie.flush(10)
    successor = transactional_producer(broker, transactional_id)  # aborts the zombie's transaction
    successor.begin_transaction()
    successor.produce(topic_name, b"from-the-successor")
    successor.commit_transaction(10)
    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic_name, b"too-late")
        zombie.commit_transaction(10)
    assert raised.value.args[0].code() in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                                           KafkaError.INVALID_PRODUCER_EPOCH)
    assert values(consume_all(broker, topic_name, 1, "read_committed")) == [b"from-the-successor"]


def test_consume_transform_produce_commits_offsets_only_with_the_transaction(broker, topic_name):
    source, sink, group = topic_name, f"{topic_name}-out", f"group-{uuid.uuid4().hex[:8]}"
    create_topic(broker, source)
    create_topic(broker, sink)
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for i in range(10):
        plain.produce(source, f"in{i}".encode())
    plain.flush(10)
    producer = transactional_producer(broker)

    def committed_offset() -> int:
        reader = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group})
        try:
            return reader.committed([TopicPartition(source, 0)], 10)[0].offset
        finally:
            reader.close()

    def transform(commit: bool) -> None:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                             "enable.auto.commit": False, "auto.offset.reset": "earliest",
                             "isolation.level": "read_committed"})
        consumer.subscribe([source])
        taken = []
        deadline = time.monotonic() + 20
        while len(taken) < 10 and time.monotonic() < deadline:
            taken += [m for m in consumer.consume(10, 0.5) if not m.error()]
        assert len(taken) == 10
        producer.begin_transaction()
        for message in taken:
            producer.produce(sink, message.value().replace(b"in", b"out"))
        producer.send_offsets_to_transaction(consumer.position(consumer.assignment()),
                                             consumer.consumer_group_metadata(), 10)
        if commit:
            producer.commit_transaction(10)
        else:
            producer.abort_transaction(10)
        consumer.close()

    transform(commit=False)
    assert committed_offset() < 0  # nothing committed
    assert values(consume_all(broker, sink, 1, "read_committed")) == []
    transform(commit=True)
    assert committed_offset() == 10
    assert values(consume_all(broker, sink, 1, "read_committed")) == [f"out{i}".encode() for i in range(10)]


def test_an_abandoned_transaction_is_aborted_at_its_timeout(broker, topic_name):
    create_topic(broker, topic_name)
    producer = transactional_producer(broker, **{"transaction.timeout.ms": 1500})
    producer.begin_transaction()
    producer.produce(topic_name, b"abandoned")
    producer.flush(10)
    assert values(consume_all(broker, topic_name, 1, "read_committed", settle=0.5)) == []
    time.sleep(2.5)  # past the timeout and a check
    plain = Producer({"bootstrap.servers": broker.bootstrap_servers})
    plain.produce(topic_name, b"later")
    plain.flush(10)
    assert values(consume_all(broker, topic_name, 1, "read_committed")) == [b"later"]
    assert values(consume_all(broker, topic_name, 1, "read_uncommitted")) == [b"abandoned", b"later"]
