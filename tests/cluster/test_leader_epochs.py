"""Truncation by leader epoch (KIP-101/279) on a three-broker cluster: acknowledged records survive a sequence of
failures in which cutting a follower's log to its high watermark loses them, and each partition directory keeps its
`leader-epoch-checkpoint`; each log directory's `replication-offset-checkpoint` holds the high watermarks."""

from __future__ import annotations

import json
import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import Cluster, wait_until
from odradek.protocol import api
from odradek.storage.leader_epochs import LEADER_EPOCH_CHECKPOINT

from tests.broker.raw_client import RawClient

from .test_replication import produce, read_all, segment_bytes, state

from .conftest import new_cluster

SESSION_TIMEOUT_S = Cluster.TEST_FRIENDLY_SETTINGS["zookeeper.session.timeout.ms"] / 1000


@pytest.fixture(scope="module")
def cluster(odradek_zookeeper, tmp_path_factory):
    with new_cluster(odradek_zookeeper, tmp_path_factory, "epochs",
                     settings={"replica.lag.time.max.ms": 5000, "replica.high.watermark.checkpoint.interval.ms": 200,
                               # the brokers' default for every topic here (the first test needs an unclean election)
                               "unclean.leader.election.enable": "true"}) as c:
        yield c


def create_on(cluster, topic: str, replicas: list[int], **configs) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[replicas], config=configs)])[topic].result(30)


def non_controllers(cluster, zk) -> list:
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    return [broker for broker in cluster.brokers if broker.node_id != controller]


def checkpoint_text(broker, topic: str) -> str:
    return (broker.data_dir / f"{topic}-0" / LEADER_EPOCH_CHECKPOINT).read_text()


def test_acknowledged_records_survive_restarts_as_followers_that_then_lead(cluster, zk):
    """A leads with B in the ISR and both have every acknowledged record. B dies (the ISR shrinks to A), then A (the
    partition goes offline). B restarts: with no leader it is a follower at first, then leads (an unclean election,
    though its log is complete); A comes back as B's follower. Cutting a follower's log to its high watermark (after
    an unclean stop its recovery point, far behind its log end) empties B before it leads and then A, so every
    acknowledged record is gone; by leader epoch, B keeps its log (there is no leader to truncate against) and A
    keeps what B has (B's answer for A's epoch 0 is B's log end)."""
    first, second = non_controllers(cluster, zk)
    topic = f"kip101-{uuid.uuid4().hex[:6]}"
    create_on(cluster, topic, [first.node_id, second.node_id])  # unclean election on: the brokers' setting
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == sorted([first.node_id, second.node_id]),
                      timeout=15)
    assert state(zk, topic)["leader"] == first.node_id
    acknowledged = [f"acked-{n}".encode() for n in range(100)]
    assert produce(cluster.bootstrap_servers, topic, acknowledged, acks="all") == [None] * 100
    assert wait_until(lambda: segment_bytes(second, topic) == segment_bytes(first, topic), timeout=10)

    second.kill()
    assert wait_until(lambda: state(zk, topic)["isr"] == [first.node_id], timeout=SESSION_TIMEOUT_S + 15)
    first.kill()
    assert wait_until(lambda: state(zk, topic)["leader"] == -1, timeout=SESSION_TIMEOUT_S + 15)
    second.start(timeout=SESSION_TIMEOUT_S + 30)
    assert wait_until(lambda: state(zk, topic)["leader"] == second.node_id, timeout=15)
    first.start(timeout=SESSION_TIMEOUT_S + 30)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == sorted([first.node_id, second.node_id]),
                      timeout=30)

    assert read_all(cluster.bootstrap_servers, topic) == acknowledged
    assert wait_until(lambda: segment_bytes(first, topic) == segment_bytes(second, topic), timeout=10)
    epoch = state(zk, topic)["leader_epoch"]
    # epoch 0 from offset 0, then the epoch B took over in, from its log end, where nothing came yet
    assert checkpoint_text(second, topic).splitlines() == ["0", "2", "0 0", f"{epoch} 100"]
    assert checkpoint_text(first, topic).splitlines() == ["0", "1", "0 0"]


def high_watermarks(broker) -> dict:
    """replication-offset-checkpoint as (topic, partition) -> offset."""
    from odradek.storage.checkpoint import read_checkpoint

    return read_checkpoint(broker.data_dir / "replication-offset-checkpoint")


def test_high_watermarks_are_checkpointed_periodically_and_at_a_clean_stop(cluster, zk):
    first, second = non_controllers(cluster, zk)
    topic = f"hw-{uuid.uuid4().hex[:6]}"
    create_on(cluster, topic, [first.node_id, second.node_id])
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == sorted([first.node_id, second.node_id]),
                      timeout=15)
    assert produce(cluster.bootstrap_servers, topic, [b"x"] * 30, acks="all") == [None] * 30
    # every 200 ms (replica.high.watermark.checkpoint.interval.ms) on the leader and on the follower
    assert wait_until(lambda: all(high_watermarks(b).get((topic, 0)) == 30 for b in (first, second)), timeout=5)
    assert produce(cluster.bootstrap_servers, topic, [b"y"] * 5, acks="all") == [None] * 5
    assert wait_until(lambda: all(high_watermarks(b).get((topic, 0)) == 35 for b in (first, second)), timeout=5)
    (second.data_dir / "replication-offset-checkpoint").unlink()
    second.stop()
    assert high_watermarks(second)[(topic, 0)] == 35  # written again at the clean stop at the latest
    second.start(timeout=SESSION_TIMEOUT_S + 30)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == sorted([first.node_id, second.node_id]),
                      timeout=30)


