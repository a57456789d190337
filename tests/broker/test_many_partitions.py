"""A broker with many partitions holds open files only for the partitions in use: segment files are opened at their
first append or read, so 600 idle partitions cost no descriptors (with one each, 50,000 partitions exceed the
usual RLIMIT_NOFILE), after creation, after a clean restart and after a kill -9 alike; and one Fetch of all of
them is answered whole."""

from __future__ import annotations

import os

import pytest

from odradek.embedded import BrokerProcess
from odradek.protocol import api
from odradek.records.batch import Record, encode_batch

from .raw_client import RawClient

TOPICS, PARTITIONS_PER_TOPIC = 6, 100
WRITTEN = [("many-0", index) for index in range(PARTITIONS_PER_TOPIC)]
BASELINE_FDS = 50  # what an idle broker holds (15 here: sockets, its log, the directory lock); partitions none
CreateTopics = api("CreateTopics").request
Fetch = api("Fetch").request
Produce = api("Produce").request


def open_fds(broker: BrokerProcess) -> int:
    return len(os.listdir(f"/proc/{broker.process.pid}/fd"))


def fetch_values(client: RawClient, partitions) -> dict[tuple[str, int], int]:
    """Bytes of records each partition returns from offset 0."""
    answer = client.call("Fetch", 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=16 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1, topics=[
                             Fetch.FetchTopic(topic=topic, partitions=[
                                 Fetch.FetchPartition(partition=index, fetch_offset=0, partition_max_bytes=1 << 16)])
                             for topic, index in partitions],
                         forgotten_topics_data=[], rack_id="")
    return {(topic.topic, partition.partition_index): len(partition.records or b"")
            for topic in answer.responses for partition in topic.partitions}


@pytest.fixture(scope="module")
def many(tmp_path_factory):
    broker = BrokerProcess(tmp_path_factory.mktemp("many") / "data").start()
    client = RawClient(broker.port)
    client.sock.settimeout(120)
    answer = client.call("CreateTopics", 5, timeout_ms=120_000, validate_only=False, topics=[
        CreateTopics.CreatableTopic(name=f"many-{index}", num_partitions=PARTITIONS_PER_TOPIC, replication_factor=1)
        for index in range(TOPICS)])
    assert [topic.error_code for topic in answer.topics] == [0] * TOPICS
    client.close()
    yield broker
    broker.stop()


def test_idle_partitions_hold_no_files_after_creation_and_restarts(many):
    assert open_fds(many) < BASELINE_FDS  # one descriptor per partition before: over 600
    many.stop()
    many.start()
    assert open_fds(many) < BASELINE_FDS
    many.kill()
    many.start()  # recovery of the 600 logs, all empty
    assert open_fds(many) < BASELINE_FDS


def test_written_partitions_open_their_files_and_keep_their_data_across_restarts(many):
    client = RawClient(many.port)
    batch = encode_batch([Record(0, 1_700_000_000_000, None, b"v" * 100)])
    answer = client.call("Produce", 9, transactional_id=None, acks=-1, timeout_ms=5000, topic_data=[
        Produce.TopicProduceData(name=topic, partition_data=[Produce.PartitionProduceData(index=index, records=batch)])
        for topic, index in WRITTEN])
    assert all(p.error_code == 0 for topic in answer.responses for p in topic.partition_responses)
    assert set(fetch_values(client, WRITTEN).values()) == {len(batch)}
    assert open_fds(many) < BASELINE_FDS + len(WRITTEN)
    client.close()
    many.stop()
    many.start()  # loading reads the tail of each written segment, then lets the file go
    assert open_fds(many) < BASELINE_FDS
    client = RawClient(many.port)
    unwritten = [("many-4", index) for index in range(5)]
    assert fetch_values(client, WRITTEN + unwritten) == {**dict.fromkeys(WRITTEN, len(batch)),
                                                       **dict.fromkeys(unwritten, 0)}
    assert open_fds(many) < BASELINE_FDS + len(WRITTEN)
    client.close()


def test_one_fetch_answers_every_one_of_600_partitions_holding_records(many):
    """A consumer assigned every partition asks for all of them in one Fetch: its answer (over a thousand pieces,
    more than one sendmsg takes) arrives whole, each partition with the batch written to it."""
    everything = [(f"many-{topic}", index) for topic in range(TOPICS) for index in range(PARTITIONS_PER_TOPIC)]
    batch = encode_batch([Record(0, 1_700_000_000_000, None, b"w" * 100)])
    client = RawClient(many.port)
    answer = client.call("Produce", 9, transactional_id=None, acks=1, timeout_ms=5000, topic_data=[
        Produce.TopicProduceData(name=topic, partition_data=[
            Produce.PartitionProduceData(index=index, records=batch) for index in range(PARTITIONS_PER_TOPIC)])
        for topic in sorted({topic for topic, _ in everything})])
    written_at = {(topic.name, p.index): p.base_offset for topic in answer.responses for p in topic.partition_responses
                  if p.error_code == 0}
    assert len(written_at) == len(everything)
    answer = client.call("Fetch", 11, replica_id=-1, max_wait_ms=0, min_bytes=0, max_bytes=16 << 20,
                         isolation_level=0, session_id=0, session_epoch=-1, topics=[
                             Fetch.FetchTopic(topic=topic, partitions=[
                                 Fetch.FetchPartition(partition=index, fetch_offset=written_at[topic, index],
                                                      partition_max_bytes=1 << 16)
                                 for index in range(PARTITIONS_PER_TOPIC)])
                             for topic in sorted({topic for topic, _ in everything})],
                         forgotten_topics_data=[], rack_id="")
    records = {(topic.topic, partition.partition_index): bytes(partition.records or b"")
               for topic in answer.responses for partition in topic.partitions}
    assert len(records) == len(everything)
    assert {len(data) for data in records.values()} == {len(batch)}
    client.close()
