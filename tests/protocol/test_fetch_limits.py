"""Fetch size limits as Kafka applies them: only the first partition with data may exceed max_bytes (and its
partition_max_bytes), by one whole batch; librdkafka closes the connection on an answer above
receive.message.max.bytes, which it sets just above fetch.max.bytes."""

from __future__ import annotations

import time

from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol import api
from tests.broker.raw_client import RawClient

PARTITIONS = 4
BATCHES_PER_PARTITION = 3
VALUE_SIZE = 120_000  # one record per batch: every batch is larger than half of fetch.max.bytes
FETCH_MAX_BYTES = 200_000
MetadataRequest = api("Metadata").request
FetchRequest = api("Fetch").request


def _produce_big_batches(port: int, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{port}"})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=10)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{port}", "linger.ms": 0, "compression.type": "none"})
    for round_ in range(BATCHES_PER_PARTITION):
        for partition in range(PARTITIONS):
            producer.produce(topic, bytes([round_]) * VALUE_SIZE, partition=partition)
        producer.flush(10)  # one batch per record


def test_librdkafka_consumes_big_batches_over_partitions_within_fetch_max_bytes(broker, topic_name):
    _produce_big_batches(broker.port, topic_name)
    errors = []
    consumer = Consumer({
        "bootstrap.servers": f"127.0.0.1:{broker.port}", "group.id": f"g-{topic_name}",
        "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "fetch.max.bytes": FETCH_MAX_BYTES, "message.max.bytes": FETCH_MAX_BYTES,
        "receive.message.max.bytes": FETCH_MAX_BYTES + 512,
        "error_cb": lambda error: errors.append(str(error)),
    })
    consumer.subscribe([topic_name])
    received = 0
    deadline = time.monotonic() + 30
    try:
        while received < PARTITIONS * BATCHES_PER_PARTITION and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                assert len(message.value()) == VALUE_SIZE
                received += 1
    finally:
        consumer.close()
    assert received == PARTITIONS * BATCHES_PER_PARTITION
    assert not [e for e in errors if "Invalid response size" in e], errors


def test_only_the_first_partition_with_data_goes_over_max_bytes(broker, topic_name):
    _produce_big_batches(broker.port, topic_name)
    client = RawClient(broker.port)
    try:
        metadata = client.call("Metadata", 12, topics=[MetadataRequest.MetadataRequestTopic(name=topic_name)])
        topic_id = metadata.topics[0].topic_id

        def fetch(max_bytes: int, partition_max_bytes: int):
            answer = client.call("Fetch", 16, max_wait_ms=0, min_bytes=1, max_bytes=max_bytes, topics=[
                FetchRequest.FetchTopic(topic_id=topic_id, partitions=[
                    FetchRequest.FetchPartition(partition=partition, fetch_offset=0,
                                                partition_max_bytes=partition_max_bytes)
                    for partition in range(PARTITIONS)])])
            return [len(p.records or b"") for p in answer.responses[0].partitions]

        # max_bytes below one batch: the first partition still gets one whole batch, the others nothing
        sizes = fetch(1000, 10_000_000)
        assert sizes[0] > VALUE_SIZE and sizes[1:] == [0] * (PARTITIONS - 1)
        # room for two batches in all: the first partition's first batch, then the next that fits whole
        sizes = fetch(2 * VALUE_SIZE + 1000, VALUE_SIZE + 1000)
        assert sizes[0] > VALUE_SIZE and sizes[1] > VALUE_SIZE and sizes[2:] == [0] * (PARTITIONS - 2)
        assert sum(sizes) <= 2 * VALUE_SIZE + 1000
        # partition_max_bytes below one batch: only the first partition's one batch
        sizes = fetch(10_000_000, 1000)
        assert sizes[0] > VALUE_SIZE and sizes[1:] == [0] * (PARTITIONS - 1)
    finally:
        client.close()


def test_a_fetch_session_reads_the_partitions_that_got_nothing_first(broker, topic_name):
    """Kafka moves the partitions that returned records to the end of a session, so under tight limits every
    partition gets its turn instead of the first one draining its whole backlog first."""
    _produce_big_batches(broker.port, topic_name)
    client = RawClient(broker.port)
    try:
        topic_id = client.call("Metadata", 12, topics=[
            MetadataRequest.MetadataRequestTopic(name=topic_name)]).topics[0].topic_id
        offsets = [0] * PARTITIONS
        served = []

        def fetch(partitions, session_id, epoch):
            answer = client.call("Fetch", 16, max_wait_ms=0, min_bytes=1, max_bytes=1000, session_id=session_id,
                                 session_epoch=epoch, topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=[
                                     FetchRequest.FetchPartition(partition=p, fetch_offset=offsets[p],
                                                                 partition_max_bytes=10_000_000)
                                     for p in partitions])])
            for topic in answer.responses:
                for p in topic.partitions:
                    if p.records:
                        served.append(p.partition_index)
                        offsets[p.partition_index] += 1  # one record per batch
            return answer.session_id

        session_id = fetch(range(PARTITIONS), 0, 0)
        for epoch in range(1, PARTITIONS):
            fetch([served[-1]], session_id, epoch)  # an incremental fetch names only what changed
        assert served == list(range(PARTITIONS))
    finally:
        client.close()


def test_an_incremental_fetch_answers_only_the_partitions_that_changed(broker, topic_name):
    """KIP-227: after the session's full answer, an incremental one leaves out every partition with no records and
    the same watermarks as the consumer was last told, and brings back one whose log grew."""
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(timeout=10)
    producer = Producer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "linger.ms": 0})

    def produce(partition):
        producer.produce(topic_name, b"v", partition=partition)
        producer.flush(10)

    produce(0)
    produce(1)
    client = RawClient(broker.port)
    try:
        topic_id = client.call("Metadata", 12, topics=[
            MetadataRequest.MetadataRequestTopic(name=topic_name)]).topics[0].topic_id

        def fetch(offsets, session_id, epoch):
            answer = client.call("Fetch", 16, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=session_id,
                                 session_epoch=epoch, topics=[FetchRequest.FetchTopic(topic_id=topic_id, partitions=[
                                     FetchRequest.FetchPartition(partition=p, fetch_offset=offset,
                                                                 partition_max_bytes=1 << 20)
                                     for p, offset in offsets.items()])] if offsets else [])
            return answer.session_id, {p.partition_index: p for topic in answer.responses for p in topic.partitions}

        session_id, full = fetch({0: 0, 1: 0}, 0, 0)
        assert sorted(full) == [0, 1] and all(p.records for p in full.values())
        _, unchanged = fetch({0: 1, 1: 1}, session_id, 1)  # both read to their end: nothing new to say
        assert unchanged == {}
        produce(1)
        _, grown = fetch({}, session_id, 2)
        assert list(grown) == [1] and grown[1].records and grown[1].high_watermark == 2
    finally:
        client.close()
