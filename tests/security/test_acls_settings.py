"""super.users and allow.everyone.if.no.acl.found through real brokers, with User:ANONYMOUS (every PLAINTEXT
connection). The topics and ACLs are made over the wire by ANONYMOUS itself, which may: with
allow.everyone.if.no.acl.found the cluster has no ACL to stop it, and as a super user nothing does."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from odradek.embedded import BrokerProcess

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def start(tmp_path_factory, settings: dict, acls: list[AclBinding]) -> BrokerProcess:
    """A broker with the topics "owned" and "free" and `acls`, all made through it."""
    broker = BrokerProcess(tmp_path_factory.mktemp("acl-settings") / "data",
                           settings={"authorizer.class.name": AUTHORIZER, **settings}).start()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    for future in admin.create_topics([NewTopic("owned", 1, 1), NewTopic("free", 1, 1)]).values():
        future.result(10)
    for future in admin.create_acls(acls).values():
        future.result(10)
    return broker


def produce_error(broker, topic: str):
    delivered = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 5000})
    producer.produce(topic, b"value", on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(15)
    return delivered[0].code() if delivered[0] is not None else None


@pytest.fixture(scope="module")
def open_broker(tmp_path_factory):
    """allow.everyone.if.no.acl.found=true; only "owned" has an ACL, for someone else."""
    broker = start(tmp_path_factory, {"allow.everyone.if.no.acl.found": "true"}, [AclBinding(
        ResourceType.TOPIC, "owned", ResourcePatternType.LITERAL, "User:bob", "*", AclOperation.WRITE,
        AclPermissionType.ALLOW)])
    yield broker
    broker.stop()


def test_allow_everyone_if_no_acl_found_opens_only_resources_without_acls(open_broker):
    assert produce_error(open_broker, "free") is None
    assert produce_error(open_broker, "owned") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_super_user_passes_a_deny(tmp_path_factory):
    broker = start(tmp_path_factory, {"super.users": "User:admin;User:ANONYMOUS"}, [AclBinding(
        ResourceType.TOPIC, "*", ResourcePatternType.LITERAL, "User:*", "*", AclOperation.ALL,
        AclPermissionType.DENY)])
    try:
        assert produce_error(broker, "owned") is None
    finally:
        broker.stop()


def test_an_unknown_authorizer_class_stops_the_start(tmp_path_factory):
    with pytest.raises(RuntimeError) as raised:
        start(tmp_path_factory, {"authorizer.class.name": "com.example.MyAuthorizer"}, [])
    assert "authorizer.class.name" in str(raised.value)
