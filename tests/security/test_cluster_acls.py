"""ACLs in a three-broker ZooKeeper cluster live in Kafka's /kafka-acl znodes: one made through the cluster is
enforced by every broker within a second, one written into ZooKeeper as Kafka's kafka-acls.sh writes it is enforced
and listed too, and a deletion is seen everywhere. Each broker has a PLAINTEXT listener (User:ANONYMOUS, the probed
principal, asked directly at each broker with a bare Metadata request) and a SASL_PLAINTEXT one for the admin, a
super user."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ResourcePatternType, ResourceType)

from odradek.embedded import Cluster
from odradek.errors import ErrorCode
from odradek.protocol import api
from tests.security.conftest import call_once, free_port, kazoo_client

PASSWORDS = {"admin": "admin-secret"}
JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required user_admin=\"admin-secret\";"
METADATA = api("Metadata").request


@pytest.fixture(scope="module")
def acl_cluster(odradek_zookeeper, tmp_path_factory):
    cluster = Cluster(0, zookeeper=f"{odradek_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}",
                      data_dir=tmp_path_factory.mktemp("cluster-acls"),
                      settings={"sasl.enabled.mechanisms": "PLAIN",
                                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
                                "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                                "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false"})
    sasl_ports = {node_id: free_port() for node_id in (1, 2, 3)}
    cluster.brokers = [cluster.new_broker(node_id, settings={
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_ports[node_id]}"})
        for node_id in (1, 2, 3)]
    with cluster:
        yield cluster, sasl_ports


@pytest.fixture(scope="module")
def zk(acl_cluster):
    with kazoo_client(acl_cluster[0].zookeeper_connect) as client:
        yield client


def admin_of(acl_cluster, node_id: int = 1) -> AdminClient:
    return AdminClient({"bootstrap.servers": f"127.0.0.1:{acl_cluster[1][node_id]}", "log_level": 0,
                        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                        "sasl.username": "admin", "sasl.password": PASSWORDS["admin"]})


def anonymous_may_describe(cluster: Cluster, topic: str) -> dict[int, bool]:
    """Per broker: whether it lets User:ANONYMOUS describe the topic (it need not exist)."""
    seen = {}
    for broker in cluster.brokers:
        answer = call_once(broker.port, "Metadata", 12, topics=[METADATA.MetadataRequestTopic(name=topic)],
                           allow_auto_topic_creation=False)
        code = answer.topics[0].error_code
        assert code in (ErrorCode.TOPIC_AUTHORIZATION_FAILED, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)
        seen[broker.node_id] = code != ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return seen


def seconds_until_every_broker(cluster: Cluster, topic: str, allowed: bool, timeout: float = 20.0) -> float:
    started = time.monotonic()
    while True:
        seen = anonymous_may_describe(cluster, topic)
        if all(value == allowed for value in seen.values()):
            return time.monotonic() - started
        assert time.monotonic() - started < timeout, f"brokers' decisions after {timeout} s: {seen}"
        time.sleep(0.02)


def test_acl_made_through_the_cluster_is_enforced_by_every_broker(acl_cluster, zk):
    cluster, _ = acl_cluster
    assert anonymous_may_describe(cluster, "orders") == {1: False, 2: False, 3: False}
    admin = admin_of(acl_cluster, 1)
    bindings = [AclBinding(ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                           AclOperation.DESCRIBE, AclPermissionType.ALLOW),
                AclBinding(ResourceType.TOPIC, "logs-", ResourcePatternType.PREFIXED, "User:ANONYMOUS", "*",
                           AclOperation.READ, AclPermissionType.ALLOW)]
    for future in admin.create_acls(bindings).values():
        future.result(10)
    seconds = seconds_until_every_broker(cluster, "orders", allowed=True)
    print(f"ACL enforced by all three brokers {seconds * 1000:.0f} ms after CreateAcls was answered")
    assert seconds < 1.0
    assert seconds_until_every_broker(cluster, "logs-app", allowed=True) < 1.0  # READ implies DESCRIBE

    # Kafka's znodes, as its AclAuthorizer writes and reads them
    literal = json.loads(zk.get("/kafka-acl/Topic/orders")[0])
    assert literal == {"version": 1, "acls": [{"principal": "User:ANONYMOUS", "permissionType": "Allow",
                                               "operation": "Describe", "host": "*"}]}
    prefixed = json.loads(zk.get("/kafka-acl-extended/prefixed/Topic/logs-")[0])
    assert prefixed["acls"] == [{"principal": "User:ANONYMOUS", "permissionType": "Allow", "operation": "Read",
                                 "host": "*"}]
    changes = [zk.get(f"/kafka-acl-changes/{child}")[0] for child in zk.get_children("/kafka-acl-changes")]
    assert b"TOPIC:orders" in changes
    extended = [json.loads(zk.get(f"/kafka-acl-extended-changes/{child}")[0])
                for child in zk.get_children("/kafka-acl-extended-changes")]
    assert {"version": 1, "resourceType": "TOPIC", "name": "logs-", "patternType": "PREFIXED"} in extended

    # deleted through another broker: refused everywhere again, the znode gone
    other_admin = admin_of(acl_cluster, 3)
    deleted = other_admin.delete_acls([AclBindingFilter(
        ResourceType.TOPIC, "orders", ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
        AclPermissionType.ANY)])
    for future in deleted.values():
        assert len(future.result(10)) == 1
    assert seconds_until_every_broker(cluster, "orders", allowed=False) < 1.0
    assert zk.exists("/kafka-acl/Topic/orders") is None
    assert anonymous_may_describe(cluster, "logs-app") == {1: True, 2: True, 3: True}


def test_acl_written_into_zookeeper_as_kafka_tools_write_it(acl_cluster, zk):
    """What kafka-acls.sh --authorizer-properties zookeeper.connect=... (Kafka 2.x) leaves in ZooKeeper."""
    cluster, _ = acl_cluster
    assert anonymous_may_describe(cluster, "from-zk") == {1: False, 2: False, 3: False}
    zk.create("/kafka-acl/Topic/from-zk", json.dumps({"version": 1, "acls": [
        {"principal": "User:ANONYMOUS", "permissionType": "Allow", "operation": "Describe", "host": "*"}]}).encode(),
        makepath=True)
    zk.create("/kafka-acl-changes/acl_changes_", b"TOPIC:from-zk", sequence=True)
    assert seconds_until_every_broker(cluster, "from-zk", allowed=True) < 1.0
    admin = admin_of(acl_cluster, 2)
    listed = admin.describe_acls(AclBindingFilter(
        ResourceType.TOPIC, "from-zk", ResourcePatternType.ANY, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(10)
    assert [(b.principal, b.operation) for b in listed] == [("User:ANONYMOUS", AclOperation.DESCRIBE)]


def test_a_resource_name_with_a_slash_is_refused(acl_cluster, zk):
    """A name is a znode name in ZooKeeper: Kafka's AclAuthorizer refuses '/' in it, and so does this broker."""
    admin = admin_of(acl_cluster, 1)
    binding = AclBinding(ResourceType.GROUP, "team/billing", ResourcePatternType.LITERAL, "User:ANONYMOUS", "*",
                         AclOperation.READ, AclPermissionType.ALLOW)
    with pytest.raises(KafkaException) as refused:
        admin.create_acls([binding])[binding].result(10)
    assert refused.value.args[0].code() == KafkaError.INVALID_REQUEST
    assert zk.exists("/kafka-acl/Group/team") is None
