"""An idempotent producer's retries after leadership moved (RF=3, min.insync.replicas=2), with hand-made batches so
the producer id, epoch and sequences are exactly known: the new leader took in the producer's state with the
batches it copied as a follower, so it answers a retry of any of the producer's last five batches with that
batch's offsets (Kafka's DUPLICATE_SEQUENCE-as-success) and never writes it again, refuses a sequence gap with
OUT_OF_ORDER_SEQUENCE_NUMBER and takes the next sequence at its log end, as the old leader would have. And a
replica that stopped leading while an append waited (behind an earlier append or its record checks) refuses it
instead of writing a client's batch into a follower's log. And a broker in controlled shutdown stays out of the
ISR until it stops: a leader taking it back made acks=all appends alternate NOT_ENOUGH_REPLICAS and success, which
librdkafka answers by bumping the producer's epoch (duplicates, docs/chaos.md). And a Produce that reaches the next
leader before it has heard of its own election waits for it rather than being refused."""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.cluster.zookeeper import CONTROLLED_SHUTDOWN
from odradek.cluster.metadata import PartitionAssignment
from odradek.cluster.partition import Partition
from odradek.config import LogConfig
from odradek.embedded import Cluster, wait_until
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.records.batch import Record, encode_batch, validate_batches
from odradek.storage.log import Log

from broker.raw_client import RawClient  # tests/ is the rootdir on sys.path

from .test_replication import read_all, segment_bytes, state

SESSION_TIMEOUT_S = Cluster.TEST_FRIENDLY_SETTINGS["zookeeper.session.timeout.ms"] / 1000
Produce = api("Produce").request
BATCH_RECORDS = 3


def produce(broker, topic: str, producer_id: int, epoch: int, sequence: int) -> tuple[int, int]:
    """One batch of BATCH_RECORDS records from `sequence`, acks=all, straight to `broker`: (error code, offset)."""
    records = encode_batch([Record(i, 1_700_000_000_000, None, b"s%d" % (sequence + i)) for i in range(BATCH_RECORDS)],
                           producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence)
    client = RawClient(broker.port)
    try:
        answer = client.call("Produce", 9, transactional_id=None, acks=-1, timeout_ms=10000, topic_data=[
            Produce.TopicProduceData(name=topic, partition_data=[Produce.PartitionProduceData(index=0,
                                                                                              records=records)])])
    finally:
        client.close()
    partition = answer.responses[0].partition_responses[0]
    return partition.error_code, partition.base_offset


