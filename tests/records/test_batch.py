"""Record batch v2: header parsing, produce-path validation, in-place offset assignment, the full codec, and
byte-level agreement with kafka-python's independent implementation in both directions."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings, strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import (
    BATCH_HEADER_SIZE, CONTROL_ABORT, CONTROL_COMMIT, BatchHeader, Record, assign_offsets, batch_crc, decode_batch,
    decode_control_record, encode_batch, encode_control_batch, parse_header, rebased, stamped, validate_batches,
)

INT64 = st.integers(-(2**63), 2**63 - 1)
optional_bytes = st.none() | st.binary(max_size=64)
records_strategy = st.lists(
    st.tuples(st.integers(0, 2**40), optional_bytes, optional_bytes,
              st.lists(st.tuples(st.text(max_size=8), optional_bytes), max_size=3)),
    min_size=1, max_size=8,
)


def make_records(specs) -> list[Record]:
    return [Record(delta, timestamp, key, value, headers) for delta, (timestamp, key, value, headers) in enumerate(specs)]


def kafka_python_batch(compression: int, count: int = 3, *, producer_id: int = -1, sequence: int = -1,
                       transactional: bool = False) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=compression, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
                                        base_sequence=sequence, batch_size=1 << 20)
    for index in range(count):
        builder.append(index, timestamp=1_700_000_000_000 + index, key=b"key-%d" % index,
                       value=b"value-%d " % index * 50, headers=[("trace", b"abc"), ("empty", None)])
    return bytes(builder.build())


def corrupt_field(batch: bytes, offset: int, fmt: str, value, *, fix_crc: bool = True) -> bytes:
    buf = bytearray(batch)
    struct.pack_into(fmt, buf, offset, value)
    if fix_crc:
        struct.pack_into(">I", buf, 17, batch_crc(buf, 0, len(buf)))
    return bytes(buf)


def test_header_layout_and_properties():
    batch = encode_batch([Record(0, 100, b"k", b"v"), Record(1, 250, None, b"w")], base_offset=40, compression=1,
                         producer_id=7, producer_epoch=2, base_sequence=11, transactional=True,
                         partition_leader_epoch=5)
    header = parse_header(batch)
    assert BATCH_HEADER_SIZE == 61
    assert header.size == len(batch) == header.batch_length + 12
    assert (header.base_offset, header.last_offset, header.record_count) == (40, 41, 2)
    assert (header.base_timestamp, header.max_timestamp) == (100, 250)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 2, 11)
    assert header.partition_leader_epoch == 5 and header.magic == 2
    assert header.compression == 1 and header.is_transactional and not header.is_control
    assert header.timestamp_type == 0 and not header.has_delete_horizon
    assert parse_header(b"\0" * 7 + batch, 7) == header


@given(INT64, INT64, st.integers(-(2**31), 2**31 - 1))
def test_size_and_last_offset_are_exact_for_any_header_a_client_can_send(base_offset, batch_length, delta):
    """`size` and `last_offset` are sums in C: near the top of int64 (a client chooses the base offset it sends)
    they are still the exact sums, not wrapped around."""
    header = BatchHeader(base_offset, batch_length, 0, 2, 0, 0, delta, 0, 0, -1, -1, -1, 1)
    assert header.size == batch_length + 12
    assert header.last_offset == base_offset + delta
    assert BatchHeader(2**63 - 1, 0, 0, 2, 0, 0, 5, 0, 0, -1, -1, -1, 6).last_offset == 2**63 + 4


@settings(max_examples=60, deadline=None)
@given(specs=records_strategy, compression=st.sampled_from([0, 1, 2, 3, 4]), base_offset=st.integers(0, 2**62))
def test_encode_decode_round_trip(specs, compression, base_offset):
    records = make_records(specs)
    batch = encode_batch(records, base_offset=base_offset, compression=compression)
    assert validate_batches(batch)[0].base_offset == base_offset
    header, decoded = decode_batch(batch)
    assert header.compression == compression
    assert decoded == records
    assert header.max_timestamp == max(record.timestamp for record in records)


@settings(max_examples=60, deadline=None)
@given(timestamps=st.lists(st.integers(0, 2**62), min_size=1, max_size=5), delta=st.integers(0, 2**31 - 5))
def test_extreme_varints_round_trip(timestamps, delta):
    records = [Record(delta + index, timestamp, None, None, []) for index, timestamp in enumerate(timestamps)]
    _, decoded = decode_batch(encode_batch(records))
    assert decoded == records


@pytest.mark.parametrize("compression", [0, 1, 4])  # the codecs kafka-python can run here
def test_kafka_python_batches_read_by_us(compression):
    batch = kafka_python_batch(compression, count=20, producer_id=3, sequence=0)
    [header] = validate_batches(batch)
    assert (header.record_count, header.last_offset_delta, header.producer_id) == (20, 19, 3)
    _, records = decode_batch(batch)
    assert [record.key for record in records] == [b"key-%d" % index for index in range(20)]
    assert records[4].value == b"value-4 " * 50
    assert records[4].timestamp == 1_700_000_000_004
    assert records[4].headers == [("trace", b"abc"), ("empty", None)]


@pytest.mark.parametrize("compression", [0, 1, 4])
def test_our_batches_read_by_kafka_python(compression):
    records = [Record(index, 1000 + index, b"k%d" % index if index % 2 else None, b"v" * index,
                      [("h", b"x")] if index % 3 == 0 else []) for index in range(10)]
    batch = encode_batch(records, base_offset=500, compression=compression, producer_id=9, producer_epoch=1,
                         base_sequence=4)
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc()
    assert (theirs.base_offset, theirs.producer_id, theirs.base_sequence) == (500, 9, 4)
    decoded = list(theirs)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in decoded] == \
        [(500 + r.offset_delta, r.timestamp, r.key, r.value) for r in records]
    assert [list(r.headers) for r in decoded] == [list(r.headers) for r in records]


def test_validate_walks_concatenated_batches():
    first, second = kafka_python_batch(0, 2), kafka_python_batch(1, 5)
    headers = validate_batches(first + second)
    assert [header.record_count for header in headers] == [2, 5]


@pytest.mark.parametrize("mutate, code", [
    (lambda b: b[:-1], ErrorCode.CORRUPT_MESSAGE),  # batch overruns the data
    (lambda b: b + b"\0" * 5, ErrorCode.CORRUPT_MESSAGE),  # trailing partial batch
    (lambda b: b + b[:40], ErrorCode.CORRUPT_MESSAGE),  # trailing partial header
    (lambda b: b[:-1] + bytes([b[-1] ^ 1]), ErrorCode.CORRUPT_MESSAGE),  # CRC mismatch
    (lambda b: corrupt_field(b, 16, ">b", 1, fix_crc=False), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    (lambda b: corrupt_field(b, 16, ">b", 3, fix_crc=False), ErrorCode.CORRUPT_MESSAGE),
    (lambda b: corrupt_field(b, 8, ">i", 20, fix_crc=False), ErrorCode.CORRUPT_MESSAGE),  # length below header
    (lambda b: corrupt_field(b, 57, ">i", 7), ErrorCode.INVALID_RECORD),  # count != lastOffsetDelta + 1
    (lambda b: corrupt_field(b, 57, ">i", 0), ErrorCode.INVALID_RECORD),
    (lambda b: corrupt_field(b, 21, ">h", 0x20), ErrorCode.INVALID_RECORD),  # control batch from a client
    (lambda b: corrupt_field(b, 21, ">h", 5), ErrorCode.UNSUPPORTED_COMPRESSION_TYPE),
    (lambda b: corrupt_field(b, 43, ">q", 12), ErrorCode.INVALID_RECORD),  # producer id without sequence
])
def test_validate_rejects(mutate, code):
    batch = kafka_python_batch(0, 3)
    validate_batches(batch)
    with pytest.raises(KafkaError) as info:
        validate_batches(mutate(batch))
    assert info.value.code == code


def test_assign_offsets_in_place_dense_across_batches():
    batches = [kafka_python_batch(0, 2), kafka_python_batch(1, 3), kafka_python_batch(4, 1)]
    buf = bytearray(b"".join(batches))
    headers = assign_offsets(buf, validate_batches(buf), 1000, partition_leader_epoch=7)
    assert [(h.base_offset, h.last_offset) for h in headers] == [(1000, 1001), (1002, 1004), (1005, 1005)]
    assert validate_batches(buf) == headers  # CRCs still hold: the leader epoch is outside them
    offsets = []
    position = 0
    for header in headers:
        theirs = DefaultRecordBatch(bytes(buf[position:position + header.size]))
        assert theirs.validate_crc() and theirs.leader_epoch == 7
        offsets += [record.offset for record in theirs]
        position += header.size
    assert offsets == list(range(1000, 1006))


def test_assign_offsets_log_append_time_like_kafka():
    buf = bytearray(kafka_python_batch(1, 3))
    [header] = assign_offsets(buf, validate_batches(buf), 5, log_append_time_ms=42_000)
    assert header.timestamp_type == 1 and header.max_timestamp == 42_000
    assert header.base_timestamp == 1_700_000_000_000  # Kafka's setMaxTimestamp leaves firstTimestamp alone
    assert validate_batches(buf) == [header]
    theirs = DefaultRecordBatch(bytes(buf))
    assert theirs.validate_crc() and theirs.timestamp_type == 1
    assert [record.timestamp for record in theirs] == [42_000] * 3
    assert [record.timestamp for record in decode_batch(buf)[1]] == [42_000] * 3


def test_empty_batch_keeps_offset_range_and_delete_horizon():
    batch = encode_batch([], base_offset=10, last_offset_delta=4, delete_horizon_ms=99)
    header, records = decode_batch(batch)
    assert records == [] and header.last_offset == 14 and header.record_count == 0
    assert header.has_delete_horizon and header.base_timestamp == 99
    kept = encode_batch([Record(2, 150, b"k", b"v")], base_offset=10, last_offset_delta=4, delete_horizon_ms=100)
    header, records = decode_batch(kept)
    assert records == [Record(2, 150, b"k", b"v", [])] and header.last_offset == 14


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit):
    batch = encode_control_batch(77, 3, commit, coordinator_epoch=12, timestamp=5000, base_offset=9)
    header, [record] = decode_batch(batch)
    assert header.is_control and header.is_transactional and header.producer_id == 77
    assert decode_control_record(record) == (CONTROL_COMMIT if commit else CONTROL_ABORT, 12)
    theirs = DefaultRecordBatch(batch)
    assert theirs.validate_crc() and theirs.is_control_batch
    with pytest.raises(KafkaError) as info:
        validate_batches(batch)
    assert info.value.code == ErrorCode.INVALID_RECORD


@settings(max_examples=80, deadline=None)
@given(junk=st.binary(min_size=1, max_size=200))
def test_decode_never_crashes_on_garbage(junk):
    batch = encode_batch([Record(0, 1, b"k", b"v" * 10)])
    body = bytearray(batch[:BATCH_HEADER_SIZE]) + junk
    struct.pack_into(">i", body, 8, len(body) - 12)
    try:
        decode_batch(bytes(body))
    except KafkaError as error:
        assert error.code == ErrorCode.CORRUPT_MESSAGE


def test_stamped_makes_the_first_bytes_the_log_writes_and_the_header_after():
    data = encode_batch([Record(offset_delta=0, timestamp=1, key=b"k", value=b"v")])
    header = parse_header(data)
    head, after = stamped(header, 7_000_000_000, 42)
    assert head == struct.pack(">qii", 7_000_000_000, header.batch_length, 42)
    assert type(after) is BatchHeader
    assert after == header._replace(base_offset=7_000_000_000, partition_leader_epoch=42)
    head, kept = stamped(header, 5)  # no epoch given: the batch's own
    assert head[12:] == data[12:16] and kept.partition_leader_epoch == header.partition_leader_epoch
    assert rebased(header, 9, None) == header._replace(base_offset=9)
    for bad in ((header, 1 << 63, 0), (header, 0, 1 << 31), (tuple(header), "0", 0)):
        with pytest.raises((OverflowError, TypeError)):
            stamped(*bad)


def test_header_hops_say_where_they_stopped_and_why():
    from odradek.records import _batch
    batches = [encode_batch([Record(offset_delta=i, timestamp=1, key=None, value=b"v" * 50) for i in range(n)],
                            base_offset=base) for base, n in ((0, 2), (2, 1), (3, 3))]
    chunk = b"".join(batches)
    ends = [sum(map(len, batches[:i + 1])) for i in range(3)]
    end = len(chunk)
    assert _batch.hop_to_offset(chunk, 0, end, 3) == (_batch.HOP_AT, ends[1])
    assert _batch.hop_to_offset(chunk, 0, end, 6) == (_batch.HOP_NONE, end)  # past the last offset
    assert _batch.hop_to_offset(chunk[:ends[0] + 30], 0, end, 3) == (_batch.HOP_NEEDS_BYTES, ends[0])
    assert _batch.hop_whole_batches(chunk, 0, end, ends[1] + 10, None) == (_batch.HOP_AT, ends[1])
    assert _batch.hop_whole_batches(chunk, 0, end, end, 3) == (_batch.HOP_AT, ends[1])  # stops at base offset 3
    assert _batch.hop_whole_batches(chunk[:ends[0] + 5], 0, end, end, None) == (_batch.HOP_NEEDS_BYTES, ends[0])
    damaged = bytearray(chunk)
    struct.pack_into(">i", damaged, ends[0] + 8, 3)  # a length shorter than a header
    assert _batch.hop_to_offset(bytes(damaged), 0, end, 3) == (_batch.HOP_NONE, ends[0])
    assert _batch.hop_whole_batches(bytes(damaged), 0, end, end, None) == (_batch.HOP_AT, ends[0])
    extreme = bytearray(chunk[:ends[0]])
    struct.pack_into(">q", extreme, 0, 2**63 - 1)  # base offset + last offset delta past int64: still reaches
    assert _batch.hop_to_offset(bytes(extreme), 0, ends[0], 2**63 - 1) == (_batch.HOP_AT, 0)
