"""Kafka 4.3.1's KafkaShareConsumer (tests/java/src/odradek/share/ShareConsumerCheck.java) against a broker process:
explicit acknowledgement with ACCEPT, RELEASE and REJECT and the delivery counts it reads."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess
from tests.jvm import java_program


def test_java_share_consumer_accepts_releases_and_rejects(tmp_path, topic_name):
    broker = BrokerProcess(tmp_path / "data", settings={"group.share.record.lock.duration.ms": 2000})
    broker.start()
    try:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(30)
        done = java_program("odradek.share.ShareConsumerCheck", broker.bootstrap_servers, topic_name,
                            "java-" + topic_name, 50, timeout=120)
        assert done.returncode == 0, done.stderr[-3000:]
        seen = dict(line.split(" ", 1) for line in done.stdout.splitlines())
        assert seen.pop("release-me") == "[1, 2]"
        assert seen.pop("reject-me") == "[1]"
        assert seen == {f"r{i}": "[1]" for i in range(50)}
    finally:
        broker.stop()
