"""Classic consumer groups against a real broker process: three members split six partitions, a SIGKILLed member's
partitions move within its session timeout, a clean leave rebalances at once; with each client and mixed."""

from __future__ import annotations

import time

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


def test_a_restarted_static_leader_rejoins_without_a_rebalance(broker, topic, members):
    """KIP-345/KIP-814: the group's leader is a static member (group.instance.id); its process restarts (a static
    member's close sends no LeaveGroup), it rejoins with the same protocols under a new member id, and the group
    stays Stable: the other member sees no revoke and no assign, and the leader gets its partitions back."""
    group = f"{topic}-group"
    leader = members.start("confluent", broker.bootstrap_servers, group, topic, SESSION_MS, instance_id="leader")
    members.wait_for_split(PARTITIONS, timeout=30)  # alone, so it leads
    other = members.start("confluent", broker.bootstrap_servers, group, topic, SESSION_MS, instance_id="other")
    members.wait_for_split(PARTITIONS, timeout=30)
    leader_partitions, other_callbacks = list(leader.assigned), list(other.callbacks)
    leader.stop()
    restarted = members.start("confluent", broker.bootstrap_servers, group, topic, SESSION_MS, instance_id="leader")
    deadline = time.monotonic() + SESSION_MS / 1000 - 1  # well inside the session timeout
    while restarted.assigned != leader_partitions and time.monotonic() < deadline:
        time.sleep(0.05)
    assert restarted.assigned == leader_partitions
    time.sleep(1.0)  # a rebalance would reach the other member within its heartbeat interval (500 ms)
    assert other.callbacks == other_callbacks  # no revoke, no assign
