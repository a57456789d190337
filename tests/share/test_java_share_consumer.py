"""Kafka 4.3.1's Java clients on share groups against a broker process: the KafkaShareConsumer
(tests/java/src/odradek/share/ShareConsumerCheck.java) in explicit acknowledgement mode with ACCEPT, RELEASE and
REJECT and the delivery counts it reads, and the Admin client's share-group calls (ShareAdminCheck.java)."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess
from tests.jvm import java_program


@pytest.fixture(scope="module")
def java_broker(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("java-share") / "data",
                           settings={"group.share.record.lock.duration.ms": 2000})
    broker.start()
    yield broker
    broker.stop()


def make_topic(broker, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)


def test_java_share_consumer_accepts_releases_and_rejects(java_broker, topic_name):
    make_topic(java_broker, topic_name)
    done = java_program("odradek.share.ShareConsumerCheck", java_broker.bootstrap_servers, topic_name,
                        "java-" + topic_name, 50, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = dict(line.split(" ", 1) for line in done.stdout.splitlines())
    assert seen.pop("release-me") == "[1, 2]"
    assert seen.pop("reject-me") == "[1]"
    assert seen == {f"r{i}": "[1]" for i in range(50)}


def test_java_admin_alters_lists_describes_and_deletes_share_groups(java_broker, topic_name):
    make_topic(java_broker, topic_name)
    producer = Producer({"bootstrap.servers": java_broker.bootstrap_servers})
    for i in range(5):
        producer.produce(topic_name, b"%d" % i)
    assert producer.flush(30) == 0
    done = java_program("odradek.share.ShareAdminCheck", java_broker.bootstrap_servers, topic_name,
                        "admin-" + topic_name, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["altered", "offsets start=2 lag=3", "described state=Empty members=0",
                                        "offsets-deleted left=0", "deleted", "after-delete GroupIdNotFoundException"]
