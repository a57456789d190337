"""Kafka's authorizer through a real broker and real clients: authorizer.class.name on,
allow.everyone.if.no.acl.found=false. The principal under test is User:ANONYMOUS, every client of the PLAINTEXT
listener; the grants come from User:admin, a SASL/PLAIN user of the SASL_PLAINTEXT listener named in super.users, so
nothing is seeded into the catalogue. Each test names its own topics, groups and transactional ids, so the ACLs of
one never reach another."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, AdminClient,
                                   ConfigResource, NewTopic, ResourcePatternType, ResourceType)
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import TopicAuthorizationFailedError

from odradek.embedded import BrokerProcess
from odradek.errors import ErrorCode
from odradek.protocol import api
from tests.broker.raw_client import RawClient
from tests.cli.run import odradek
from tests.security.conftest import free_port

ANONYMOUS = "User:ANONYMOUS"
ADMIN_CONFIG = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "admin",
                "sasl.password": "admin-secret"}


@dataclass
class Listener:
    bootstrap_servers: str  # what tests.cli.run.odradek passes as --bootstrap-server


@dataclass
class SecuredBroker:
    process: BrokerProcess
    bootstrap_servers: str  # PLAINTEXT: User:ANONYMOUS
    port: int
    admin_listener: Listener  # SASL_PLAINTEXT, where User:admin logs in
    admin_properties: Path  # ADMIN_CONFIG as a --command-config file


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    sasl_port = free_port()
    directory = tmp_path_factory.mktemp("acl-broker")
    process = BrokerProcess(directory / "data", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="admin-secret";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin",
        "allow.everyone.if.no.acl.found": "false", "group.initial.rebalance.delay.ms": 0})
    process.start()
    properties = directory / "admin.properties"
    properties.write_text("".join(f"{key}={value}\n" for key, value in ADMIN_CONFIG.items()))
    yield SecuredBroker(process, process.bootstrap_servers, process.port, Listener(f"127.0.0.1:{sasl_port}"),
                        properties)
    process.stop()


@pytest.fixture
def name() -> str:
    return f"acl-{uuid.uuid4().hex[:8]}"


_ADMINS: dict = {}


def _kept(key, config: dict) -> AdminClient:
    """One admin client per broker and principal, kept alive for its futures."""
    if key not in _ADMINS:
        _ADMINS[key] = AdminClient(config)
    return _ADMINS[key]


def admin(broker) -> AdminClient:
    """The principal under test's admin client: User:ANONYMOUS on the PLAINTEXT listener."""
    return _kept(broker.bootstrap_servers, {"bootstrap.servers": broker.bootstrap_servers})


def super_admin(broker) -> AdminClient:
    """User:admin, the super user, over SASL_PLAINTEXT: makes topics and grants."""
    return _kept(broker.admin_listener.bootstrap_servers,
                 {"bootstrap.servers": broker.admin_listener.bootstrap_servers, **ADMIN_CONFIG})


def odradek_as_admin(broker, *args):
    """`odradek ...` run by the super user over the SASL listener (--command-config)."""
    return odradek(broker.admin_listener, *args, "--command-config", str(broker.admin_properties))


def allow(broker, resource_type, resource_name, *operations, pattern=ResourcePatternType.LITERAL,
          permission=AclPermissionType.ALLOW, principal=ANONYMOUS):
    bindings = [AclBinding(resource_type, resource_name, pattern, principal, "*", op, permission)
                for op in operations]
    for future in super_admin(broker).create_acls(bindings).values():
        future.result(10)


def revoke_cluster_acls(broker) -> None:
    """Every ACL of User:ANONYMOUS on the cluster removed: what a test granted there reaches no other test."""
    for future in super_admin(broker).delete_acls([AclBindingFilter(
            ResourceType.BROKER, "kafka-cluster", ResourcePatternType.LITERAL, ANONYMOUS, "*", AclOperation.ANY,
            AclPermissionType.ANY)]).values():
        future.result(10)


def make_topic(broker, topic: str, partitions: int = 1) -> None:
    super_admin(broker).create_topics([NewTopic(topic, partitions, 1)])[topic].result(10)


def produce_error(broker, topic: str, **config) -> KafkaError | None:
    """The error of producing one record: the delivery error, or the fatal one confluent-kafka raises from flush
    (an idempotent producer refused a producer id); None when it was written."""
    delivered = []
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "message.timeout.ms": 5000, **config})
    producer.produce(topic, b"value", on_delivery=lambda err, msg: delivered.append(err))
    try:
        producer.flush(15)
    except (KafkaException, SystemError) as exc:  # SystemError wraps the KafkaException raised in a callback
        return (exc.__cause__ or exc).args[0]
    return delivered[0]


