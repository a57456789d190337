"""The registry on a three-broker cluster (ZooKeeper mode): `_schemas` created with replication factor 3, two
registries bootstrapped through different brokers both serving reads, and the writes going on, with no id given
twice, when the broker leading `_schemas` stops and another takes its partition over."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest

from odradek.client import Admin
from odradek.embedded import Cluster
from odradek.registry import SchemaRegistry, SchemaRegistrySettings


def avro(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "string"}]})


def register(url: str, subject: str) -> int:
    answer = httpx.post(f"{url}/subjects/{subject}/versions", json={"schema": avro(subject)}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()["id"]


def eventually(read, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while (value := read()) is None:
        assert time.monotonic() < deadline, "not seen in time"
        time.sleep(0.05)
    return value


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with Cluster(3, zookeeper=f"{odradek_zookeeper.connect}/registry-{uuid.uuid4().hex[:8]}",
                 settings={"transaction.state.log.num.partitions": 3, "offsets.topic.num.partitions": 3,
                           "group.initial.rebalance.delay.ms": 0},
                 data_dir=tmp_path_factory.mktemp("registry-cluster")) as running:
        yield running


def test_writes_go_on_across_a_leader_failover_and_every_registry_reads(cluster):
    registries = [SchemaRegistry(SchemaRegistrySettings(cluster.broker(node).bootstrap_servers, port=0))
                  for node in (2, 3)]
    one, two = (registry.start_thread() for registry in registries)
    try:
        given = {"a": register(one, "a"), "b": register(two, "b")}
        seen = eventually(lambda: (answer := httpx.get(f"{two}/subjects/a/versions/1")).status_code == 200
                          and answer.json()["id"] or None)
        assert seen == given["a"]  # written through one registry, read through the other

        admin = Admin(cluster.broker(2).bootstrap_servers)
        partition = admin.describe_topics(["_schemas"])[0].partitions[0]
        assert len(partition.replicas) == 3
        cluster.broker(partition.leader).stop()  # controlled shutdown: the partition moves to another broker
        admin = Admin(cluster.bootstrap_servers)
        moved = eventually(lambda: (p := admin.describe_topics(["_schemas"])[0].partitions[0]).leader
                           not in (partition.leader, -1) and p.leader or None)
        assert moved != partition.leader

        given |= {"c": register(two, "c"), "d": register(one, "d"), "e": register(two, "e")}
        assert len(set(given.values())) == 5 and max(given.values()) == 5
        for subject, schema_id in given.items():
            assert eventually(lambda: (answer := httpx.get(f"{one}/subjects/{subject}/versions/1")).status_code
                              == 200 and answer.json()["id"] or None) == schema_id
    finally:
        for registry in registries:
            registry.stop()
