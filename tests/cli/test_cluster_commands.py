"""The commands against a three-broker cluster on ZooKeeper as a user runs them: `reassign --generate` as
kafka-reassign-partitions prints it, and `topics describe` while a broker
is down answers from Metadata at once, showing the partitions it leaves offline or under-replicated, and filters
them as kafka-topics' --under-replicated-partitions and --unavailable-partitions do. The brokers, which join by
zookeeper.connect, do not call it a setting they do not use."""

from __future__ import annotations

import json
import time

import pytest

from odradek.client import Admin, Producer
from odradek.embedded import wait_until
from tests.cluster.conftest import new_cluster

from .run import odradek


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "cli-cluster") as started:
        yield started


def test_reassign_generate_proposes_a_spread_beside_the_current_assignment(cluster, topic_name, tmp_path):
    Admin(cluster.bootstrap_servers).create_topic(topic_name, 4, 2)
    current = {(topic_name, p.partition): p.replicas
               for p in Admin(cluster.bootstrap_servers).topic_layouts()[topic_name]}
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic_name}]}))
    generated = odradek(cluster.brokers[0], "reassign", "--generate", str(topics), "--broker-list", "2,3")
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[2:4] == [
        "", "Proposed partition reassignment configuration"] and len(lines) == 5
    shown = json.loads(lines[1])["partitions"]
    assert {(p["topic"], p["partition"]): p["replicas"] for p in shown} == current
    assert all(p["log_dirs"] == ["any", "any"] for p in shown)
    proposed = json.loads(lines[4])
    assert proposed["version"] == 1 and [p["partition"] for p in proposed["partitions"]] == [0, 1, 2, 3]
    assert all(sorted(p["replicas"]) == [2, 3] for p in proposed["partitions"])
    assert sorted(p["replicas"][0] for p in proposed["partitions"]) == [2, 2, 3, 3]  # leaders spread


def test_topics_describe_with_a_broker_down_answers_at_once(cluster, topic_name):
    admin = Admin(cluster.bootstrap_servers)
    solo, triple = f"{topic_name}-rf1", f"{topic_name}-rf3"
    admin.create_topic(solo, 3, 1)
    admin.create_topic(triple, 2, 3)
    with Producer(cluster.bootstrap_servers) as producer:
        for i in range(4):
            producer.send_sync(triple, f"v{i}", partition=i % 2)
    [layout] = [partitions for name, partitions in admin.topic_layouts().items() if name == solo]
    down = next(p.leader for p in layout if p.leader != 1)
    cluster.broker(down).stop()
    live = next(broker for broker in cluster.brokers if broker.node_id != down)
    wait_until(lambda: all(down not in p.isr for p in Admin(live.bootstrap_servers).topic_layouts()[triple]),
               timeout=60)

    started = time.monotonic()
    described = odradek(live, "topics", "describe", solo, triple, "--timeout", "60")
    assert time.monotonic() - started < 30  # nothing waited on the dead broker (the timeout is 60 s)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    offline = [line for line in lines if f"Replicas: {down}\t" in line and solo in line]
    assert len(offline) == 1 and "\tLeader: none\t" in offline[0] and offline[0].endswith("\tOffsets: -")
    shrunk = [line for line in lines if f"Topic: {triple}\tPartition:" in line]
    assert len(shrunk) == 2 and all("Isr: " in line and str(down) not in line.split("Isr: ")[1].split("\t")[0]
                                    for line in shrunk)
    assert all(line.endswith("\tOffsets: 0..2") for line in shrunk)

    under = odradek(live, "topics", "describe", "--under-replicated-partitions", "--timeout", "60")
    assert under.returncode == 0, under.stderr
    assert sorted(line.split("\t")[2] for line in under.stdout.splitlines() if triple in line) == [
        "Partition: 0", "Partition: 1"]
    assert not any(line.startswith("Topic:") for line in under.stdout.splitlines())  # partitions only
    unavailable = odradek(live, "topics", "describe", solo, triple, "--unavailable-partitions", "--timeout", "60")
    assert unavailable.stdout.splitlines() == offline, unavailable.stdout
    for broker in cluster.brokers:
        assert "'zookeeper.connect' is a Kafka setting this broker does not use" not in broker.log_path.read_text()
