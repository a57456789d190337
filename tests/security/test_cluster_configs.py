"""SCRAM credentials, client quotas and dynamic broker configs of a three-broker ZooKeeper cluster live in Kafka's
/config znodes. The brokers log in to each other with SCRAM-SHA-256 as `broker`, whose credential was put into
ZooKeeper before they started, as kafka-configs.sh --zookeeper puts it. A user made through one broker logs in at
every broker; quotas and dynamic broker configs set through one broker are what every broker describes; the znodes
are Kafka's (a user's credentials and quotas side by side in /config/users/<user>). Each broker has a PLAINTEXT
listener (first: for the bare requests to one chosen broker) and BROKER, SASL_PLAINTEXT, the inter-broker one."""

from __future__ import annotations

import json
import re
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import (AdminClient, AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource,
                                   NewTopic, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from odradek.embedded import Cluster, wait_until
from odradek.protocol import api
from odradek.security.scram import new_credential
from tests.security.conftest import call_once, free_port, kazoo_client

BROKER_PASSWORD = "broker-secret"
SCRAM_JAAS = ('org.apache.kafka.common.security.scram.ScramLoginModule required username="broker" '
              f'password="{BROKER_PASSWORD}";')


@pytest.fixture(scope="module")
def zk_connect(odradek_zookeeper):
    return f"{odradek_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def zk(zk_connect):
    hosts, chroot = zk_connect.split("/", 1)
    with kazoo_client(hosts) as client:
        client.ensure_path("/" + chroot)
    with kazoo_client(zk_connect) as client:
        yield client


@pytest.fixture(scope="module")
def config_cluster(zk, zk_connect, tmp_path_factory):
    # the brokers' own login, written before they start, as `kafka-configs.sh --zookeeper ... --alter --add-config
    # SCRAM-SHA-256=[password=...] --entity-type users --entity-name broker` writes it
    credential = new_credential("SCRAM-SHA-256", BROKER_PASSWORD)
    zk.create("/config/users/broker", json.dumps({"version": 1, "config": {
        "SCRAM-SHA-256": credential.to_text()}}).encode(), makepath=True)
    cluster = Cluster(0, zookeeper=zk_connect, data_dir=tmp_path_factory.mktemp("cluster-configs"), settings={
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,BROKER:SASL_PLAINTEXT",
        "inter.broker.listener.name": "BROKER", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.broker.scram-sha-256.sasl.jaas.config": SCRAM_JAAS})
    sasl_ports = {node_id: free_port() for node_id in (1, 2, 3)}
    cluster.brokers = [cluster.new_broker(node_id, settings={
        "listeners": f"PLAINTEXT://127.0.0.1:0,BROKER://127.0.0.1:{sasl_ports[node_id]}"}) for node_id in (1, 2, 3)]
    with cluster:
        yield cluster, sasl_ports


def logs_in(sasl_port: int, user: str, password: str, mechanism: str) -> bool:
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{sasl_port}", "security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password,
                         "log_level": 0})
    try:
        admin.list_topics(timeout=3)
        return True
    except Exception:
        return False


def test_brokers_replicate_logged_in_with_scram_credentials_from_zookeeper(config_cluster, zk):
    cluster, _ = config_cluster
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic("replicated", 3, 3)])["replicated"].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "acks": "all", "log_level": 0})
    failures = []
    for index in range(100):
        producer.produce("replicated", b"%d" % index, on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(60) == 0 and failures == []

    def isr():
        return [sorted(json.loads(zk.get(f"/brokers/topics/replicated/partitions/{p}/state")[0])["isr"])
                for p in range(3)]
    assert wait_until(lambda: isr() == [[1, 2, 3]] * 3, 30), isr()
    for broker in cluster.brokers:  # each leads a partition the two others fetch, logged in over BROKER
        assert "authenticated as User:broker with SCRAM-SHA-256" in broker.log_path.read_text()


def test_a_user_made_through_one_broker_logs_in_at_every_broker(config_cluster, zk):
    cluster, sasl_ports = config_cluster
    admin = AdminClient({"bootstrap.servers": cluster.broker(1).bootstrap_servers, "log_level": 0})
    upsertion = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192),
                                             b"alice-secret")
    for future in admin.alter_user_scram_credentials([upsertion]).values():
        future.result(10)
    started = time.monotonic()
    assert wait_until(lambda: all(logs_in(port, "alice", "alice-secret", "SCRAM-SHA-512")
                                  for port in sasl_ports.values()), 10)
    print(f"alice logged in at all three brokers {time.monotonic() - started:.2f} s after the change "
          "(three SCRAM-SHA-512 logins of 8192 iterations included)")
    assert not logs_in(sasl_ports[3], "alice", "wrong", "SCRAM-SHA-512")

    stored = json.loads(zk.get("/config/users/alice")[0])
    assert stored["version"] == 1 and list(stored["config"]) == ["SCRAM-SHA-512"]
    assert re.fullmatch(r"salt=[A-Za-z0-9+/=]+,stored_key=[A-Za-z0-9+/=]{88},server_key=[A-Za-z0-9+/=]{88},"
                        r"iterations=8192", stored["config"]["SCRAM-SHA-512"])
    notified = [json.loads(zk.get(f"/config/changes/{child}")[0]) for child in zk.get_children("/config/changes")]
    assert {"version": 2, "entity_path": "users/alice"} in notified

    deletion = UserScramCredentialDeletion("alice", ScramMechanism.SCRAM_SHA_512)
    other_admin = AdminClient({"bootstrap.servers": cluster.broker(2).bootstrap_servers})
    for future in other_admin.alter_user_scram_credentials([deletion]).values():
        future.result(10)
    assert wait_until(lambda: not any(logs_in(port, "alice", "alice-secret", "SCRAM-SHA-512")
                                      for port in sasl_ports.values()), 10)


