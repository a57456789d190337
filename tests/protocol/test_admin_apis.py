"""Admin APIs as Kafka admin clients use them against one broker: authorized operations with no authorizer, and the
partition admin calls (DescribeTopicPartitions, ElectLeaders, partition reassignments, AlterReplicaLogDirs,
ListConfigResources) answered the way a single Kafka broker answers them."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicCollection
from confluent_kafka.admin import AclOperation, AdminClient, NewTopic

TOPIC_OPERATIONS = {AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE,
                    AclOperation.ALTER, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS,
                    AclOperation.ALTER_CONFIGS}
CLUSTER_OPERATIONS = {AclOperation.CREATE, AclOperation.CLUSTER_ACTION, AclOperation.DESCRIBE_CONFIGS,
                      AclOperation.ALTER_CONFIGS, AclOperation.IDEMPOTENT_WRITE, AclOperation.ALTER,
                      AclOperation.DESCRIBE}


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