def test_a_new_leader_answers_retries_of_batches_it_replicated_and_refuses_gaps(cluster, zk):
    topic = f"idem-failover-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=15)
    old_leader = cluster.broker(state(zk, topic)["leader"])
    client = RawClient(old_leader.port)
    init = client.call("InitProducerId", 4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                       producer_epoch=-1)
    client.close()
    assert init.error_code == ErrorCode.NONE
    pid, epoch = init.producer_id, init.producer_epoch
    batches = 7
    offsets = [produce(old_leader, topic, pid, epoch, n * BATCH_RECORDS) for n in range(batches)]
    assert offsets == [(ErrorCode.NONE, n * BATCH_RECORDS) for n in range(batches)]
    followers = [broker for broker in cluster.brokers if broker is not old_leader]
    assert wait_until(lambda: all(segment_bytes(f, topic) == segment_bytes(old_leader, topic) for f in followers),
                      timeout=10)

    old_leader.stop()  # SIGTERM: a controlled shutdown moves the leadership to an in-sync follower first
    try:
        new_leader = cluster.broker(state(zk, topic)["leader"])
        assert new_leader is not old_leader
        assert wait_until(lambda: produce(new_leader, topic, pid, epoch, 2 * BATCH_RECORDS)[0]
                          != ErrorCode.NOT_LEADER_OR_FOLLOWER, timeout=15)
        for n in range(batches - 5, batches):  # the five a client may still have in flight
            assert produce(new_leader, topic, pid, epoch, n * BATCH_RECORDS) == (ErrorCode.NONE, n * BATCH_RECORDS)
        end = batches * BATCH_RECORDS
        gap = produce(new_leader, topic, pid, epoch, end + 1)
        assert gap[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        assert produce(new_leader, topic, pid, epoch, end) == (ErrorCode.NONE, end)
        assert produce(new_leader, topic, pid, epoch, end) == (ErrorCode.NONE, end)
    finally:
        old_leader.start(timeout=SESSION_TIMEOUT_S + 30)
    values = read_all(cluster.bootstrap_servers, topic)
    assert values == [b"s%d" % n for n in range((batches + 1) * BATCH_RECORDS)]


def test_a_replica_that_stopped_leading_refuses_appends(tmp_path):
    log = Log.open(tmp_path / "t-0", LogConfig(), clean_shutdown=True)
    partition = Partition("t", 0, uuid.uuid4(), log, PartitionAssignment(1, 0, [1, 2], [1, 2]), 1)
    try:
        data = encode_batch([Record(0, 1_700_000_000_000, None, b"v")], producer_id=7, producer_epoch=0,
                            base_sequence=0)
        assert partition.append(data, validate_batches(data)).first_offset == 0
        partition.update_assignment(PartitionAssignment(2, 1, [1, 2], [2]), int(time.time() * 1000))
        for append in (lambda: partition.append(data, validate_batches(data)),
                       lambda: partition.write_transaction_marker(7, 0, False, 0)):
            try:
                append()
                raise AssertionError("a follower appended as leader")
            except KafkaError as exc:
                assert exc.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        assert log.log_end_offset == 1
    finally:
        log.close()


def test_the_isr_never_takes_back_a_broker_in_controlled_shutdown(cluster, zk):
    """A broker stopping cleanly leaves every ISR (the controller takes it out) while it still fetches, caught up;
    its leaders must not put it back (Kafka's controller refuses an ISR naming a shutting-down broker,
    INELIGIBLE_REPLICA, KIP-841). A leader that did made the ISR flap between the two writers: with
    min.insync.replicas=2 and the third replica behind, appends alternated NOT_ENOUGH_REPLICAS and success, so a
    pipelined idempotent request after a refused one got OUT_OF_ORDER_SEQUENCE_NUMBER and librdkafka bumped the
    producer's epoch ("skipped sequence numbers"), renumbering batches the old leader had written: duplicates."""
    topic = f"isr-shutdown-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)
    assert wait_until(lambda: sorted(state(zk, topic)["isr"]) == [1, 2, 3], timeout=15)
    leader = state(zk, topic)["leader"]
    stopping = next(broker.node_id for broker in cluster.brokers if broker.node_id != leader)
    path = f"{CONTROLLED_SHUTDOWN}/{stopping}"
    zk.create(path, b"", ephemeral=True, makepath=True)  # as the broker's own request_controlled_shutdown does
    try:
        assert wait_until(lambda: stopping not in state(zk, topic)["isr"], timeout=15)
        isrs = set()
        deadline = time.monotonic() + 3  # replica.lag.time.max.ms is far longer: it stays caught up throughout
        while time.monotonic() < deadline:
            isrs.add(tuple(sorted(state(zk, topic)["isr"])))
            time.sleep(0.05)
        assert all(stopping not in isr for isr in isrs), isrs
    finally:
        zk.delete(path)
    assert wait_until(lambda: stopping in state(zk, topic)["isr"], timeout=15)  # a broker that stayed is taken back


def test_a_produce_that_reaches_the_next_leader_before_its_election_waits_for_it(cluster, zk):
    """In a rolling restart a client can hear of a new leader (from a broker whose view of ZooKeeper moved first)
    before that leader has: refused NOT_LEADER_OR_FOLLOWER there, and the next pipelined request taken once the
    election is in force refused OUT_OF_ORDER_SEQUENCE_NUMBER, librdkafka bumped the producer's epoch and wrote records
    the old leader had already written again (the rolling-restart test's duplicates). Here the controller is paused
    while the leader asks for a controlled shutdown, so the next leader knows an election is coming and has none:
    a Produce sent to it then is answered once it leads, with the offset it appended at."""
    controller = json.loads(zk.get("/controller")[0])["brokerid"]
    leader, successor = [broker.node_id for broker in cluster.brokers if broker.node_id != controller]
    topic = f"coming-leader-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, replica_assignment=[[leader, successor, controller]],
                                  config={"min.insync.replicas": "2"})])[topic].result(30)
    assert wait_until(lambda: state(zk, topic)["leader"] == leader and len(state(zk, topic)["isr"]) == 3, timeout=15)
    client = RawClient(cluster.broker(leader).port)
    init = client.call("InitProducerId", 4, transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                       producer_epoch=-1)
    client.close()
    pid, epoch = init.producer_id, init.producer_epoch
    assert produce(cluster.broker(leader), topic, pid, epoch, 0) == (ErrorCode.NONE, 0)  # acks=all: all 3 have it

    controller_pid = cluster.broker(controller).process.pid
    path = f"{CONTROLLED_SHUTDOWN}/{leader}"
    answers = []
    os.kill(controller_pid, signal.SIGSTOP)  # for less than its 6 s session
    try:
        zk.create(path, b"", ephemeral=True, makepath=True)  # as the leader's own request_controlled_shutdown does
        give_up = time.monotonic() + 3
        while True:  # until the successor's watch on it has fired (nothing it answers shows that otherwise)
            sender = threading.Thread(target=lambda: answers.append(
                produce(cluster.broker(successor), topic, pid, epoch, BATCH_RECORDS)))
            sender.start()
            sender.join(1)
            if sender.is_alive():
                break
            assert answers.pop() == (ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)  # not held: nothing written
            assert time.monotonic() < give_up, "the next leader refused at once throughout"
            time.sleep(0.2)
    finally:
        os.kill(controller_pid, signal.SIGCONT)
    try:
        sender.join(15)
        elected = state(zk, topic)["leader"]  # the first in-sync replica staying: the successor, unless the ISR
        assert elected != leader             # was reordered meanwhile
        assert answers == ([(ErrorCode.NONE, BATCH_RECORDS)] if elected == successor
                           else [(ErrorCode.NOT_LEADER_OR_FOLLOWER, -1)])
    finally:
        zk.delete(path)
    assert wait_until(lambda: len(state(zk, topic)["isr"]) == 3, timeout=15)
