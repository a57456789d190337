"""kafka-python 3.0 against a real broker: its idempotent-by-default producer, fetch sessions, admin, timestamps."""

from __future__ import annotations

import time

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewTopic


def consume(broker, topic: str, partitions: int, expected: int, timeout: float = 20.0) -> list:
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                             consumer_timeout_ms=1000)
    consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
    consumer.seek_to_beginning()
    messages = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                messages.extend(records)
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("codec", [None, "gzip", "snappy", "lz4", "zstd"])
def test_produce_and_consume_with_each_codec(broker, topic_name, codec):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.create_topics([NewTopic(topic_name, 3, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type=codec, linger_ms=5)
    futures = [producer.send(topic_name, key=f"k{i % 11}".encode(), value=f"v{i}".encode(),
                             headers=[("n", str(i).encode())]) for i in range(500)]
    producer.flush(30)
    offsets = [f.get(10) for f in futures]
    producer.close()
    assert all(meta.offset >= 0 for meta in offsets)
    messages = consume(broker, topic_name, 3, 500)
    assert sorted(int(m.value[1:]) for m in messages) == list(range(500))
    for message in messages:
        assert message.headers == [("n", message.value[1:])]
        assert message.key == f"k{int(message.value[1:]) % 11}".encode()


def test_idempotent_producer_gets_a_producer_id_and_writes_once(broker, topic_name):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers, enable_idempotence=True, acks="all")
    for i in range(50):
        producer.send(topic_name, f"once-{i}".encode())
    producer.flush(10)
    producer.close()
    messages = consume(broker, topic_name, 1, 50)
    assert [m.value for m in messages] == [f"once-{i}".encode() for i in range(50)]


def test_offsets_by_time_and_end_offsets(broker, topic_name):
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    base = 1_600_000_000_000
    for i in range(5):
        producer.send(topic_name, f"t{i}".encode(), timestamp_ms=base + i * 10).get(10)
    producer.close()
    consumer = KafkaConsumer(bootstrap_servers=broker.bootstrap_servers)
    tp = TopicPartition(topic_name, 0)
    try:
        assert consumer.end_offsets([tp])[tp] == 5
        assert consumer.beginning_offsets([tp])[tp] == 0
        found = consumer.offsets_for_times({tp: base + 15})[tp]
        assert (found.offset, found.timestamp) == (2, base + 20)
    finally:
        consumer.close()
