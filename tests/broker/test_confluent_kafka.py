"""confluent-kafka (librdkafka 2.x) against a real broker: codecs, keys, headers, timestamps, partitions, admin."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def admin(broker) -> AdminClient:
    return AdminClient({"bootstrap.servers": broker.bootstrap_servers})


def create_topic(broker, name: str, partitions: int = 1, config: dict | None = None) -> None:
    client = admin(broker)  # keep the client alive until its future resolves
    client.create_topics([NewTopic(name, partitions, 1, config=config or {})])[name].result(10)


def consume(broker, topic: str, partitions: int, expected: int, timeout: float = 20.0, **settings) -> list:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "enable.auto.commit": False,
                         "group.id": "unused-assign-only", **settings})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    messages = []
    deadline = time.monotonic() + timeout
    try:
        while len(messages) < expected and time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.5):
                if message.error():
                    raise KafkaException(message.error())
                messages.append(message)
    finally:
        consumer.close()
    return messages


@pytest.mark.parametrize("codec", CODECS)
def test_each_codec_round_trips_keys_headers_and_timestamps(broker, topic_name, codec):
    create_topic(broker, topic_name, partitions=4)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": "all",
                         "compression.type": codec, "linger.ms": 5})
    base_ts = int(time.time() * 1000) - 60_000
    sent = {}
    for i in range(2000):
        key = f"key-{i % 37}".encode()
        value = (f"value-{i}-" + "x" * (i % 50)).encode()
        producer.produce(topic_name, value, key, timestamp=base_ts + i, headers=[("h", str(i).encode())])
        sent[value] = (key, base_ts + i, str(i).encode())
    assert producer.flush(30) == 0
    messages = consume(broker, topic_name, 4, len(sent))
    assert len(messages) == len(sent)
    partition_of_key = {}
    last_offset = {}
    for message in messages:
        key, timestamp, header = sent[message.value()]
        assert message.key() == key
        assert message.timestamp()[1] == timestamp
        assert message.headers() == [("h", header)]
        assert partition_of_key.setdefault(key, message.partition()) == message.partition()
        assert message.offset() == last_offset.get(message.partition(), -1) + 1  # dense, in order
        last_offset[message.partition()] = message.offset()
    assert len(last_offset) == 4  # keys spread over all four partitions


def test_acks_zero_and_one_are_written(broker, topic_name):
    create_topic(broker, topic_name)
    for acks in ("0", "1"):
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "acks": acks})
        for i in range(100):
            producer.produce(topic_name, f"{acks}-{i}".encode())
        assert producer.flush(10) == 0
    messages = consume(broker, topic_name, 1, 200)
    assert sorted(m.value() for m in messages) == sorted(f"{a}-{i}".encode() for a in "01" for i in range(100))


def test_producing_to_a_new_topic_creates_it(broker, topic_name):
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic_name, b"first")
    assert producer.flush(10) == 0
    metadata = admin(broker).list_topics(topic_name, timeout=5)
    assert len(metadata.topics[topic_name].partitions) == 1
    assert [m.value() for m in consume(broker, topic_name, 1, 1)] == [b"first"]


def test_a_message_over_max_message_bytes_is_refused(broker, topic_name):
    create_topic(broker, topic_name, config={"max.message.bytes": "2000"})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.max.bytes": 100000})
    errors = []
    producer.produce(topic_name, b"x" * 10_000, on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)  # its own batch: the whole batch is refused, as Kafka does
    producer.produce(topic_name, b"small", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    assert [e.name() if e else None for e in errors] == ["MSG_SIZE_TOO_LARGE", None]


def test_offsets_for_times_and_watermarks(broker, topic_name):
    create_topic(broker, topic_name)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    base = 1_700_000_000_000
    for i in range(10):
        producer.produce(topic_name, f"v{i}".encode(), timestamp=base + i * 1000)
        producer.flush(10)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "times"})
    try:
        assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=5) == (0, 10)
        found = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 4500)], timeout=5)
        assert found[0].offset == 5
        past_end = consumer.offsets_for_times([TopicPartition(topic_name, 0, base + 99_000)], timeout=5)
        assert past_end[0].offset in (-1, 10)  # librdkafka reports "end" for no such record
    finally:
        consumer.close()


def test_admin_create_describe_alter_and_delete(broker, topic_name):
    client = admin(broker)
    create_topic(broker, topic_name, partitions=2, config={"retention.ms": "3600000"})
    duplicate = client.create_topics([NewTopic(topic_name, 1, 1)])[topic_name]
    with pytest.raises(KafkaException) as exc_info:
        duplicate.result(10)
    assert exc_info.value.args[0].name() == "TOPIC_ALREADY_EXISTS"

    resource = ConfigResource("topic", topic_name)
    described = client.describe_configs([resource])[resource].result(10)
    assert described["retention.ms"].value == "3600000"
    assert described["retention.ms"].source == 1  # DYNAMIC_TOPIC_CONFIG
    assert described["segment.bytes"].value == "1073741824" and described["segment.bytes"].is_default
    assert described["cleanup.policy"].value == "delete"

    resource = ConfigResource("topic", topic_name, set_config={"cleanup.policy": "compact"})
    client.alter_configs([resource])[resource].result(10)
    described = client.describe_configs([ConfigResource("topic", topic_name)])
    values = list(described.values())[0].result(10)
    assert values["cleanup.policy"].value == "compact"
    assert values["retention.ms"].is_default  # AlterConfigs replaces the whole override set

    for setting, reason in [({"retention.ms": "soon"}, ""),
                            ({"segment.bytes": "99999999999"}, "Not a number of type INT"),  # file positions are int32
                            ({"min.cleanable.dirty.ratio": "5"}, "Value must be no more than 1")]:
        bad = ConfigResource("topic", topic_name, set_config=setting)
        with pytest.raises(KafkaException) as exc_info:
            client.alter_configs([bad])[bad].result(10)
        assert exc_info.value.args[0].name() == "INVALID_CONFIG"
        assert reason in exc_info.value.args[0].str()

    client.create_partitions([NewPartitions(topic_name, 5)])[topic_name].result(10)
    assert len(client.list_topics(topic_name, timeout=5).topics[topic_name].partitions) == 5

    client.delete_topics([topic_name])[topic_name].result(10)
    assert topic_name not in client.list_topics(timeout=5).topics


def test_incremental_alter_configs(broker, topic_name):
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry

    create_topic(broker, topic_name, config={"retention.ms": "1000000"})
    client = admin(broker)
    resource = ConfigResource("topic", topic_name, incremental_configs=[
        ConfigEntry("segment.ms", "600000", incremental_operation=AlterConfigOpType.SET),
        ConfigEntry("cleanup.policy", "compact", incremental_operation=AlterConfigOpType.APPEND)])
    client.incremental_alter_configs([resource])[resource].result(10)
    values = client.describe_configs([ConfigResource("topic", topic_name)])
    values = list(values.values())[0].result(10)
    assert values["segment.ms"].value == "600000"
    assert values["retention.ms"].value == "1000000"  # untouched, unlike AlterConfigs
    assert values["cleanup.policy"].value == "delete,compact"


def test_describe_cluster(broker):
    client = admin(broker)
    description = client.describe_cluster().result(10)
    assert len(description.cluster_id) == 22
    assert [node.port for node in description.nodes] == [broker.port]


def test_long_poll_is_woken_by_an_append(broker, topic_name):
    create_topic(broker, topic_name)
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "poll",
                         "fetch.wait.max.ms": 5000, "fetch.min.bytes": 1})
    consumer.assign([TopicPartition(topic_name, 0, 0)])
    try:
        consumer.consume(1, 1.0)  # the fetch is now parked on the broker
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
        started = time.monotonic()
        producer.produce(topic_name, b"wake")
        producer.flush(5)
        messages = consumer.consume(1, 4.0)
        elapsed = time.monotonic() - started
    finally:
        consumer.close()
    assert [m.value() for m in messages] == [b"wake"]
    assert elapsed < 2.0  # woken by the append, not by fetch.wait.max.ms running out


def test_manual_replica_assignment_on_this_broker(broker, topic_name):
    """Replicas assigned by hand (kafka-topics --replica-assignment) work when they name this broker; an unknown
    broker is INVALID_REPLICA_ASSIGNMENT, as Kafka answers."""
    client = admin(broker)
    node = client.describe_cluster().result(10).nodes[0].id
    client.create_topics([NewTopic(topic_name, 3, replica_assignment=[[node], [node], [node]])])[topic_name].result(10)
    client.create_partitions([NewPartitions(topic_name, 4, replica_assignment=[[node]])])[topic_name].result(10)
    partitions = client.list_topics(topic_name, timeout=5).topics[topic_name].partitions
    assert sorted(partitions) == [0, 1, 2, 3] and all(p.replicas == [node] for p in partitions.values())
    for request in ([[node], [node + 7]], [[node, node]]):
        future = client.create_topics([NewTopic(f"{topic_name}-bad", len(request), replica_assignment=request)])
        with pytest.raises(KafkaException) as exc_info:
            future[f"{topic_name}-bad"].result(10)
        assert exc_info.value.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"
    with pytest.raises(KafkaException) as exc_info:
        client.create_partitions([NewPartitions(topic_name, 5, replica_assignment=[[node + 7]])])[topic_name].result(10)
    assert exc_info.value.args[0].name() == "INVALID_REPLICA_ASSIGNMENT"
    assert len(client.list_topics(topic_name, timeout=5).topics[topic_name].partitions) == 4
