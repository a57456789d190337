"""A Fetch that finds nothing waits for the partition's next append (a long poll); an append that lands after the
Fetch's first read but before its wait began must still end the wait. Sent on one connection in one write, a Fetch
at the log end and then a Produce reach the broker together: the Produce appends before the long poll's task has
run. Followers meet this at every acks=all round trip; when it is missed, the records wait out replica.fetch.wait.max.ms
(500 ms), and a SIGTERMed leader's producers waited out the whole poll."""

from __future__ import annotations

import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.protocol import RequestHeader, api, decode_response, encode_request
from tests.broker.raw_client import RawClient, read_frame

FETCH, PRODUCE = api("Fetch"), api("Produce")
LONG_POLL_MS = 10_000


def test_an_append_arriving_with_the_fetch_ends_its_long_poll(broker, topic_name):
    bootstrap = f"127.0.0.1:{broker.port}"
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic_name, 1, 1)])[topic_name].result(10)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    producer.produce(topic_name, b"one record", partition=0)
    producer.flush(10)
    client = RawClient(broker.port)
    try:
        def fetch_fields(offset: int, max_wait_ms: int) -> dict:
            return dict(max_wait_ms=max_wait_ms, min_bytes=1, max_bytes=1 << 20, topics=[
                FETCH.request.FetchTopic(topic=topic_name, partitions=[
                    FETCH.request.FetchPartition(partition=0, fetch_offset=offset, partition_max_bytes=1 << 20)])],
                forgotten_topics_data=[], rack_id="")

        batch = client.call("Fetch", 12, **fetch_fields(0, 0)).responses[0].partitions[0].records
        produce_request = PRODUCE.request(acks=1, timeout_ms=10_000, topic_data=[
            PRODUCE.request.TopicProduceData(name=topic_name, partition_data=[
                PRODUCE.request.PartitionProduceData(index=0, records=bytes(batch))])])
        requests = [(FETCH, 12, FETCH.request(**fetch_fields(1, LONG_POLL_MS))), (PRODUCE, 8, produce_request)]
        frames = [encode_request(RequestHeader(api_key=spec.key, api_version=version, correlation_id=number,
                                               client_id="wake-up-test"), request)
                  for number, (spec, version, request) in enumerate(requests, start=1)]
        started = time.monotonic()
        client.sock.settimeout(LONG_POLL_MS / 1000 + 10)
        client.sock.sendall(b"".join(frames))
        _, answer = decode_response(FETCH.key, 12, read_frame(client.sock))
        waited_s = time.monotonic() - started
        _, produced = decode_response(PRODUCE.key, 8, read_frame(client.sock))
    finally:
        client.close()
    assert produced.responses[0].partition_responses[0].error_code == 0
    assert answer.responses[0].partitions[0].records, "the long poll ended without the appended batch"
    assert waited_s < 3.0, f"the Fetch waited {waited_s:.1f} s for an append that came with it"
