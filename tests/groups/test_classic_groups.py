"""Classic consumer groups against a real broker process: three members split six partitions, a SIGKILLed member's
partitions move within its session timeout, a clean leave rebalances at once; with each client and mixed."""

from __future__ import annotations

import pytest
from kafka.admin import KafkaAdminClient, NewTopic

PARTITIONS = 6
SESSION_MS = 6000


@pytest.fixture
def topic(broker, topic_name):
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap_servers)
    admin.create_topics([NewTopic(topic_name, PARTITIONS, 1)])
    admin.close()
    return topic_name


@pytest.mark.parametrize("clients", [("confluent",) * 3, ("kafka-python",) * 3, ("aiokafka",) * 3,
                                     ("confluent", "kafka-python", "aiokafka")],
                         ids=["confluent", "kafka-python", "aiokafka", "mixed"])
def test_three_members_split_partitions_and_rebalance_on_leave(broker, topic, members, clients):
    group = f"{topic}-group"
    started = [members.start(c, broker.bootstrap_servers, group, topic, SESSION_MS) for c in clients]
    took = members.wait_for_split(PARTITIONS, timeout=30)
    print(f"\n{'/'.join(clients)}: three members joined and split {PARTITIONS} partitions in {took:.2f}s")
    started[0].stop()
    took = members.wait_for_split(PARTITIONS, timeout=SESSION_MS / 1000 - 1)  # well before any session timeout
    print(f"clean leave rebalanced in {took:.2f}s")


@pytest.mark.parametrize("clients", [("confluent",) * 3, ("kafka-python", "aiokafka", "confluent")],
                         ids=["confluent", "mixed"])
def test_killed_member_loses_partitions_within_session_timeout(broker, topic, members, clients):
    group = f"{topic}-group"
    started = [members.start(c, broker.bootstrap_servers, group, topic, SESSION_MS) for c in clients]
    members.wait_for_split(PARTITIONS, timeout=30)
    started[1].kill()
    took = members.wait_for_split(PARTITIONS, timeout=SESSION_MS / 1000 + 4)
    print(f"\nSIGKILLed member's partitions moved in {took:.2f}s (session timeout {SESSION_MS} ms)")