def test_sigterm_of_the_leader_under_an_idempotent_producer(cluster, zk):
    """Controlled shutdown: the leader SIGTERMed while an idempotent acks=all producer writes; leadership moves to
    another ISR member before it stops, the producer sees no error (only retriable ones, retried), every record is
    written once, in order, and the longest pause between acknowledgements stays within a few seconds (a pause near
    librdkafka's 30 s message timeout, or a stall until the broker's exit, is what this catches; a loaded machine
    alone takes the pause from ~0.3 s to 1-2 s, so the bound is 3 s, as in test_resume_after_shutdown.py)."""
    topic = f"cs-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=15)
    leader = cluster.broker(state(zk, topic)["leader"])
    epoch = state(zk, topic)["leader_epoch"]
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0, "acks": "all",
                         "enable.idempotence": True, "linger.ms": 2, "message.timeout.ms": 30000})
    acknowledged, errors = [], []

    def delivered(err, msg):
        if err is None:
            acknowledged.append((time.monotonic(), msg.value()))
        else:
            errors.append(err)

    sent, stopped_at = 0, None
    stopping = threading.Thread(target=leader.stop, daemon=True)  # SIGTERM, then wait for the exit
    started = time.monotonic()
    while time.monotonic() - started < 4.0:
        producer.produce(topic, value=b"%06d" % sent, partition=0, on_delivery=delivered)
        sent += 1
        producer.poll(0.005)
        if stopped_at is None and time.monotonic() - started > 1.0:
            stopped_at = time.monotonic()
            stopping.start()
    assert producer.flush(30) == 0
    assert errors == []
    assert [value for _, value in acknowledged] == [b"%06d" % n for n in range(sent)]
    times = [at for at, _ in acknowledged]
    pause_s = max(later - earlier for earlier, later in zip(times, times[1:]) if later >= stopped_at)
    print(f"leader SIGTERMed: longest pause between acknowledgements {pause_s * 1000:.0f} ms; {sent} records")
    assert pause_s < 3.0
    new_state = state(zk, topic)
    assert new_state["leader"] != leader.node_id and new_state["leader_epoch"] > epoch
    stopping.join(30)
    leader.start(timeout=SESSION_TIMEOUT_S + 30)
    assert read_all(cluster.bootstrap_servers, topic) == [b"%06d" % n for n in range(sent)]


def test_a_request_in_flight_when_the_broker_is_sigtermed_is_answered(cluster, zk):
    """A stopping broker answers what its clients asked before it closes their connections: a consumer's fetch long
    poll on a partition only it holds, sent just before SIGTERM, gets its (empty) answer instead of a dropped
    connection (librdkafka would log it and retry elsewhere), and at once rather than after its max wait (30 s here,
    far past the broker's drain bound): a stopping broker answers its parked fetches with what it has, as leadership
    leaving a partition completes Kafka's delayed fetches."""
    only_here = f"drain-{uuid.uuid4().hex[:6]}"
    broker = non_controllers(cluster, zk)[0]
    create_on(cluster, only_here, [broker.node_id])
    client = RawClient(broker.port)
    client.sock.settimeout(60)
    fetch = api("Fetch").request
    long_poll = dict(max_wait_ms=30_000, min_bytes=1, max_bytes=1 << 20, forgotten_topics_data=[], rack_id="",
                     topics=[fetch.FetchTopic(topic=only_here, partitions=[
                         fetch.FetchPartition(partition=0, fetch_offset=0, partition_max_bytes=1 << 20)])])
    assert wait_until(lambda: client.call("Fetch", 12, **{**long_poll, "max_wait_ms": 0}).responses[0]
                      .partitions[0].error_code == 0, timeout=15)  # the broker has taken the new partition up
    stopping = threading.Thread(target=broker.stop, daemon=True)
    try:
        answers = []
        asking = threading.Thread(target=lambda: answers.append((client.call("Fetch", 12, **long_poll),
                                                                 time.monotonic())))
        asking.start()
        time.sleep(0.2)  # the long poll is in flight
        signalled_at = time.monotonic()
        stopping.start()
        asking.join(60)
        assert answers, "the fetch in flight got no answer: the stopping broker dropped the connection"
        answer, answered_at = answers[0]
        assert answer.responses[0].partitions[0].error_code == 0
        print(f"the long poll was answered {(answered_at - signalled_at) * 1000:.0f} ms after SIGTERM")
        assert answered_at - signalled_at < 15, "the long poll was waited out"
    finally:
        client.close()
        stopping.join(30)
        broker.start(timeout=SESSION_TIMEOUT_S + 30)
