"""The C codecs (protocol/_codec.c) at the edges: every truncation and garbled byte of every API's requests and
responses (a client decodes a broker's answers, a broker a client's requests: both untrusted) comes out as
ProtocolError, and what the encoders refuse they refuse with an exception, never a wrong frame."""

from __future__ import annotations

import random
import struct

import pytest
from hypothesis import HealthCheck, given, settings

from odradek.protocol import API_BY_KEY, ProtocolError, RequestHeader, encode_response
from odradek.protocol.apis import FetchRequest, ProduceResponse
from odradek.protocol.codec import decoder, encoder, run_decoder
from odradek.protocol.schema import INT32, STRING, field, message

from .oracle import message_strategy


def _example(cls, version: int):
    """One derandomized example of `cls` at `version`, with what hypothesis puts in arrays and strings."""
    found = []

    @settings(max_examples=3, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(message_strategy(cls, version))
    def take(obj):
        found.append(obj)

    take()
    return max(found, key=lambda obj: len(_encode(cls, version, obj)))


def _encode(cls, version: int, obj) -> bytes:
    w: list = []
    encoder(cls, version)(obj, w)
    return b"".join(w)


def _cases():
    for a in sorted(API_BY_KEY.values(), key=lambda a: a.key):
        for kind in ("request", "response"):
            for version in (a.min_version, (a.min_version + a.max_version) // 2, a.max_version):
                yield pytest.param(getattr(a, kind), version, id=f"{a.name}{kind.title()}-v{version}")


@pytest.mark.parametrize("cls,version", sorted(set(_cases()), key=lambda p: p.id))
def test_every_truncation_and_garbled_byte_is_a_protocol_error(cls, version):
    data = _encode(cls, version, _example(cls, version))
    dec = decoder(cls, version)
    obj, end = run_decoder(dec, memoryview(data), 0, "whole")
    assert end == len(data) and _encode(cls, version, obj) == data
    for cut in range(len(data)):
        with pytest.raises(ProtocolError):
            run_decoder(dec, memoryview(data[:cut]), 0, "truncated")
    rng = random.Random(version * 1000 + len(data))
    for _ in range(200 if data else 0):  # some versions have no fields
        garbled = bytearray(data)
        for _ in range(rng.randrange(1, 4)):
            garbled[rng.randrange(len(garbled))] = rng.choice((0x00, 0x7F, 0x80, 0xFF, rng.randrange(256)))
        try:
            _, end = run_decoder(dec, memoryview(bytes(garbled)), 0, "garbled")
        except ProtocolError:
            continue
        assert end <= len(garbled)


def test_lengths_and_varints_the_decoder_refuses():
    fetch = decoder(FetchRequest, 12)  # flexible: compact lengths and tagged fields
    good = _encode(FetchRequest, 12, FetchRequest(topics=[FetchRequest.FetchTopic(topic="t", partitions=[
        FetchRequest.FetchPartition(partition=0)])]))
    assert run_decoder(fetch, memoryview(good), 0, "fetch")[1] == len(good)
    topics_at = 4 * 4 + 1 + 4 + 4  # replica_id, max_wait_ms, min_bytes, max_bytes, isolation_level, session id, epoch
    assert good[topics_at] == 2  # one topic, as a compact length
    for wrong, reason in ((b"\xff\xff\xff\xff\xff\x01", "varint longer than 5 bytes"),
                          (b"\x00", "negative length"),  # a compact null where the array is not nullable
                          (b"\xff\xff\xff\x7f", "truncated")):  # far more topics than bytes
        with pytest.raises(ProtocolError, match=reason):
            run_decoder(fetch, memoryview(good[:topics_at] + wrong + good[topics_at + 1:]), 0, "fetch")
    name = message("Named", valid_versions="0", flexible_versions="none", fields=[field("name", STRING, "0")])
    with pytest.raises(ProtocolError, match="malformed"):
        run_decoder(decoder(name, 0), memoryview(b"\x00\x02\xc3\x28"), 0, "a string that is not UTF-8")


def test_tagged_fields_unknown_ones_skipped_known_ones_read():
    tagged = message("Tagged", valid_versions="0", flexible_versions="0", fields=[
        field("a", INT32, "0"), field("b", INT32, "0", tagged_versions="0", tag=3, default=-1)])
    dec = decoder(tagged, 0)
    plain = struct.pack(">i", 7)
    unknown_then_known = plain + b"\x02" + b"\x01\x02\xaa\xbb" + b"\x03\x04" + struct.pack(">i", 9)
    obj, end = run_decoder(dec, memoryview(unknown_then_known), 0, "tagged")
    assert (obj.a, obj.b, end) == (7, 9, len(unknown_then_known))
    obj, _ = run_decoder(dec, memoryview(plain + b"\x00"), 0, "untagged")
    assert (obj.a, obj.b) == (7, -1)
    with pytest.raises(ProtocolError, match="truncated"):  # a tagged field's size past the end
        run_decoder(dec, memoryview(plain + b"\x01\x05\x10\x00"), 0, "tagged")
    assert _encode(tagged, 0, tagged(a=7, b=9)) == plain + b"\x01\x03\x04" + struct.pack(">i", 9)
    assert _encode(tagged, 0, tagged(a=7)) == plain + b"\x00"  # a tagged field at its default is left out


def test_what_the_encoders_refuse():
    with pytest.raises(struct.error):
        _encode(ProduceResponse, 9, ProduceResponse(throttle_time_ms=1 << 31))
    with pytest.raises(TypeError):
        _encode(ProduceResponse, 9, ProduceResponse(responses=[ProduceResponse.TopicProduceResponse(name=None)]))
    header = RequestHeader(api_key=0, api_version=9, correlation_id=5)
    (frame,) = encode_response(header, ProduceResponse())
    assert frame == struct.pack(">iib", len(frame) - 4, 5, 0) + b"\x01" + b"\x00\x00\x00\x00" + b"\x00"
