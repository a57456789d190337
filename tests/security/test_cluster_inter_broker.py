"""Three ZooKeeper brokers whose only listeners are secured: CLIENT (SASL_SSL, for clients) and BROKER (SASL_SSL,
inter.broker.listener.name), with the authorizer on and only User:broker and User:admin super users. The brokers
replicate over BROKER, TLS-verified against the CA and logged in with PLAIN as `broker` (the username/password of the
listener's JAAS line), so an RF=3 topic takes acks=all records and gives them back, every replica in sync. A broker
restarted with a wrong inter-broker password cannot log in to the leaders: it stays out of every ISR and says why in
its log, while the others go on taking acks=all records. With BROKER as SSL and client authentication required, the
brokers are authorized by their certificate's subject instead."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import Cluster, wait_until
from tests.security.conftest import free_port, kazoo_client

PARTITIONS = 3
RECORDS = 200


def jaas(password: str) -> str:
    return ('org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
            f'password="{password}" user_broker="broker-secret";')


@pytest.fixture(scope="module")
def secured_cluster(odradek_zookeeper, tmp_path_factory, certificates):
    cluster = Cluster(0, zookeeper=f"{odradek_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}",
                      data_dir=tmp_path_factory.mktemp("inter-broker"), settings={
                          "listener.security.protocol.map": "CLIENT:SASL_SSL,BROKER:SASL_SSL",
                          "inter.broker.listener.name": "BROKER",
                          "sasl.mechanism.inter.broker.protocol": "PLAIN",
                          "sasl.enabled.mechanisms": "PLAIN",
                          "listener.name.client.plain.sasl.jaas.config":
                              'org.apache.kafka.common.security.plain.PlainLoginModule required '
                              'user_admin="admin-secret";',
                          "listener.name.broker.plain.sasl.jaas.config": jaas("broker-secret"),
                          "ssl.keystore.type": "PEM", "ssl.keystore.location": certificates.path("broker-keystore.pem"),
                          "ssl.truststore.type": "PEM", "ssl.truststore.location": certificates.path("ca.pem"),
                          "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                          "super.users": "User:broker;User:admin",
                          "offsets.topic.replication.factor": 3, "replica.lag.time.max.ms": 3000,
                          "listener.name.broker.connections.max.reauth.ms": 2000,
                          "group.initial.rebalance.delay.ms": 0})
    cluster.brokers = [cluster.new_broker(node_id, settings={
        "listeners": f"CLIENT://127.0.0.1:0,BROKER://127.0.0.1:{free_port()}"}) for node_id in (1, 2, 3)]
    with cluster:
        yield cluster


def client_config(cluster: Cluster, certificates) -> dict:
    return {"bootstrap.servers": cluster.bootstrap_servers, "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN", "sasl.username": "admin", "sasl.password": "admin-secret",
            "ssl.ca.location": certificates.path("ca.pem"), "log_level": 0}


def produce_all(config: dict, topic: str, values: list[bytes]) -> list:
    errors = []
    producer = Producer({**config, "acks": "all", "enable.idempotence": True, "message.timeout.ms": 30000})
    for value in values:
        producer.produce(topic, value, on_delivery=lambda err, msg: errors.append(err) if err else None)
    assert producer.flush(40) == 0
    return errors


def isr_of(zk, topic: str) -> dict[int, list[int]]:
    return {index: sorted(json.loads(zk.get(f"/brokers/topics/{topic}/partitions/{index}/state")[0])["isr"])
            for index in range(PARTITIONS)}


@pytest.fixture(scope="module")
def zk(secured_cluster):
    with kazoo_client(secured_cluster.zookeeper_connect) as client:
        yield client


def test_rf3_topic_replicates_over_the_secured_inter_broker_listener(secured_cluster, certificates, zk):
    config = client_config(secured_cluster, certificates)
    admin = AdminClient(config)
    admin.create_topics([NewTopic("replicated", PARTITIONS, 3)])["replicated"].result(30)
    values = [f"record-{index}".encode() for index in range(RECORDS)]
    assert produce_all(config, "replicated", values) == []
    consumer = Consumer({**config, "group.id": "readers", "auto.offset.reset": "earliest"})
    consumer.subscribe(["replicated"])
    seen = []
    deadline = time.monotonic() + 40
    while len(seen) < RECORDS and time.monotonic() < deadline:
        message = consumer.poll(0.5)
        if message is not None and message.error() is None:
            seen.append(message.value())
    consumer.close()
    assert sorted(seen) == sorted(values)
    assert wait_until(lambda: isr_of(zk, "replicated") == {i: [1, 2, 3] for i in range(PARTITIONS)}, 30), \
        isr_of(zk, "replicated")


def test_followers_renew_their_sasl_sessions_before_the_leader_ends_them(secured_cluster, zk):
    """BROKER grants sessions of 2 s (connections.max.reauth.ms): the followers of the topic above connect and log
    in again before theirs end, so no fetch is cut off by the leader closing an expired session."""
    logs_before = {broker.node_id: len(broker.log_path.read_text()) for broker in secured_cluster.brokers}
    time.sleep(5)
    for broker in secured_cluster.brokers:
        written = broker.log_path.read_text()[logs_before[broker.node_id]:]
        assert "fetching from broker" not in written, written
        assert written.count("authenticated as User:broker") >= 2  # its two followers came back at least once
    assert isr_of(zk, "replicated") == {i: [1, 2, 3] for i in range(PARTITIONS)}


def test_a_wrong_inter_broker_password_keeps_the_broker_out_of_the_isr(secured_cluster, certificates, zk):
    config = client_config(secured_cluster, certificates)
    broker = secured_cluster.broker(3)
    broker.stop()
    broker.settings["listener.name.broker.plain.sasl.jaas.config"] = jaas("not-the-password")
    broker.start()
    assert produce_all(config, "replicated", [b"after-%d" % index for index in range(50)]) == []
    time.sleep(3)  # beyond replica.lag.time.max.ms: had broker 3 caught up, it would be back in the ISR by now
    assert all(3 not in isr for isr in isr_of(zk, "replicated").values()), isr_of(zk, "replicated")
    assert wait_until(lambda: "refused this broker's login on the inter-broker listener BROKER" in
                      broker.log_tail(400), 10), broker.log_tail()
    assert "Authentication failed: Invalid username or password" in broker.log_tail(400)


def test_an_ssl_inter_broker_listener_authorizes_brokers_by_their_certificate(odradek_zookeeper, tmp_path_factory,
                                                                              certificates):
    """BROKER as SSL with ssl.client.auth=required: each broker presents its keystore's certificate and is
    authorized as its subject, User:CN=localhost, the only super user besides the clients' admin."""
    cluster = Cluster(0, zookeeper=f"{odradek_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}",
                      data_dir=tmp_path_factory.mktemp("inter-broker-ssl"), settings={
                          "listener.security.protocol.map": "CLIENT:SASL_SSL,BROKER:SSL",
                          "inter.broker.listener.name": "BROKER", "listener.name.broker.ssl.client.auth": "required",
                          "sasl.enabled.mechanisms": "PLAIN",
                          "listener.name.client.plain.sasl.jaas.config":
                              'org.apache.kafka.common.security.plain.PlainLoginModule required '
                              'user_admin="admin-secret";',
                          "ssl.keystore.type": "PEM", "ssl.keystore.location": certificates.path("broker-keystore.pem"),
                          "ssl.truststore.type": "PEM", "ssl.truststore.location": certificates.path("ca.pem"),
                          "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
                          "super.users": "User:CN=localhost;User:admin"})
    cluster.brokers = [cluster.new_broker(node_id, settings={
        "listeners": f"CLIENT://127.0.0.1:0,BROKER://127.0.0.1:{free_port()}"}) for node_id in (1, 2, 3)]
    with cluster, kazoo_client(cluster.zookeeper_connect) as zk:
        config = client_config(cluster, certificates)
        admin = AdminClient(config)
        admin.create_topics([NewTopic("replicated", PARTITIONS, 3)])["replicated"].result(30)
        assert produce_all(config, "replicated", [b"%d" % index for index in range(50)]) == []
        assert wait_until(lambda: isr_of(zk, "replicated") == {i: [1, 2, 3] for i in range(PARTITIONS)}, 30), \
            isr_of(zk, "replicated")
