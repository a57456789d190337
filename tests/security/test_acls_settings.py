"""super.users and allow.everyone.if.no.acl.found through real brokers, with User:ANONYMOUS (every connection
until SASL lands): ACLs seeded into the catalogue before start, as an operator bootstraps them."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer

from odradek.cluster.metadata import ClusterMetadata
from odradek.embedded import BrokerProcess
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.security.acl import AclBinding, PatternType, Permission

AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def start(tmp_path_factory, settings: dict, acls: list[AclBinding]) -> BrokerProcess:
    data_dir = tmp_path_factory.mktemp("acl-settings") / "data"
    catalogue = ClusterMetadata.load(data_dir, 1)
    catalogue.create_topic("owned", 1, 1, {})
    catalogue.create_topic("free", 1, 1, {})
    catalogue.add_acls(acls)
    return BrokerProcess(data_dir, settings={"authorizer.class.name": AUTHORIZER, **settings}).start()


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
        ResourceType.TOPIC, "owned", PatternType.LITERAL, "User:bob", "*", AclOperation.WRITE, Permission.ALLOW)])
    yield broker
    broker.stop()


def test_allow_everyone_if_no_acl_found_opens_only_resources_without_acls(open_broker):
    assert produce_error(open_broker, "free") is None
    assert produce_error(open_broker, "owned") == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_a_super_user_passes_a_deny(tmp_path_factory):
    broker = start(tmp_path_factory, {"super.users": "User:admin;User:ANONYMOUS"}, [AclBinding(
        ResourceType.TOPIC, "*", PatternType.LITERAL, "User:*", "*", AclOperation.ALL, Permission.DENY)])
    try:
        assert produce_error(broker, "owned") is None
    finally:
        broker.stop()


def test_an_unknown_authorizer_class_stops_the_start(tmp_path_factory):
    with pytest.raises(RuntimeError) as raised:
        start(tmp_path_factory, {"authorizer.class.name": "com.example.MyAuthorizer"}, [])
    assert "authorizer.class.name" in str(raised.value)
