"""ZooKeeper mode beside Apache Kafka 3.9.1, the last Kafka that has it: the same topic made and configured on a Kafka
broker and on an Odradek broker, each under its own chroot of the session's ZooKeeper, leaves the same znodes with
the same JSON (docs/zookeeper-layout.md), which is what Kafka's ZooKeeper-era tools and the seeds' consumers read.
Values that are the broker's own (ids handed out, times, ports, epochs of elections) are compared by kind."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic

from odradek.embedded import Cluster, wait_until
from tests.jvm import KAFKA_ZK_VERSION, KafkaServer

# znodes whose data is the broker's own and compared by the kind of each value only
BY_KIND = {"timestamp", "topic_id", "id", "port", "controller_epoch", "brokerid", "endpoints", "host"}


def shape(value, by_kind: bool = False):
    """A znode's JSON with the values of BY_KIND keys replaced by their type names."""
    if by_kind:
        return type(value).__name__
    if isinstance(value, dict):
        return {key: shape(item, key in BY_KIND) for key, item in value.items()}
    if isinstance(value, list):
        return [shape(item) for item in value]
    return value


@pytest.fixture(scope="module")
def layouts(odradek_zookeeper, tmp_path_factory):
    """{"kafka": read, "odradek": read}: read(path) is the JSON a znode holds under that broker's chroot."""
    from kazoo.client import KazooClient

    chroots = {"kafka": f"/kafka39-{uuid.uuid4().hex[:8]}", "odradek": f"/odradek-{uuid.uuid4().hex[:8]}"}
    kafka = KafkaServer(KAFKA_ZK_VERSION, zookeeper=odradek_zookeeper.connect + chroots["kafka"], heap="384m",
                        data_dir=tmp_path_factory.mktemp("kafka39"))
    odradek = Cluster(1, zookeeper=odradek_zookeeper.connect + chroots["odradek"],
                      data_dir=tmp_path_factory.mktemp("odradek-zk"))
    zk = KazooClient(hosts=odradek_zookeeper.connect)
    with kafka, odradek:
        zk.start(timeout=15)
        for broker in (kafka, odradek):
            admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
            admin.create_topics([NewTopic("orders", 2, 1, config={"retention.ms": "3600000"})])["orders"].result(60)
            resource = ConfigResource("topic", "orders", set_config={"retention.ms": "7200000",
                                                                     "cleanup.policy": "compact"})
            admin.alter_configs([resource])[resource].result(60)

        def read(name: str):
            def of(path: str):
                data, _ = zk.get(chroots[name] + path)
                return json.loads(data) if data else None
            return of

        reads = {name: read(name) for name in chroots}
        for name in chroots:  # the partitions' states are written after the topic's znode
            assert wait_until(lambda: all(zk.exists(f"{chroots[name]}/brokers/topics/orders/partitions/{p}/state")
                                          for p in (0, 1)), 30), name
        yield reads, lambda name, path: sorted(zk.get_children(chroots[name] + path))
        zk.stop()
        zk.close()


@pytest.mark.parametrize("path", ["/brokers/topics/orders", "/brokers/topics/orders/partitions/0/state",
                                  "/brokers/topics/orders/partitions/1/state", "/config/topics/orders",
                                  "/brokers/ids/1", "/controller", "/cluster/id", "/controller_epoch", "/feature"])
def test_a_znode_holds_what_kafka_writes_there(layouts, path):
    reads, _ = layouts
    kafka, odradek = reads["kafka"](path), reads["odradek"](path)
    assert shape(odradek) == shape(kafka), f"{path}\n kafka:   {kafka}\n odradek: {odradek}"


def test_a_config_change_is_notified_as_kafka_notifies_it(layouts):
    reads, children = layouts
    for name in ("kafka", "odradek"):
        changes = [change for change in children(name, "/config/changes") if change.startswith("config_change_")]
        assert changes, f"{name} wrote no /config/changes/config_change_*"
    last = {name: reads[name]("/config/changes/" + children(name, "/config/changes")[-1])
            for name in ("kafka", "odradek")}
    assert last["odradek"] == last["kafka"] == {"version": 2, "entity_path": "topics/orders"}, last


def test_the_top_level_znodes_are_kafkas(layouts):
    _, children = layouts
    missing = set(children("kafka", "/")) - set(children("odradek", "/"))
    assert not missing, f"Kafka has, Odradek has not: {sorted(missing)}"
