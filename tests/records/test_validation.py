"""records.validation: every record of a produced batch checked, for every codec: the malformed batches an outside
tester sent (valid CRC, records that do not match their header) are refused with INVALID_RECORD, keyless records on
a compacted topic are named one by one, and well-formed batches of every shape pass."""

from __future__ import annotations

import struct
import time

import pytest
from hypothesis import given, settings, strategies as st

from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import (
    BATCH_HEADER_SIZE, CRC_OFFSET, Record, _write_varint, batch_crc, decode_batch, encode_batch, validate_batches,
)
from odradek.records.compression import compress
from odradek.records.validation import RecordsRefused, validate_records

from .test_arrow import BASE_TS, CODECS, equal_sized_runs, varied_records
from .test_batch import kafka_python_batch, make_records, records_strategy

COUNT_OFFSET = 57
LAST_OFFSET_DELTA_OFFSET = 23


def check(batch: bytes, *, keys_required: bool = False, create_time_range: tuple[int, int] | None = None) -> None:
    validate_records(batch, validate_batches(batch), topic_partition="t-0", keys_required=keys_required,
                     create_time_range=create_time_range)


def with_body(body: bytes, count: int, *, compression: int = 0) -> bytes:
    """A batch whose header claims `count` records (last_offset_delta count - 1) over the raw record bytes `body`,
    compressed with `compression`, with a valid CRC: only the records themselves can be wrong."""
    template = bytearray(encode_batch([Record(0, BASE_TS, None, b"")], compression=compression))
    payload = compress(compression, body) if compression else body
    batch = template[:BATCH_HEADER_SIZE] + payload
    struct.pack_into(">i", batch, 8, len(batch) - 12)
    struct.pack_into(">i", batch, LAST_OFFSET_DELTA_OFFSET, count - 1)
    struct.pack_into(">i", batch, COUNT_OFFSET, count)
    struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def record_bytes(offset_delta: int, key: bytes | None = b"k", value: bytes = b"v", *, length_adjust: int = 0) -> bytes:
    body = bytearray(b"\x00")  # attributes
    _write_varint(body, 0)  # timestamp delta
    _write_varint(body, offset_delta)
    for field in (key, value):
        _write_varint(body, -1 if field is None else len(field))
        body += field or b""
    _write_varint(body, 0)  # headers
    out = bytearray()
    _write_varint(out, len(body) + length_adjust)
    return bytes(out + body)


def refused(batch: bytes, **flags) -> KafkaError:
    with pytest.raises(KafkaError) as info:
        check(batch, **flags)
    return info.value


@pytest.mark.parametrize("codec", CODECS)
def test_well_formed_batches_pass(codec):
    for records in (varied_records(40), equal_sized_runs(), [Record(0, BASE_TS, b"k", None)]):
        check(encode_batch(records, compression=codec))
    keyed = [record._replace(key=record.key or b"") for record in varied_records(40)]
    check(encode_batch(keyed, compression=codec), keys_required=True)


@settings(max_examples=100, deadline=None)
@given(records_strategy, st.sampled_from(CODECS))
def test_any_records_encode_batch_writes_pass(specs, codec):
    check(encode_batch(make_records(specs), compression=codec))


@pytest.mark.parametrize("codec", CODECS)
def test_kafka_python_batches_pass(codec):
    check(kafka_python_batch(codec, 20), keys_required=True)


@pytest.mark.parametrize("codec", CODECS)
@pytest.mark.parametrize("body, count, what", [
    (record_bytes(0) + b"\xff\xff", 2, "an unterminated varint"),
    (record_bytes(0) + record_bytes(1), 0x7FFFFFFF, "a count the bytes cannot hold"),
    (record_bytes(0) + record_bytes(1), 3, "one record fewer than the count"),
    (record_bytes(0) + record_bytes(1) + record_bytes(2), 2, "bytes left after the last record"),
    (record_bytes(0, length_adjust=1) + record_bytes(1), 2, "a length longer than its fields"),
    (record_bytes(0, length_adjust=-1) + record_bytes(1), 2, "a length shorter than its fields"),
    (record_bytes(0) + record_bytes(2), 2, "offset deltas with a gap"),
    (record_bytes(1) + record_bytes(0), 2, "offset deltas out of order"),
    (record_bytes(0) + record_bytes(0), 2, "a repeated offset delta"),
], ids=lambda value: value if isinstance(value, str) else "")
def test_records_that_disagree_with_their_header_are_invalid(codec, body, count, what):
    error = refused(with_body(body, count, compression=codec))
    assert error.code == ErrorCode.INVALID_RECORD, what
    assert error.message.endswith("in topic partition t-0")


