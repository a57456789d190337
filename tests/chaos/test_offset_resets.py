"""The chaos consumers report a reset of their position (tests/chaos/workload.py `OffsetResets`): librdkafka moves
a consumer whose fetch position the broker refuses (OFFSET_OUT_OF_RANGE, or a truncation KIP-320's validation
found) to the start or the end of the partition by its auto.offset.reset and only logs it; a jump to the end reads
like a poll-skip of everything in between, so the history must say that the consumer was reset, where and why.
Against one real broker: a consumer assigned past the partition's end is reset to its start."""

from __future__ import annotations

import time
import uuid

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from .workload import History, OffsetResets


def test_a_consumer_reset_by_its_offset_policy_is_recorded_with_the_offset_and_the_reason(broker):
    topic = f"resets-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for n in range(10):
        producer.produce(topic, value=b"v%d" % n, partition=0)
    assert producer.flush(15) == 0
    history = History()
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": topic,
                         "auto.offset.reset": "earliest", **OffsetResets.config(history, "reader")})
    consumer.assign([TopicPartition(topic, 0, 1000)])
    offsets = []
    deadline = time.monotonic() + 20
    while len(offsets) < 10 and time.monotonic() < deadline:
        offsets += [m.offset() for m in consumer.consume(100, 0.5) if m.error() is None]
    consumer.close()
    assert offsets == list(range(10))  # librdkafka went back to the start without an error to the application
    resets = [op for op in history.ops if op.f == "reset"]
    assert [(op.process, op.partition, op.offset) for op in resets] == [("reader", 0, 1000)], resets
    assert "out of range" in resets[0].error.lower(), resets[0].error
