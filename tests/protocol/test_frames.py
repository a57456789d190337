"""Whole-frame behaviour: headers, errors on bad input, unknown tagged fields, ApiVersions quirks, FileRegion."""

from __future__ import annotations

import os
import struct
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.protocol import (API_BY_KEY, ProtocolError, RequestHeader, UnsupportedVersion, api, decode_request,
                              decode_response, encode_request, encode_response)
from odradek.protocol.apis import (ApiVersionsRequest, ApiVersionsResponse, FetchRequest, FetchResponse,
                                   MetadataRequest, MetadataResponse, ProduceRequest, ProduceResponse)
from odradek.records.region import FileRegion

from .oracle import kafka_python_class, to_kafka_python


def _produce(version):
    return ProduceRequest(
        transactional_id="tx" if version >= 3 else None, acks=-1, timeout_ms=1500,
        topic_data=[ProduceRequest.TopicProduceData(name="orders", partition_data=[
            ProduceRequest.PartitionProduceData(index=2, records=b"\x01" * 70)])])


def _metadata_request():
    return MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="a")], allow_auto_topic_creation=True)


SAMPLES = [
    (0, 3, _produce(3)), (0, 9, _produce(9)), (3, 1, _metadata_request()), (3, 12, _metadata_request()),
    (18, 3, ApiVersionsRequest(client_software_name="x", client_software_version="1")),
    (1, 12, FetchRequest(max_wait_ms=5, topics=[FetchRequest.FetchTopic(topic="t", partitions=[
        FetchRequest.FetchPartition(partition=0, fetch_offset=7, partition_max_bytes=100)])])),
]


def _frame(key, version, body, client_id="cid"):
    return encode_request(RequestHeader(api_key=key, api_version=version, correlation_id=42, client_id=client_id),
                          body)[4:]


@pytest.mark.parametrize("key,version,body", SAMPLES)
def test_request_frames_match_kafka_python(key, version, body):
    kp = to_kafka_python(body, kafka_python_class(key, "request"), version)
    kp.with_header(correlation_id=42, client_id="cid")
    assert encode_request(RequestHeader(api_key=key, api_version=version, correlation_id=42, client_id="cid"),
                          body) == kp.encode(header=True, framed=True)
    header, decoded = decode_request(_frame(key, version, body))
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (key, version, 42, "cid")
    assert decoded == body


@pytest.mark.parametrize("key,version,body", [
    (3, 8, MetadataResponse(brokers=[MetadataResponse.MetadataResponseBroker(node_id=1, host="h", port=1)])),
    (3, 12, MetadataResponse(cluster_id="c", controller_id=1)),
    (18, 3, ApiVersionsResponse(api_keys=[ApiVersionsResponse.ApiVersion(api_key=0, max_version=11)])),
    (18, 0, ApiVersionsResponse(error_code=35)),
])
def test_response_frames_match_kafka_python(key, version, body):
    kp = to_kafka_python(body, kafka_python_class(key, "response"), version)
    kp.with_header(correlation_id=9)
    chunks = encode_response(RequestHeader(api_key=key, api_version=version, correlation_id=9), body)
    assert chunks == [kp.encode(header=True, framed=True)]
    assert decode_response(key, version, chunks[0][4:]) == (9, body)


def test_request_header_v2_client_id_is_not_compact_and_may_be_null():
    frame = _frame(18, 3, ApiVersionsRequest(), client_id=None)
    assert frame[:10] == struct.pack(">hhih", 18, 3, 42, -1)
    header, _ = decode_request(frame)
    assert header.client_id is None


def test_records_decode_zero_copy():
    frame = _frame(0, 9, _produce(9))
    _, request = decode_request(frame)
    records = request.topic_data[0].partition_data[0].records
    assert isinstance(records, memoryview) and records.obj is frame and records == b"\x01" * 70


def test_a_request_decodes_alike_from_any_buffer_and_failures_name_what_failed():
    frame = _frame(0, 9, _produce(9))
    header, request = decode_request(frame)
    for other in (bytearray(frame), memoryview(frame), memoryview(frame).cast("b")):  # "b": cast to bytes first
        again_header, again = decode_request(other)
        assert (again_header, again) == (header, request)
        records = again.topic_data[0].partition_data[0].records
        assert isinstance(records, memoryview) and records.format == "B"  # a view of the frame, never a copy
    with pytest.raises(ProtocolError, match="^malformed request header: "):
        decode_request(frame[:9])
    with pytest.raises(ProtocolError, match="^malformed Produce v9 request: "):
        decode_request(frame[:-3])
    with pytest.raises(ProtocolError, match="shorter than a header"):
        decode_request(frame[:7])


@pytest.mark.parametrize("key,version,body", SAMPLES)
def test_every_truncation_is_a_protocol_error(key, version, body):
    frame = _frame(key, version, body)
    for end in range(len(frame)):
        with pytest.raises(ProtocolError):
            decode_request(frame[:end])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.sampled_from(SAMPLES), st.integers(0, 200), st.binary(min_size=1, max_size=4))