def test_the_testers_huge_count_is_refused_before_any_per_record_work():
    started = time.perf_counter()
    error = refused(with_body(record_bytes(0) * 1000, 0x7FFFFFFF))
    assert error.code == ErrorCode.INVALID_RECORD and "premature EOF" in error.message
    assert time.perf_counter() - started < 0.05


def test_a_null_header_key_is_invalid():
    record = bytearray(record_bytes(0))
    body = record[1:-1] + b"\x02\x01\x00"  # one header: key length -1 (null), value length 0
    full = bytearray()
    _write_varint(full, len(body))
    assert refused(with_body(bytes(full + body), 1)).code == ErrorCode.INVALID_RECORD


@pytest.mark.parametrize("codec", CODECS)
def test_keyless_records_on_a_compacted_topic_are_each_named(codec):
    records = [Record(i, BASE_TS, None if i in (1, 4, 5) else b"k", b"v") for i in range(8)]
    error = refused(encode_batch(records, compression=codec), keys_required=True)
    assert isinstance(error, RecordsRefused) and error.code == ErrorCode.INVALID_RECORD
    message = "Compacted topic cannot accept message without key in topic partition t-0"
    assert error.record_errors == [(1, message), (4, message), (5, message)]
    assert error.message == (
        "One or more records have been rejected due to 3 record errors in total, and only showing the first three "
        f"errors at most: [RecordError(batchIndex=1, message='{message}'), RecordError(batchIndex=4, "
        f"message='{message}'), RecordError(batchIndex=5, message='{message}')]")
    check(encode_batch(records, compression=codec))  # keys are only required on compacted topics


def test_large_batches_are_checked_to_their_last_record():
    large = 70_000
    records = [Record(i, BASE_TS, b"k", b"v") for i in range(large)]
    check(encode_batch(records, compression=4), keys_required=True)
    records[large - 3] = records[large - 3]._replace(key=None)
    assert refused(encode_batch(records, compression=4), keys_required=True).record_errors[0][0] == large - 3
    records[large - 3] = records[large - 3]._replace(offset_delta=7)
    assert "offset delta 7" in refused(encode_batch(records), keys_required=False).message


@pytest.mark.parametrize("codec", [0, 4])
def test_timestamps_outside_the_create_time_range_are_each_named(codec):
    """message.timestamp.{before,after}.max.ms per record, as Kafka's validateTimestamp: a record older than its
    batch's first one is caught too, a record without a timestamp (-1) is not checked, and a keyless record on a
    compacted topic is named for its key only."""
    deltas = [0, -5000, 10, 20_000, -BASE_TS - 1, 30]  # -BASE_TS - 1: timestamp -1, none
    records = [Record(i, BASE_TS + delta, None if i == 5 else b"k", b"v") for i, delta in enumerate(deltas)]
    batch = encode_batch(records, compression=codec)
    window = (BASE_TS - 1000, BASE_TS + 10_000)
    error = refused(batch, keys_required=True, create_time_range=window)
    assert error.code == ErrorCode.INVALID_TIMESTAMP
    assert error.message == "One or more records have been rejected due to invalid timestamp"
    assert [(index, text.split(" of ")[0] if index != 5 else "key") for index, text in error.record_errors] == [
        (1, f"Timestamp {BASE_TS - 5000}"), (3, f"Timestamp {BASE_TS + 20_000}"), (5, "key")]
    assert error.record_errors[0][1].endswith(f"is out of range. The timestamp should be within "
                                              f"[{BASE_TS - 1000}, {BASE_TS + 10_000}]")
    check(batch, create_time_range=(BASE_TS - 10_000, BASE_TS + 20_000))


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_records_pass_only_if_a_consumer_decodes_them(data):
    """Any byte of the records overwritten (the CRC fixed up): the check accepts exactly the batches that
    batch.decode_batch (what fetching tools decode with) reads as record_count records with offset deltas 0, 1, ...,
    and refuses the rest with INVALID_RECORD."""
    records = data.draw(st.sampled_from([varied_records(5), varied_records(12)[7:], equal_sized_runs()[:9]]))
    original = encode_batch(records)[BATCH_HEADER_SIZE:]
    body = bytearray(original)
    for _ in range(data.draw(st.integers(1, 3))):
        body[data.draw(st.integers(0, len(body) - 1))] = data.draw(st.integers(0, 255))
    batch = with_body(bytes(body), len(records))
    try:
        decoded = [record.offset_delta for record in decode_batch(batch)[1]] == list(range(len(records)))
    except KafkaError:
        decoded = False
    try:
        check(batch)
        checked = True
    except KafkaError as exc:
        assert exc.code == ErrorCode.INVALID_RECORD
        checked = False
    assert checked == decoded, [(i, original[i], body[i]) for i in range(len(body)) if body[i] != original[i]]