def describe_quotas(broker) -> dict:
    answer = call_once(broker.port, "DescribeClientQuotas", 1, strict=False, components=[])
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in answer.entries}


def test_quotas_set_through_one_broker_are_every_brokers(config_cluster, zk):
    cluster, _ = config_cluster
    Request = api("AlterClientQuotas").request
    upsertion = UserScramCredentialUpsertion("carol", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                             b"carol-secret")
    admin = AdminClient({"bootstrap.servers": cluster.broker(1).bootstrap_servers})
    for future in admin.alter_user_scram_credentials([upsertion]).values():
        future.result(10)
    entries = {(("user", "carol"),): [("producer_byte_rate", 1024.0)],
               (("client-id", "batch job"),): [("request_percentage", 50.0)],
               (("user", None), ("client-id", "c2")): [("consumer_byte_rate", 2048.0)]}
    answer = call_once(cluster.broker(1).port, "AlterClientQuotas", 1, validate_only=False, entries=[Request.EntryData(
        entity=[Request.EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
        ops=[Request.OpData(key=key, value=value, remove=False) for key, value in ops])
        for entity, ops in entries.items()])
    assert [entry.error_code for entry in answer.entries] == [0, 0, 0]
    expected = {tuple(sorted(entity, key=lambda part: part[0] != "user")): dict(ops)
                for entity, ops in entries.items()}
    for node_id in (2, 3):
        assert wait_until(lambda: {tuple(sorted(e, key=lambda part: part[0] != "user")): v
                                   for e, v in describe_quotas(cluster.broker(node_id)).items()} == expected, 10)

    carol = json.loads(zk.get("/config/users/carol")[0])["config"]  # credential and quota side by side
    assert carol["producer_byte_rate"] == "1024" and carol["SCRAM-SHA-256"].startswith("salt=")
    assert json.loads(zk.get("/config/clients/batch%20job")[0])["config"] == {"request_percentage": "50.0"}
    assert json.loads(zk.get("/config/users/<default>/clients/c2")[0])["config"] == {"consumer_byte_rate": "2048"}
    assert logs_in(config_cluster[1][3], "carol", "carol-secret", "SCRAM-SHA-256")  # the quota kept the credential


def test_dynamic_broker_configs_set_through_one_broker_are_every_brokers(config_cluster, zk):
    cluster, _ = config_cluster
    Request = api("IncrementalAlterConfigs").request  # the cluster default (""), which no client addresses
    answer = call_once(cluster.broker(1).port, "IncrementalAlterConfigs", 1, validate_only=False, resources=[
        Request.AlterConfigsResource(resource_type=4, resource_name="", configs=[
            Request.AlterableConfig(name="log.retention.ms", config_operation=0, value="3600000")])])
    assert answer.responses[0].error_code == 0, answer.responses[0].error_message
    admin = AdminClient({"bootstrap.servers": cluster.broker(1).bootstrap_servers, "log_level": 0})
    only_two = ConfigResource(ConfigResource.Type.BROKER, "2", incremental_configs=[  # sent to broker 2
        ConfigEntry("log.segment.bytes", "1048576", incremental_operation=AlterConfigOpType.SET)])
    for future in admin.incremental_alter_configs([only_two]).values():
        future.result(10)
    assert json.loads(zk.get("/config/brokers/<default>")[0]) == {"version": 1,
                                                                   "config": {"log.retention.ms": "3600000"}}
    assert json.loads(zk.get("/config/brokers/2")[0])["config"] == {"log.segment.bytes": "1048576"}

    def described(node_id: int) -> dict:
        resource = ConfigResource(ConfigResource.Type.BROKER, str(node_id))
        entries = admin.describe_configs([resource])[resource].result(10)
        return {name: (entries[name].value, entries[name].source) for name in ("log.retention.ms",
                                                                                "log.segment.bytes")}

    dynamic_default = ("3600000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value)
    assert wait_until(lambda: described(3)["log.retention.ms"] == dynamic_default, 10), described(3)
    assert described(3)["log.segment.bytes"] == ("1073741824", ConfigSource.DEFAULT_CONFIG.value)
    assert described(2) == {"log.retention.ms": dynamic_default,
                            "log.segment.bytes": ("1048576", ConfigSource.DYNAMIC_BROKER_CONFIG.value)}


def test_a_dynamic_broker_config_set_through_another_broker_is_applied(config_cluster):
    """The cluster default log.segment.bytes, set through broker 1: broker 3's new partition rolls at 1 MiB."""
    cluster, _ = config_cluster
    Request = api("IncrementalAlterConfigs").request
    answer = call_once(cluster.broker(1).port, "IncrementalAlterConfigs", 1, validate_only=False, resources=[
        Request.AlterConfigsResource(resource_type=4, resource_name="", configs=[
            Request.AlterableConfig(name="log.segment.bytes", config_operation=0, value="1048576")])])
    assert answer.responses[0].error_code == 0, answer.responses[0].error_message
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic("rolled", 3, 1)])["rolled"].result(30)
    topic = admin.list_topics("rolled", timeout=10).topics["rolled"]
    [partition] = [p.id for p in topic.partitions.values() if p.leader == 3]
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "linger.ms": 5, "log_level": 0})
    for _ in range(30):
        producer.produce("rolled", b"x" * 100_000, partition=partition)
    assert producer.flush(30) == 0
    directory = cluster.broker(3).data_dir / f"rolled-{partition}"
    assert len([path for path in directory.iterdir() if path.suffix == ".log"]) >= 2