def test_garbled_frames_raise_only_protocol_error(sample, where, garbage):
    frame = bytearray(_frame(*sample))
    where %= len(frame)
    frame[where:where + len(garbage)] = garbage
    try:
        decode_request(bytes(frame))
    except ProtocolError:
        pass


def test_unknown_api_key_is_a_protocol_error():
    with pytest.raises(ProtocolError, match="unknown api key"):
        decode_request(struct.pack(">hhih", 999, 0, 1, -1))


@pytest.mark.parametrize("key,version", [(0, 13), (0, 14), (18, 5), (18, 77), (3, 14)])
def test_unsupported_version_carries_the_header(key, version):
    frame = struct.pack(">hhih", key, version, 77, 3) + b"cli" + b"\x00" * 8
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(frame)
    header = info.value.header
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (key, version, 77, "cli")


def encode_uvarint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _with_tags(tags: list[tuple[int, bytes]]) -> bytes:
    out = encode_uvarint(len(tags))
    for tag, data in tags:
        out += encode_uvarint(tag) + encode_uvarint(len(data)) + data
    return out


def test_unknown_tagged_fields_are_ignored_top_level_and_nested():
    topic_id = uuid.uuid4()
    unknown = _with_tags([(7, b"abc"), (300, b""), (100000, b"\xff" * 200)])
    body = (encode_uvarint(2) + topic_id.bytes + encode_uvarint(2) + b"a" + unknown  # one topic, unknown tags
            + b"\x01\x00" + unknown)
    frame = struct.pack(">hhih", 3, 12, 5, 0) + b"\x00" + body
    _, request = decode_request(frame)
    assert request == MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(topic_id=topic_id, name="a")],
                                      allow_auto_topic_creation=True)


def test_known_tagged_fields_decode_among_unknown_ones():
    response = ProduceResponse(node_endpoints=[ProduceResponse.NodeEndpoint(node_id=3, host="h", port=9)])
    w = encode_response(RequestHeader(api_key=0, api_version=10, correlation_id=1), response)[0]
    body = w[4 + 5:]  # size, correlation id, empty header tags
    # the top-level tag section is the whole tail after responses (0x01) and throttle_time_ms
    tail = body[1 + 4:]
    assert tail[0] == 1  # one tagged field: node_endpoints
    tags = _with_tags([(0, bytes(tail[3:])), (9, b"zz")])
    assert tail[2] == len(tail) - 3
    _, decoded = decode_response(0, 10, b"\x00\x00\x00\x01\x00" + body[:5] + tags)
    assert decoded == response


def test_api_versions_response_has_header_v0_and_no_tagged_fields():
    table = [ApiVersionsResponse.ApiVersion(api_key=a.key, min_version=a.min_version, max_version=a.max_version)
             for a in API_BY_KEY.values()]
    header = RequestHeader(api_key=18, api_version=3, correlation_id=0x01020304)
    plain = encode_response(header, ApiVersionsResponse(api_keys=table))
    decorated = encode_response(header, ApiVersionsResponse(
        api_keys=table, finalized_features_epoch=5, zk_migration_ready=True,
        supported_features=[ApiVersionsResponse.SupportedFeatureKey(name="f", max_version=1)]))
    assert plain == decorated
    frame = plain[0]
    assert frame[4:8] == b"\x01\x02\x03\x04" and frame[8:10] == b"\x00\x00"  # no header tag byte: error code next
    assert frame[-1:] == b"\x00"  # the body's tag section is empty
    n = len(table)
    assert len(frame) == 4 + 4 + 2 + 1 + n * 7 + 4 + 1  # each ApiVersion: 3 int16 + its empty tag section


def test_unsupported_api_versions_answer_is_v0():
    with pytest.raises(UnsupportedVersion) as info:
        decode_request(struct.pack(">hhih", 18, 9, 11, -1) + b"\x00\x00\x00")
    header = info.value.header
    header.api_version = 0
    frame = encode_response(header, ApiVersionsResponse(error_code=35, api_keys=[
        ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)]))[0]
    assert frame == struct.pack(">iihihhh", 16, 11, 35, 1, 18, 0, 4)


def test_file_region_is_a_separate_chunk_never_read():
    region = FileRegion(fd=-1, position=4096, length=1000)  # an invalid fd: reading it would fail
    response = FetchResponse(responses=[FetchResponse.FetchableTopicResponse(topic="t", partitions=[
        FetchResponse.PartitionData(partition_index=0, high_watermark=5, records=region),
        FetchResponse.PartitionData(partition_index=1, records=b"abc")])])
    chunks = encode_response(RequestHeader(api_key=1, api_version=11, correlation_id=3), response)
    assert len(chunks) == 3 and chunks[1] is region
    size = struct.unpack(">i", chunks[0][:4])[0]
    assert size == len(chunks[0]) - 4 + region.length + len(chunks[2])
    assert chunks[0][-4:] == struct.pack(">i", 1000)  # the records length prefix precedes the region


