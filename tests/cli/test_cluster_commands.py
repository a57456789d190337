"""The commands against a three-broker cluster on ZooKeeper as a user runs them: `topics describe` while a broker
is down answers from Metadata at once, showing the partitions it leaves offline or under-replicated, and filters
them as kafka-topics' --under-replicated-partitions and --unavailable-partitions do. The brokers, which join by
zookeeper.connect, do not call it a setting they do not use."""

from __future__ import annotations

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
