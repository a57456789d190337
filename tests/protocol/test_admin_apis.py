"""Admin APIs as Kafka admin clients use them against one broker: authorized operations with no authorizer, and the
partition admin calls (DescribeTopicPartitions, ElectLeaders, partition reassignments, AlterReplicaLogDirs,
ListConfigResources) answered the way a single Kafka broker answers them."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ElectionType, KafkaError, TopicCollection, TopicPartition
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic
from kafka import KafkaAdminClient
from kafka import TopicPartition as KafkaTopicPartition
from kafka import errors as Errors

from odradek.protocol import api
from odradek.protocol.acl import ResourceType, authorized_operations
from tests.broker.raw_client import RawClient

TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS}
CLUSTER_OPERATIONS = {AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                      AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                      AclOperation.DESCRIBE}
GROUP_OPERATIONS = {AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DELETE, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS}  # Kafka 4's groups have configs (KIP-848)
NODE_ID = 1
MetadataRequest = api("Metadata").request
Reassignments = api("AlterPartitionReassignments").request


@pytest.fixture(scope="module")
def admin(broker):
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{broker.port}"})


@pytest.fixture
def topic(admin, topic_name):
    admin.create_topics([NewTopic(topic_name, 3, 1)])[topic_name].result(timeout=10)
    return topic_name


def test_authorized_operations_without_authorizer_are_all_supported(admin, topic):
    cluster = admin.describe_cluster(include_authorized_operations=True).result(timeout=10)
    assert set(cluster.authorized_operations) == CLUSTER_OPERATIONS
    described = admin.describe_topics(TopicCollection([topic]), include_authorized_operations=True)
    description = described[topic].result(timeout=10)
    assert set(description.authorized_operations) == TOPIC_OPERATIONS
    assert len(description.partitions) == 3
    # not asked: none reported
    assert not admin.describe_cluster().result(timeout=10).authorized_operations


@pytest.fixture(scope="module")
def kafka_python_admin(broker):
    admin = KafkaAdminClient(bootstrap_servers=f"127.0.0.1:{broker.port}", request_timeout_ms=10000)
    yield admin
    admin.close()


def test_elect_leaders_with_confluent_kafka(admin, topic):
    asked = [TopicPartition(topic, 0), TopicPartition(topic, 2), TopicPartition(topic, 9)]
    results = admin.elect_leaders(ElectionType.PREFERRED, asked).result(timeout=10)
    codes = {tp.partition: error.code() for tp, error in results.items()}
    assert codes == {0: KafkaError.ELECTION_NOT_NEEDED, 2: KafkaError.ELECTION_NOT_NEEDED,
                     9: KafkaError.UNKNOWN_TOPIC_OR_PART}
    # all partitions: those whose preferred leader leads are left out, as Kafka does
    assert admin.elect_leaders(ElectionType.PREFERRED, None).result(timeout=10) == {}


def test_partition_reassignments_with_kafka_python(kafka_python_admin, broker, topic):
    admin = kafka_python_admin
    results = admin.alter_partition_reassignments({
        KafkaTopicPartition(topic, 0): [NODE_ID],   # onto the replicas it has: a no-op
        KafkaTopicPartition(topic, 1): None,                  # cancel: none in progress
        KafkaTopicPartition(topic, 2): [NODE_ID + 1],  # an unknown broker
        KafkaTopicPartition(topic, 7): [NODE_ID],   # an unknown partition
    })
    assert results[KafkaTopicPartition(topic, 0)] is None
    assert results[KafkaTopicPartition(topic, 1)] is Errors.NoReassignmentInProgressError
    assert results[KafkaTopicPartition(topic, 2)] is Errors.InvalidReplicationAssignmentError
    assert results[KafkaTopicPartition(topic, 7)] is Errors.UnknownTopicOrPartitionError
    assert admin.list_partition_reassignments() == {}
    assert admin.list_partition_reassignments({topic: [0, 1, 2]}) == {}


def test_partition_reassignments_naming_a_topic_twice_answer_each_partition_once(broker, topic):
    """As Kafka's map of them: the entries of a topic named twice are one, a later target for the same partition
    wins (the broker closed the connection on a KeyError, found by fuzzing)."""
    client = RawClient(broker.port)
    try:
        answer = client.call("AlterPartitionReassignments", 0, timeout_ms=10_000, topics=[
            Reassignments.ReassignableTopic(name=topic, partitions=[
                Reassignments.ReassignablePartition(partition_index=0, replicas=[NODE_ID + 1]),
                Reassignments.ReassignablePartition(partition_index=7, replicas=[NODE_ID])]),
            Reassignments.ReassignableTopic(name=topic, partitions=[
                Reassignments.ReassignablePartition(partition_index=0, replicas=[NODE_ID]),
                Reassignments.ReassignablePartition(partition_index=-2**31, replicas=None)])])
    finally:
        client.close()
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions]) for t in answer.responses] == [
        (topic, [(0, 0), (7, 3), (-2**31, 3)])]


def test_describe_topic_partitions_pages_with_a_cursor(kafka_python_admin, admin, topic_name):
    names = [f"{topic_name}-a", f"{topic_name}-b"]
    for future in admin.create_topics([NewTopic(name, 3, 1) for name in names]).values():
        future.result(timeout=10)
    missing = f"{topic_name}-z"
    invalid = f"{topic_name}-z/"
    pages, cursor = [], None
    while True:
        page = kafka_python_admin.describe_topic_partitions(names + [missing, invalid], response_partition_limit=2,
                                                            cursor=cursor)
        pages.append([(t["name"], [p["partition_index"] for p in t["partitions"]], t["error_code"])
                      for t in page["topics"]])
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert pages == [[(names[0], [0, 1], 0)], [(names[0], [2], 0), (names[1], [0], 0)],
                     [(names[1], [1, 2], 0)], [(missing, [], 3), (invalid, [], 17)]]
    first = kafka_python_admin.describe_topic_partitions([names[0]])["topics"][0]
    assert first["partitions"][0]["leader_id"] == NODE_ID
    assert first["partitions"][0]["isr_nodes"] == [NODE_ID]
    assert first["topic_authorized_operations"] == authorized_operations(ResourceType.TOPIC, True) == 3576


def test_alter_replica_log_dirs_and_list_config_resources(kafka_python_admin, broker, topic):
    path = kafka_python_admin.describe_log_dirs()[0]["log_dirs"][0]["log_dir"]
    results = kafka_python_admin.alter_replica_log_dirs({
        (topic, 0, NODE_ID): path,
        (topic, 1, NODE_ID): "/no/such/dir",
        (topic, 8, NODE_ID): path,
    })
    codes = {(replica[0], replica[1]): error for replica, error in results.items()}
    assert codes[topic, 0] is Errors.NoError
    assert codes[topic, 1] is Errors.LogDirNotFoundError
    assert codes[topic, 8] is Errors.ReplicaNotAvailableError
    assert kafka_python_admin.list_config_resources() == {}  # no client metrics subscriptions


def test_metadata_v8_to_10_reports_cluster_and_topic_operations_when_asked(broker, topic):
    client = RawClient(broker.port)
    try:
        for version in (8, 9, 10):
            asked = client.call("Metadata", version, topics=[MetadataRequest.MetadataRequestTopic(name=topic)],
                                include_cluster_authorized_operations=True, include_topic_authorized_operations=True)
            assert asked.cluster_authorized_operations == authorized_operations(ResourceType.CLUSTER, True)
            assert asked.topics[0].topic_authorized_operations == authorized_operations(ResourceType.TOPIC, True)
            not_asked = client.call("Metadata", version, topics=[MetadataRequest.MetadataRequestTopic(name=topic)])
            assert not_asked.cluster_authorized_operations == not_asked.topics[0].topic_authorized_operations \
                == -2**31
    finally:
        client.close()


def test_describe_consumer_groups_reports_group_operations(broker, admin, topic):
    """librdkafka asks ConsumerGroupDescribe first and DescribeGroups for groups that are not KIP-848 ones."""
    group = f"g-{topic}"
    consumer = Consumer({"bootstrap.servers": f"127.0.0.1:{broker.port}", "group.id": group,
                         "group.protocol": "consumer"})
    consumer.subscribe([topic])
    try:
        deadline = time.monotonic() + 20
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.poll(0.2)
        described = admin.describe_consumer_groups([group, f"missing-{topic}"], include_authorized_operations=True)
        live, missing = (described[name].result(timeout=10) for name in (group, f"missing-{topic}"))
    finally:
        consumer.close()
    assert live.state == ConsumerGroupState.STABLE
    assert set(live.authorized_operations) == GROUP_OPERATIONS
    assert missing.state == ConsumerGroupState.DEAD
    assert set(missing.authorized_operations) == GROUP_OPERATIONS