def test_file_region_bytes_decode_like_inline_records(tmp_path):
    path = tmp_path / "segment"
    path.write_bytes(b"x" * 100 + b"RECORDS!" + b"y" * 100)
    fd = os.open(path, os.O_RDONLY)
    try:
        region = FileRegion(fd=fd, position=100, length=8)
        header = RequestHeader(api_key=1, api_version=16, correlation_id=3)

        def response(records):
            return FetchResponse(responses=[FetchResponse.FetchableTopicResponse(
                topic_id=uuid.UUID(int=1), partitions=[FetchResponse.PartitionData(records=records)])])
        chunks = encode_response(header, response(region))
        wire = b"".join(c.read_bytes() if isinstance(c, FileRegion) else c for c in chunks)
        assert wire == encode_response(header, response(b"RECORDS!"))[0]
        _, decoded = decode_response(1, 16, wire[4:])
        assert decoded.responses[0].partitions[0].records == b"RECORDS!"
    finally:
        os.close(fd)


def test_encode_response_checks_the_body_class():
    with pytest.raises(TypeError):
        encode_response(RequestHeader(api_key=0, api_version=9, correlation_id=1), MetadataResponse())


def test_requests_refuse_fields_their_version_lacks_responses_drop_them():
    with pytest.raises(ProtocolError, match="transactional_id"):
        encode_request(RequestHeader(api_key=0, api_version=2, correlation_id=1), _produce(3))
    # one response object serves every version: log_start_offset (v5+) and current_leader (v10+, not ignorable)
    # are simply left out of v4
    response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
        ProduceResponse.PartitionProduceResponse(index=0, log_start_offset=9,
                                                 current_leader=ProduceResponse.LeaderIdAndEpoch(leader_id=2))])])
    chunks = encode_response(RequestHeader(api_key=0, api_version=4, correlation_id=1), response)
    partition = decode_response(0, 4, chunks[0][4:])[1].responses[0].partition_responses[0]
    assert (partition.log_start_offset, partition.current_leader.leader_id) == (-1, -1)


def test_a_tagged_struct_goes_on_the_wire_when_any_of_its_fields_is_away_from_its_default():
    # Produce v10's current_leader is a tagged struct: written only when it differs from LeaderIdAndEpoch()
    Leader = ProduceResponse.LeaderIdAndEpoch
    sizes = {}
    for leader in (Leader(), Leader(leader_id=2), Leader(leader_epoch=5), Leader(leader_id=2, leader_epoch=5)):
        response = ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name="t", partition_responses=[
            ProduceResponse.PartitionProduceResponse(index=0, current_leader=leader)])])
        frame = b"".join(encode_response(RequestHeader(api_key=0, api_version=10, correlation_id=1), response))
        decoded = decode_response(0, 10, frame[4:])[1].responses[0].partition_responses[0].current_leader
        assert (decoded.leader_id, decoded.leader_epoch) == (leader.leader_id, leader.leader_epoch)
        sizes[leader.leader_id, leader.leader_epoch] = len(frame)
    assert sizes[-1, -1] < min(sizes[2, -1], sizes[-1, 5], sizes[2, 5])  # the default's tag is left out


def test_registry_ranges():
    expected = {0: 12, 1: 17, 2: 10, 3: 13, 8: 9, 9: 9, 10: 6, 11: 9, 12: 4, 13: 5, 14: 5, 15: 6, 16: 5, 17: 1,
                18: 4, 19: 7, 20: 6, 21: 2, 22: 5, 23: 4, 24: 5, 25: 4, 26: 5, 27: 1, 28: 5, 29: 3, 30: 3, 31: 3,
                32: 4, 33: 2, 35: 4, 36: 2, 34: 2, 37: 3, 42: 2, 43: 2, 44: 1, 45: 0, 46: 0, 47: 0, 48: 1, 49: 1,
                50: 0, 51: 0, 60: 2, 61: 0, 65: 0, 66: 1, 68: 1, 69: 1, 74: 0, 75: 0,
                76: 1, 77: 1, 78: 2, 79: 2, 83: 0, 84: 0, 85: 1, 86: 0, 87: 1, 90: 1, 91: 0, 92: 0}
    assert {k: a.max_version for k, a in API_BY_KEY.items()} == expected
    share_apis = {76, 77, 78, 79}  # from v1, as Kafka 4.2+ (handlers/api_versions.py)
    assert all(a.min_version == (1 if k in share_apis else 0) for k, a in API_BY_KEY.items())
    assert api("Produce").flexible_from == 9 and api("SaslHandshake").flexible_from is None
    assert api("Metadata").response is MetadataResponse


@pytest.mark.parametrize("length", [0, 1, 126, 127, 128, 300, 16382, 16383, 16384, 70000])
def test_compact_lengths_of_every_varint_size_round_trip(length):
    request = MetadataRequest(topics=[MetadataRequest.MetadataRequestTopic(name="n" * length)])
    frame = encode_request(RequestHeader(api_key=3, api_version=12, correlation_id=1), request)
    assert encode_uvarint(length + 1) in frame  # the compact string length, in as many bytes as it needs
    assert decode_request(frame[4:])[1] == request
