"""A request that writes to ZooKeeper does not hold the broker's event loop: while ZooKeeper is paused (SIGSTOP of
its process) under an admin request, other connections are still answered at once, and the admin request is
answered correctly once ZooKeeper goes on. The cluster has a ZooKeeper of its own, since it is the one paused."""

from __future__ import annotations

import os
import signal
import threading
import time

import pytest

from odradek.embedded import Cluster, zookeeper_available
from odradek.protocol import api
from tests.broker.raw_client import RawClient

pytestmark = pytest.mark.skipif(not zookeeper_available(), reason="needs a ZooKeeper server (Debian's zookeeper)")

CreatableTopic = api("CreateTopics").request.CreatableTopic
CreatableTopicConfig = api("CreateTopics").request.CreatableTopicConfig
AlterableConfig = api("IncrementalAlterConfigs").request.AlterableConfig
AlterConfigsResource = api("IncrementalAlterConfigs").request.AlterConfigsResource
MetadataTopic = api("Metadata").request.MetadataRequestTopic
PAUSE_S = 2.5
PROMPT_S = 1.0  # a Metadata answer normally takes milliseconds; the pause is 2.5 s


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with Cluster(1, data_dir=tmp_path_factory.mktemp("slow-zookeeper")) as cluster:
        yield cluster


def metadata_seconds(client: RawClient, name: str) -> float:
    started = time.perf_counter()
    answer = client.call("Metadata", 12, topics=[MetadataTopic(name=name)], allow_auto_topic_creation=False,
                         include_topic_authorized_operations=False)
    assert answer.topics[0].error_code == 0
    return time.perf_counter() - started


def while_zookeeper_paused(cluster: Cluster, admin_call) -> tuple[float, object]:
    """Pause ZooKeeper, send `admin_call` on one connection, time a Metadata request on another; resume. Returns
    (the Metadata request's seconds, the admin call's answer, None if it failed)."""
    port = cluster.brokers[0].port
    admin, other = RawClient(port), RawClient(port)
    for client in (admin, other):
        client.sock.settimeout(30)
    answers = []
    try:
        metadata_seconds(other, "steady")  # connected and answered before the pause
        zookeeper = cluster.zookeeper_server.process.pid
        os.kill(zookeeper, signal.SIGSTOP)
        try:
            caller = threading.Thread(target=lambda: answers.append(admin_call(admin)))
            caller.start()
            time.sleep(0.3)  # the admin request is at the broker, waiting on ZooKeeper
            seconds = metadata_seconds(other, "steady")
            time.sleep(max(PAUSE_S - 0.3 - seconds, 0))
        finally:
            os.kill(zookeeper, signal.SIGCONT)
        caller.join(30)
        return seconds, answers[0] if answers else None
    finally:
        admin.close()
        other.close()


@pytest.fixture(scope="module", autouse=True)
def steady_topic(cluster):
    client = RawClient(cluster.brokers[0].port)
    answer = client.call("CreateTopics", 5, timeout_ms=30_000, validate_only=False, topics=[
        CreatableTopic(name="steady", num_partitions=1, replication_factor=1, assignments=[], configs=[])])
    assert answer.topics[0].error_code == 0
    client.close()


def test_create_topics_waiting_on_zookeeper_leaves_other_connections_answered(cluster):
    seconds, answer = while_zookeeper_paused(cluster, lambda client: client.call(
        "CreateTopics", 5, timeout_ms=30_000, validate_only=False, topics=[
            CreatableTopic(name="made-while-paused", num_partitions=2, replication_factor=1, assignments=[],
                           configs=[CreatableTopicConfig(name="retention.ms", value="3600000")])]))
    assert seconds < PROMPT_S
    assert answer.topics[0].error_code == 0 and answer.topics[0].num_partitions == 2


def test_alter_configs_waiting_on_zookeeper_leaves_other_connections_answered(cluster):
    seconds, answer = while_zookeeper_paused(cluster, lambda client: client.call(
        "IncrementalAlterConfigs", 1, validate_only=False, resources=[AlterConfigsResource(
            resource_type=2, resource_name="steady", configs=[
                AlterableConfig(name="retention.ms", config_operation=0, value="7200000")])]))
    assert seconds < PROMPT_S
    assert answer.responses[0].error_code == 0


def test_metadata_auto_creating_a_topic_on_a_paused_zookeeper_leaves_other_connections_answered(cluster):
    seconds, answer = while_zookeeper_paused(cluster, lambda client: client.call(
        "Metadata", 12, topics=[MetadataTopic(name="auto-made-while-paused")], allow_auto_topic_creation=True,
        include_topic_authorized_operations=False))
    assert seconds < PROMPT_S
    assert answer.topics[0].name == "auto-made-while-paused"
    assert answer.topics[0].error_code in (0, 5)  # LEADER_NOT_AVAILABLE until the controller has elected, as Kafka
