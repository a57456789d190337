"""One Kafka release in ApiVersions, served whole: every (API, version) the broker advertises answers a minimal
request on a connection that stays open, the advertised maxima are Kafka 4.0's, and kafka-python pinned to
api_version=(4, 0) can use the admin calls that pick their version from that release."""

from __future__ import annotations

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer
from kafka import TopicPartition
from kafka.admin import NewTopic, OffsetSpec
from kafka.protocol.broker_version_data import BROKER_API_VERSIONS

from odradek.protocol import API_BY_KEY

from tests.broker.raw_client import RawClient

# The few fields a request needs to be answered at all (Produce with acks=0 gets no answer, by design).
MINIMAL_FIELDS = {"Produce": {"acks": 1, "timeout_ms": 1000}, "Fetch": {"max_wait_ms": 0}}


def _advertised(broker, version: int = 3) -> dict[int, tuple[int, int]]:
    client = RawClient(broker.port)
    try:
        fields = {"client_software_name": "odradek-test", "client_software_version": "1"} if version >= 3 else {}
        answer = client.call("ApiVersions", version, **fields)
    finally:
        client.close()
    return {entry.api_key: (entry.min_version, entry.max_version) for entry in answer.api_keys}


def test_every_api_versions_version_carries_the_same_table(broker):
    """Old clients ask at v0-v2 (kafka-python, old librdkafka), new ones at v3 and v4 (flexible): each version's
    answer (whose entries are encoded once per version and then copied) lists the same APIs and ranges, twice in a
    row."""
    tables = [_advertised(broker, version) for version in range(API_BY_KEY[18].max_version + 1) for _ in range(2)]
    assert len(tables[0]) > 40
    assert all(table == tables[0] for table in tables)


# at Kafka 4.2+'s ranges (handlers/api_versions.py)
SHARE_APIS = {76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0),
              87: (0, 1), 90: (0, 1), 91: (0, 0), 92: (0, 0)}


def test_advertised_maxima_are_kafka_4_0(broker):
    kafka_4_0 = BROKER_API_VERSIONS[(4, 0)]
    advertised = _advertised(broker)
    assert {key: advertised.pop(key) for key in SHARE_APIS if key in advertised} == SHARE_APIS
    assert {key: high for key, (_, high) in advertised.items()} == {key: kafka_4_0[key][1] for key in advertised}
    assert all(low == 0 for low, _ in advertised.values())


def test_every_advertised_version_answers_and_keeps_the_connection(broker):
    advertised = _advertised(broker)
    client = RawClient(broker.port)
    answered = []
    try:
        for key, (low, high) in sorted(advertised.items()):
            name = API_BY_KEY[key].name
            for version in range(low, high + 1):
                answer = client.call(name, version, **MINIMAL_FIELDS.get(name, {}))
                assert isinstance(answer, API_BY_KEY[key].response), (name, version)
                answered.append((key, version))
        # still open after all of them
        assert client.call("ApiVersions", 0).error_code == 0
    finally:
        client.close()
    assert len(answered) == sum(high - low + 1 for low, high in advertised.values())


def test_kafka_python_pinned_to_4_0(broker, topic_name):
    """kafka-python told the broker is 4.0 sends 4.0's versions without asking (DescribeGroups v6 among them)."""
    bootstrap = f"127.0.0.1:{broker.port}"
    group = f"g-{topic_name}"
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, api_version=(4, 0), request_timeout_ms=10000)
    try:
        admin.create_topics([NewTopic(topic_name, 1, 1)])
        producer = KafkaProducer(bootstrap_servers=bootstrap, api_version=(4, 0))
        producer.send(topic_name, b"one").get(timeout=10)
        producer.close()
        consumer = KafkaConsumer(topic_name, bootstrap_servers=bootstrap, api_version=(4, 0), group_id=group,
                                 auto_offset_reset="earliest", enable_auto_commit=False)
        values = []
        for _ in range(50):
            values += [r.value for batch in consumer.poll(timeout_ms=200).values() for r in batch]
            if values:
                break
        assert values == [b"one"]
        consumer.commit()
        consumer.close()

        described = admin.describe_groups([group, f"missing-{topic_name}"])
        assert described[group]["error"] is None and described[group]["group_state"] == "Empty"
        assert set(described[group]["authorized_operations"]) == {  # a group's, as Kafka 4's (KIP-848 configs)
            "READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}
        assert "GroupIdNotFound" in described[f"missing-{topic_name}"]["error"]
        assert "not found" in described[f"missing-{topic_name}"]["error"]
        assert admin.list_group_offsets({group: None})
        assert admin.describe_cluster()["cluster_id"]
        latest = admin.list_partition_offsets({TopicPartition(topic_name, 0): OffsetSpec.LATEST})
        assert latest[TopicPartition(topic_name, 0)].offset == 1
    finally:
        admin.close()
