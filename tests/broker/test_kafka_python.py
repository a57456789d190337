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


def test_describe_log_dirs_reports_partition_sizes(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.create_topics([NewTopic(topic_name, 2, 1)])
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap_servers)
    for i in range(100):
        producer.send(topic_name, b"x" * 1000, partition=0)
    producer.flush(10)
    producer.close()
    try:
        [asked] = admin.describe_log_dirs({topic_name: [0, 1, 7]})
        [everything] = admin.describe_log_dirs()
    finally:
        admin.close()
    [log_dir] = asked["log_dirs"]
    sizes = {p["partition_index"]: p["partition_size"] for t in log_dir["topics"] for p in t["partitions"]}
    assert sizes == {0: sizes[0], 1: 0}  # partition 7 does not exist: left out
    assert 100_000 < sizes[0] < 110_000  # 100 records of 1000 bytes, with batch and record overhead
    assert log_dir["log_dir"] == str(broker.data_dir) and 0 < log_dir["usable_bytes"] <= log_dir["total_bytes"]
    assert topic_name in {t["name"] for t in everything["log_dirs"][0]["topics"]}