# first in the module: no test has granted WRITE on any topic yet (KIP-679 would accept that instead)
def test_idempotent_producer_needs_idempotent_write_or_write_on_some_topic(secured, name):
    make_topic(secured, name)
    allow(secured, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    error = produce_error(secured, name, **{"enable.idempotence": True})
    assert error.code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED
    allow(secured, ResourceType.TOPIC, name, AclOperation.WRITE)
    assert produce_error(secured, name, **{"enable.idempotence": True}) is None


def test_produce_needs_write_and_the_cli_grants_it(secured, name):
    make_topic(secured, name)
    assert produce_error(secured, name).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    added = odradek_as_admin(secured, "acls", "add", "--allow-principal", ANONYMOUS, "--operation", "Write",
                             "--topic", name)
    assert added.returncode == 0, added.stderr
    assert produce_error(secured, name) is None
    listed = odradek_as_admin(secured, "acls", "list", "--topic", name)
    assert listed.returncode == 0, listed.stderr
    assert [line.split() for line in listed.stdout.splitlines()[1:]] == [
        ["TOPIC", name, "LITERAL", ANONYMOUS, "*", "WRITE", "ALLOW"]]
    removed = odradek_as_admin(secured, "acls", "remove", "--topic", name, "--force")
    assert removed.returncode == 0, removed.stderr
    assert produce_error(secured, name).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_kafka_python_produce_without_write_is_refused(secured, name):
    make_topic(secured, name)
    allow(secured, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    producer = KafkaProducer(bootstrap_servers=secured.bootstrap_servers, enable_idempotence=False)
    try:
        with pytest.raises(TopicAuthorizationFailedError):
            producer.send(name, b"value").get(timeout=15)
    finally:
        producer.close()


def test_create_topics_needs_create(secured, name):
    with pytest.raises(KafkaException) as raised:
        admin(secured).create_topics([NewTopic(name, 1, 1)])[name].result(10)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(secured, ResourceType.TOPIC, f"{name}-", AclOperation.CREATE, pattern=ResourcePatternType.PREFIXED)
    admin(secured).create_topics([NewTopic(f"{name}-x", 1, 1)])[f"{name}-x"].result(10)


def test_metadata_hides_topics_the_principal_may_not_describe(secured, name):
    make_topic(secured, f"{name}-seen")
    make_topic(secured, f"{name}-hidden")
    allow(secured, ResourceType.TOPIC, f"{name}-se", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    listed = admin(secured).list_topics(timeout=10).topics
    assert f"{name}-seen" in listed and f"{name}-hidden" not in listed
    asked = admin(secured).list_topics(f"{name}-hidden", timeout=10).topics[f"{name}-hidden"]
    assert asked.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_prefixed_allow_and_deny_wins(secured, name):
    topic = f"{name}-orders"
    make_topic(secured, topic)
    allow(secured, ResourceType.TOPIC, "*", AclOperation.ALL, principal=f"User:{name}")  # someone else's wildcard
    assert produce_error(secured, topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(secured, ResourceType.TOPIC, f"{name}-", AclOperation.WRITE, pattern=ResourcePatternType.PREFIXED)
    assert produce_error(secured, topic) is None
    allow(secured, ResourceType.TOPIC, topic, AclOperation.WRITE, permission=AclPermissionType.DENY)
    assert produce_error(secured, topic).code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def consume_error(broker, topic: str, group: str) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": group,
                         "auto.offset.reset": "earliest", "session.timeout.ms": 6000})
    consumer.subscribe([topic])
    try:
        for _ in range(30):
            message = consumer.poll(0.5)
            if message is not None and message.error() is not None and message.error().code() in (
                    KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.GROUP_AUTHORIZATION_FAILED):
                return message.error().code()
            if message is not None and message.error() is None:
                return KafkaError.NO_ERROR
    finally:
        consumer.close()
    raise AssertionError("neither a record nor an authorization error")


def test_consume_needs_read_on_the_group_and_the_topic(secured, name):
    make_topic(secured, name)
    allow(secured, ResourceType.TOPIC, name, AclOperation.WRITE)
    assert produce_error(secured, name) is None
    assert consume_error(secured, name, name) == KafkaError.GROUP_AUTHORIZATION_FAILED
    allow(secured, ResourceType.GROUP, name, AclOperation.READ)
    assert consume_error(secured, name, name) == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(secured, ResourceType.TOPIC, name, AclOperation.READ)
    assert consume_error(secured, name, name) == KafkaError.NO_ERROR


def test_kafka_python_fetch_without_read_is_refused(secured, name):
    make_topic(secured, name)
    allow(secured, ResourceType.TOPIC, name, AclOperation.DESCRIBE)
    consumer = KafkaConsumer(bootstrap_servers=secured.bootstrap_servers,
                             auto_offset_reset="earliest")
    try:
        consumer.assign([TopicPartition(name, 0)])
        with pytest.raises(TopicAuthorizationFailedError):
            for _ in range(20):
                consumer.poll(500)
    finally:
        consumer.close()


def test_transactions_need_write_on_the_transactional_id(secured, name):
    make_topic(secured, name)
    allow(secured, ResourceType.TOPIC, name, AclOperation.WRITE)
    producer = Producer({"bootstrap.servers": secured.bootstrap_servers, "transactional.id": name})
    with pytest.raises(KafkaException) as raised:
        producer.init_transactions(10)
    assert raised.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    allow(secured, ResourceType.TRANSACTIONAL_ID, name, AclOperation.WRITE)
    producer = Producer({"bootstrap.servers": secured.bootstrap_servers, "transactional.id": name})
    producer.init_transactions(10)
    producer.begin_transaction()
    producer.produce(name, b"in a transaction")
    producer.commit_transaction(10)


def test_acl_apis_describe_and_delete_by_filter(secured, name):
    allow(secured, ResourceType.GROUP, f"{name}-", AclOperation.READ, pattern=ResourcePatternType.PREFIXED)
    allow(secured, ResourceType.GROUP, f"{name}-a", AclOperation.DESCRIBE, permission=AclPermissionType.DENY)
    found = super_admin(secured).describe_acls(AclBindingFilter(
        ResourceType.GROUP, f"{name}-a", ResourcePatternType.MATCH, None, None, AclOperation.ANY,
        AclPermissionType.ANY)).result(10)
    assert {(b.name, b.resource_pattern_type, b.operation, b.permission_type) for b in found} == {
        (f"{name}-", ResourcePatternType.PREFIXED, AclOperation.READ, AclPermissionType.ALLOW),
        (f"{name}-a", ResourcePatternType.LITERAL, AclOperation.DESCRIBE, AclPermissionType.DENY)}
    deleted = [b for future in super_admin(secured).delete_acls([AclBindingFilter(
        ResourceType.GROUP, None, ResourcePatternType.PREFIXED, None, None, AclOperation.ANY,
        AclPermissionType.ANY)]).values() for b in future.result(10)]
    assert [(b.name, b.operation) for b in deleted if b.name.startswith(name)] == [(f"{name}-", AclOperation.READ)]


def test_configs_need_describe_configs_and_alter_configs(secured, name):
    make_topic(secured, name)
    resource = ConfigResource(ConfigResource.Type.TOPIC, name)
    with pytest.raises(KafkaException) as raised:
        admin(secured).describe_configs([resource])[resource].result(10)
    assert raised.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    allow(secured, ResourceType.TOPIC, name, AclOperation.ALTER_CONFIGS)  # implies DESCRIBE_CONFIGS
    assert "retention.ms" in admin(secured).describe_configs([resource])[resource].result(10)
    cluster = ConfigResource(ConfigResource.Type.BROKER, "1")
    with pytest.raises(KafkaException) as raised:
        admin(secured).describe_configs([cluster])[cluster].result(10)
    assert raised.value.args[0].code() == KafkaError.CLUSTER_AUTHORIZATION_FAILED


def test_describe_topic_partitions_hides_topics_the_principal_may_not_describe(secured, name):
    make_topic(secured, f"{name}-seen")
    make_topic(secured, f"{name}-hidden")
    allow(secured, ResourceType.TOPIC, f"{name}-seen", AclOperation.DESCRIBE)
    client = RawClient(secured.port)
    try:
        listed = client.call("DescribeTopicPartitions", 0, topics=[], response_partition_limit=2000)
        names = {topic.name for topic in listed.topics}
        assert f"{name}-seen" in names and f"{name}-hidden" not in names
        Request = api("DescribeTopicPartitions").request
        named = client.call("DescribeTopicPartitions", 0, topics=[Request.TopicRequest(name=f"{name}-hidden")],
                            response_partition_limit=2000)
        assert named.topics[0].error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        client.close()


def test_cluster_describe_denied(secured):
    """A DENY of DESCRIBE on the cluster beats the ALTER that implies it: the cluster-level views refuse."""
    allow(secured, ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER)
    allow(secured, ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE, permission=AclPermissionType.DENY)
    client = RawClient(secured.port)
    try:
        assert client.call("DescribeLogDirs", 4, topics=None).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert client.call("ListPartitionReassignments", 0, timeout_ms=1000, topics=None).error_code == \
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        assert client.call("DescribeAcls", 3, resource_type_filter=1, resource_name_filter=None,
                           pattern_type_filter=1, principal_filter=None, host_filter=None, operation=1,
                           permission_type=1).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    finally:
        client.close()
        revoke_cluster_acls(secured)


def test_cli_consumer_and_producer_sets_and_prefixed_list(secured, name):
    added = odradek_as_admin(secured, "acls", "add", "--allow-principal", "User:carol", "--consumer", "--producer",
                             "--topic", f"{name}-", "--group", name, "--resource-pattern-type", "prefixed")
    assert added.returncode == 0, added.stderr
    listed = odradek_as_admin(secured, "acls", "list", "--principal", "User:carol", "--resource-pattern-type",
                              "prefixed")
    rows = {tuple(line.split()[:3] + line.split()[5:6]) for line in listed.stdout.splitlines()[1:]}
    assert {row for row in rows if row[1].startswith(name)} == {
        ("TOPIC", f"{name}-", "PREFIXED", "WRITE"), ("TOPIC", f"{name}-", "PREFIXED", "DESCRIBE"),
        ("TOPIC", f"{name}-", "PREFIXED", "CREATE"), ("TOPIC", f"{name}-", "PREFIXED", "READ"),
        ("GROUP", name, "PREFIXED", "READ")}
    bad = odradek_as_admin(secured, "acls", "add", "--allow-principal", "User:carol", "--operation", "Fly", "--topic",
                           name)
    assert bad.returncode == 2 and "Fly" in bad.stderr


def test_authorized_operations_are_the_principals_own(secured, name):
    allow(secured, ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER_CONFIGS)
    try:
        cluster = admin(secured).describe_cluster(include_authorized_operations=True).result(10)
    finally:
        revoke_cluster_acls(secured)
    assert set(cluster.authorized_operations) == {AclOperation.ALTER_CONFIGS, AclOperation.DESCRIBE_CONFIGS}
    allow(secured, ResourceType.GROUP, name, AclOperation.READ)
    [group] = admin(secured).describe_consumer_groups([name], include_authorized_operations=True).values()
    assert set(group.result(10).authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}


def test_broker_and_credential_apis_need_their_cluster_operations(secured):
    """WriteTxnMarkers (sent between brokers) needs CLUSTER_ACTION on the cluster, DescribeUserScramCredentials
    DESCRIBE and AlterUserScramCredentials ALTER, as KafkaApis checks them."""
    client = RawClient(secured.port)
    try:
        Markers = api("WriteTxnMarkers").request
        marker = Markers.WritableTxnMarker(producer_id=1, producer_epoch=0, transaction_result=True,
                                           coordinator_epoch=0, topics=[Markers.WritableTxnMarkerTopic(
                                               name="__consumer_offsets", partition_indexes=[0])])
        answer = client.call("WriteTxnMarkers", 1, markers=[marker])
        assert answer.markers[0].topics[0].partitions[0].error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        described = client.call("DescribeUserScramCredentials", 0, users=None)
        assert described.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
        Alter = api("AlterUserScramCredentials").request
        altered = client.call("AlterUserScramCredentials", 0, upsertions=[], deletions=[
            Alter.ScramCredentialDeletion(name="alice", mechanism=1)])
        assert [(r.user, r.error_code) for r in altered.results] == [("alice", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)]
    finally:
        client.close()
    assert super_admin(secured).describe_user_scram_credentials().result(10) == {}  # the super user may


def test_a_followers_fetch_needs_cluster_action_not_read(secured, name):
    """Kafka checks a follower's Fetch (replica_id set) for CLUSTER_ACTION on the cluster, not READ on the topics:
    READ lets a consumer fetch, but not a fetch that claims to come from broker 2."""
    make_topic(secured, name)
    allow(secured, ResourceType.TOPIC, name, AclOperation.READ)
    Fetch = api("Fetch").request
    client = RawClient(secured.port)
    try:
        def fetch_error(replica_id: int) -> int:
            answer = client.call("Fetch", 11, replica_id=replica_id, max_wait_ms=0, min_bytes=0, max_bytes=1 << 20,
                                 isolation_level=0, session_id=0, session_epoch=-1, topics=[Fetch.FetchTopic(
                                     topic=name, partitions=[Fetch.FetchPartition(
                                         partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])],
                                 forgotten_topics_data=[], rack_id="")
            return answer.responses[0].partitions[0].error_code
        assert fetch_error(-1) == ErrorCode.NONE
        assert fetch_error(2) == ErrorCode.TOPIC_AUTHORIZATION_FAILED
    finally:
        client.close()
