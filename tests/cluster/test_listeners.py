"""Two ZooKeeper brokers with a PLAINTEXT and a SASL_PLAINTEXT listener each: both are registered in /brokers/ids
as Kafka registers them, and a client on either listener is given every broker at that listener's address (a
SASL client handed the PLAINTEXT ports would fail to authenticate at the second broker)."""

from __future__ import annotations

import json
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient

from odradek.embedded import Cluster
from tests.security.conftest import PLAIN_USERS, free_port

JAAS = "org.apache.kafka.common.security.plain.PlainLoginModule required " + \
    " ".join(f'user_{user}="{password}"' for user, password in PLAIN_USERS.items()) + ";"


@pytest.fixture(scope="module")
def two_listener_cluster(odradek_zookeeper, tmp_path_factory):
    cluster = Cluster(0, zookeeper=f"{odradek_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}",
                      data_dir=tmp_path_factory.mktemp("listeners"),
                      settings={"sasl.enabled.mechanisms": "PLAIN",
                                "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    sasl_ports = {node_id: free_port() for node_id in (1, 2)}
    cluster.brokers = [cluster.new_broker(node_id, settings={
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_ports[node_id]}"})
        for node_id in (1, 2)]
    with cluster:
        yield cluster, sasl_ports


def brokers_seen(config: dict) -> dict[int, tuple[str, int]]:
    """Every broker in the Metadata a confluent-kafka client gets, once both brokers are in it."""
    admin = AdminClient({**config, "log_level": 0})
    deadline = time.monotonic() + 20
    while True:
        seen = {b.id: (b.host, b.port) for b in admin.list_topics(timeout=10).brokers.values()}
        if len(seen) == 2 or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def test_every_listener_is_registered_with_its_protocol(two_listener_cluster, odradek_zookeeper):
    from kazoo.client import KazooClient

    cluster, sasl_ports = two_listener_cluster
    client = KazooClient(hosts=cluster.zookeeper_connect)
    client.start(timeout=15)
    try:
        for broker in cluster.brokers:
            registration = json.loads(client.get(f"/brokers/ids/{broker.node_id}")[0])
            assert registration["endpoints"] == [f"PLAINTEXT://127.0.0.1:{broker.port}",
                                                 f"SASL_PLAINTEXT://127.0.0.1:{sasl_ports[broker.node_id]}"]
            assert registration["listener_security_protocol_map"] == {"PLAINTEXT": "PLAINTEXT",
                                                                      "SASL_PLAINTEXT": "SASL_PLAINTEXT"}
            assert (registration["host"], registration["port"]) == ("127.0.0.1", broker.port)
    finally:
        client.stop()
        client.close()


@pytest.mark.parametrize("through", [1, 2])
def test_a_client_on_each_listener_sees_every_broker_at_that_listener(two_listener_cluster, through):
    cluster, sasl_ports = two_listener_cluster
    broker = cluster.broker(through)
    assert brokers_seen({"bootstrap.servers": broker.bootstrap_servers}) == {
        b.node_id: ("127.0.0.1", b.port) for b in cluster.brokers}
    assert brokers_seen({"bootstrap.servers": f"127.0.0.1:{sasl_ports[through]}",
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "alice", "sasl.password": PLAIN_USERS["alice"]}) == {
        node_id: ("127.0.0.1", port) for node_id, port in sasl_ports.items()}
