"""Timing script (not a test): µs per decode/encode of the hot messages.  Run: .venv/bin/python -m tests.protocol.bench_codec"""

from __future__ import annotations

import timeit
import uuid

from odradek.protocol import RequestHeader, decode_request, encode_request, encode_response
from odradek.protocol.apis import FetchResponse, MetadataResponse, ProduceRequest
from odradek.records.region import FileRegion


def _us(fn, number=20000) -> float:
    return min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6


def main():
    produce = ProduceRequest(acks=-1, timeout_ms=30000, topic_data=[
        ProduceRequest.TopicProduceData(name=f"topic-{t}", partition_data=[
            ProduceRequest.PartitionProduceData(index=p, records=b"\x00" * 1024) for p in range(3)])
        for t in range(2)])
    for version in (3, 9):
        frame = encode_request(RequestHeader(api_key=0, api_version=version, correlation_id=1, client_id="bench"),
                               produce)[4:]
        print(f"decode ProduceRequest v{version} (2 topics x 3 partitions x 1 KiB): "
              f"{_us(lambda: decode_request(frame)):.1f} µs")

    def fetch(records):
        return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
            topic="events", topic_id=uuid.uuid4(), partitions=[
                FetchResponse.PartitionData(partition_index=p, high_watermark=1000, last_stable_offset=1000,
                                            log_start_offset=0, records=records) for p in range(4)])])
    for version in (11, 16):
        header = RequestHeader(api_key=1, api_version=version, correlation_id=1)
        for label, records in (("bytes", b"\x00" * 4096), ("FileRegion", FileRegion(fd=3, position=0, length=4096))):
            body = fetch(records)
            print(f"encode FetchResponse v{version} (4 partitions, {label} records): "
                  f"{_us(lambda: encode_response(header, body)):.1f} µs")

    metadata = MetadataResponse(
        brokers=[MetadataResponse.MetadataResponseBroker(node_id=i, host=f"broker-{i}.example", port=9092,
                                                         rack=f"r{i}") for i in range(3)],
        cluster_id="odradek-cluster", controller_id=0, topics=[
            MetadataResponse.MetadataResponseTopic(name=f"topic-{t}", topic_id=uuid.uuid4(), partitions=[
                MetadataResponse.MetadataResponsePartition(partition_index=p, leader_id=p % 3, leader_epoch=1,
                                                           replica_nodes=[0, 1, 2], isr_nodes=[0, 1, 2])
                for p in range(3)]) for t in range(2)])
    for version in (1, 9, 12):
        header = RequestHeader(api_key=3, api_version=version, correlation_id=1)
        print(f"encode MetadataResponse v{version} (3 brokers, 2 topics x 3 partitions): "
              f"{_us(lambda: encode_response(header, metadata)):.1f} µs")
    brokers_only = MetadataResponse(brokers=metadata.brokers, cluster_id="odradek-cluster", controller_id=0)
    header = RequestHeader(api_key=3, api_version=12, correlation_id=1)
    print(f"encode MetadataResponse v12 (3 brokers, no topics): "
          f"{_us(lambda: encode_response(header, brokers_only)):.1f} µs")


if __name__ == "__main__":
    main()
