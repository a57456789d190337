"""Metadata answers from the per-topic cache of encoded entries: as fast for 1000 partitions as for one, and never
stale (every version answered in its own encoding; partitions added show at once). Leadership changes in a cluster
replace the catalogue's topic and so its cache; tests/cluster/test_broker_loss.py watches leaders move through
Metadata."""

from __future__ import annotations

import statistics
import time

from confluent_kafka.admin import AdminClient, NewPartitions

from odradek.client import Admin
from odradek.errors import ErrorCode
from odradek.protocol import RequestHeader, api, encode_request
from .raw_client import RawClient, read_frame

METADATA = api("Metadata")


def ask(client: RawClient, version: int, topic: str):
    answer = client.call("Metadata", version, topics=[METADATA.request.MetadataRequestTopic(name=topic)],
                         **({"allow_auto_topic_creation": False} if version >= 4 else {}))
    [entry] = answer.topics
    assert entry.error_code == ErrorCode.NONE
    return entry


def round_trip_ms(client: RawClient, topic: str, count: int = 40) -> float:
    """The median time from sending a Metadata request to having its answer's bytes (not decoded: decoding 1000
    partitions here costs more than the broker's answer)."""
    request = encode_request(RequestHeader(api_key=METADATA.key, api_version=12, correlation_id=1, client_id="t"),
                             METADATA.request(topics=[METADATA.request.MetadataRequestTopic(name=topic)]))
    times = []
    for _ in range(count):
        started = time.perf_counter()
        client.sock.sendall(request)
        read_frame(client.sock)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def test_a_thousand_partitions_answer_about_as_fast_as_one(broker, topic_name):
    """Before the cache 1000 partitions took 50 times as long as one (about 5 ms against 0.1 ms): each request built
    and encoded every partition again. Now both are a copy of bytes; the margin is wide for a loaded machine."""
    admin = Admin(broker.bootstrap_servers, timeout=120)  # creating 1000 partitions takes seconds
    admin.create_topic(f"{topic_name}-wide", 1000, 1)
    admin.create_topic(f"{topic_name}-one", 1, 1)
    client = RawClient(broker.port)
    try:
        assert len(ask(client, 12, f"{topic_name}-wide").partitions) == 1000
        wide, one = round_trip_ms(client, f"{topic_name}-wide"), round_trip_ms(client, f"{topic_name}-one")
    finally:
        client.close()
    assert wide < 10 * one, (wide, one)


def test_each_version_gets_its_own_encoding(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 3, 1)
    client = RawClient(broker.port)
    try:
        for version in (12, 0, 9, 1, 12, 0):  # flexible and not, with and without leader epochs, from the cache too
            entry = ask(client, version, topic_name)
            assert entry.name == topic_name
            assert [(p.partition_index, p.leader_id, p.replica_nodes, p.isr_nodes) for p in entry.partitions] == [
                (index, 1, [1], [1]) for index in range(3)]
            assert (entry.topic_id.int != 0) == (version >= 10)
    finally:
        client.close()


def test_added_partitions_show_at_once(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 4, 1)
    client = RawClient(broker.port)
    try:
        assert len(ask(client, 12, topic_name).partitions) == 4  # now cached
        admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
        admin.create_partitions([NewPartitions(topic_name, 6)])[topic_name].result(30)
        assert [p.partition_index for p in ask(client, 12, topic_name).partitions] == list(range(6))
    finally:
        client.close()
