"""records.walk (the C walker) against a straightforward reference decode, written here from Kafka's record layout
and its varint rules (a varint is Java int arithmetic over at most 5 bytes, a varlong long arithmetic over 10): on
random valid batches both find the same fields and the same records at fault, on damaged bytes both accept or both
refuse, and each kind of malformed batch is refused with what was wrong, never a crash."""

from __future__ import annotations

import threading
import time
from array import array

import pytest
from hypothesis import given, settings, strategies as st

from odradek.records.batch import (
    BATCH_HEADER_SIZE, MalformedRecords, Record, _write_varint, decode_batch, encode_batch, parse_header,
)
from odradek.records.walk import check_records, kept_batch, record_fields

INT32 = st.integers(-2**31, 2**31 - 1)
INT64 = st.integers(-2**63, 2**63 - 1)
FIELD = st.one_of(st.none(), st.binary(max_size=300))
RECORD = st.tuples(INT64, FIELD, FIELD, st.lists(st.tuples(st.binary(max_size=20), FIELD), max_size=3))


class Refused(Exception):
    """The reference decode's refusal."""


def varint(value: int) -> bytes:
    out = bytearray()
    _write_varint(out, value)
    return bytes(out)


def encode_record(offset_delta: int, timestamp_delta: int, key, value, headers=()) -> bytes:
    """One record as Kafka's DefaultRecord.writeTo lays it out."""
    body = bytearray(b"\x00") + varint(timestamp_delta) + varint(offset_delta)
    for field in (key, value):
        body += varint(-1) if field is None else varint(len(field)) + field
    body += varint(len(headers))
    for name, header_value in headers:
        body += varint(len(name)) + name
        body += varint(-1) if header_value is None else varint(len(header_value)) + header_value
    return varint(len(body)) + bytes(body)


def reference_read_varint(data: bytes, position: int, limit: int, max_bytes: int) -> tuple[int, int]:
    raw = 0
    for index in range(max_bytes):
        if position >= limit:
            raise Refused("overrun")
        byte = data[position]
        position += 1
        raw |= (byte & 0x7F) << (7 * index)
        if byte < 0x80:
            bits = 32 if max_bytes == 5 else 64
            raw &= (1 << bits) - 1
            value = (raw >> 1) ^ -(raw & 1)
            return value, position
    raise Refused("varint too long")


def reference_walk(data: bytes, count: int) -> tuple[list[tuple], list[tuple]]:
    """(per record: timestamp delta, offset delta, key start, key length, value start, value length, header count;
    per header: key start, key length, value start, value length), or Refused."""
    records, headers = [], []
    position, end = 0, len(data)
    for _ in range(count):
        length, position = reference_read_varint(data, position, end, 5)
        if length < 0 or position + length > end:
            raise Refused("record overruns its batch")
        limit = position + length
        if position + 1 > limit:
            raise Refused("no attributes")
        position += 1
        timestamp_delta, position = reference_read_varint(data, position, limit, 10)
        offset_delta, position = reference_read_varint(data, position, limit, 5)
        fields = []
        for _ in range(2):
            field_length, position = reference_read_varint(data, position, limit, 5)
            fields += [position, field_length]
            if field_length > 0:
                position += field_length
                if position > limit:
                    raise Refused("field overruns its record")
        header_count, position = reference_read_varint(data, position, limit, 5)
        if header_count < 0:
            raise Refused("negative header count")
        for _ in range(header_count):
            header = []
            for which in ("key", "value"):
                field_length, position = reference_read_varint(data, position, limit, 5)
                if which == "key" and field_length < 0:
                    raise Refused("null header key")
                header += [position, field_length]
                if field_length > 0:
                    position += field_length
                    if position > limit:
                        raise Refused("header overruns its record")
            headers.append(tuple(header))
        if position != limit:
            raise Refused("length disagrees with fields")
        records.append((timestamp_delta, offset_delta, *fields, header_count))
    if position != end:
        raise Refused("bytes remaining")
    return records, headers


def walked(data: bytes, count: int) -> tuple[list[tuple], list[tuple]]:
    fields, headers = record_fields(data, [len(data)], [count], with_headers=True)
    return list(zip(*(column.tolist() for column in fields))), list(zip(*(column.tolist() for column in headers)))


def reference_outcome(data: bytes, count: int):
    try:
        return reference_walk(data, count)
    except Refused:
        return "refused"


def walked_outcome(data: bytes, count: int):
    try:
        return walked(data, count)
    except MalformedRecords:
        return "refused"


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(INT32, RECORD), max_size=12))
def test_random_valid_records_walk_as_the_reference_decodes_them(specs):
    """Any offset deltas, timestamp deltas over all of int64, null and empty keys, values and header values."""
    data = b"".join(encode_record(delta, *record) for delta, record in specs)
    expected = reference_walk(data, len(specs))
    assert walked(data, len(specs)) == expected
    assert [row[1] for row in expected[0]] == [delta for delta, _ in specs]


@settings(max_examples=300, deadline=None)
@given(st.lists(RECORD, max_size=12), st.booleans(), INT64, INT64, INT64)
def test_produce_checks_name_the_records_the_reference_finds(specs, keys_required, base, earliest, latest):
    """Offset deltas 0..n-1 pass; keyless records and timestamps (base + delta as Java longs add, -1 exempt)
    outside [earliest, latest] are named in order."""
    data = b"".join(encode_record(index, *record) for index, record in enumerate(specs))
    records, _ = reference_walk(data, len(specs))
    keyless = [index for index, row in enumerate(records) if keys_required and row[3] < 0]
    timestamps = [(base + row[0] + 2**63) % 2**64 - 2**63 for row in records]
    late = [(index, timestamp) for index, timestamp in enumerate(timestamps)
            if timestamp != -1 and not earliest <= timestamp <= latest]
    faults = check_records(data, len(specs), base, keys_required=keys_required,
                           create_time_range=(earliest, latest), max_errors=5)
    if not keyless and not late:
        assert faults is None
    else:
        assert faults == (len(keyless), keyless[:5], late[:5])
    assert check_records(data, len(specs), base, keys_required=False, create_time_range=None, max_errors=5) is None


@settings(max_examples=1000, deadline=None)
@given(st.data())
def test_damaged_records_are_refused_or_walk_as_the_reference_decodes_them(data):
    """Bytes overwritten (often with 0x00, 0x7F, 0x80, 0xFF), cut off, inserted or the count changed: the walker
    and the reference both refuse, or find the same fields; nothing crashes."""
    specs = data.draw(st.lists(st.tuples(INT32, RECORD), min_size=1, max_size=6))
    body = bytearray(b"".join(encode_record(delta, *record) for delta, record in specs))
    count = len(specs)
    for _ in range(data.draw(st.integers(1, 3))):
        damage = data.draw(st.sampled_from(["overwrite", "overwrite", "cut", "insert", "count"]))
        at = data.draw(st.integers(0, max(len(body) - 1, 0)))
        if damage == "overwrite" and body:
            body[at] = data.draw(st.one_of(st.sampled_from([0x00, 0x7F, 0x80, 0xFF]), st.integers(0, 255)))
        elif damage == "cut":
            del body[at:]
        elif damage == "insert":
            body[at:at] = data.draw(st.binary(min_size=1, max_size=6))
        elif damage == "count":
            count = data.draw(st.integers(0, count + 2))
    expected = reference_outcome(bytes(body), count)
    assert walked_outcome(bytes(body), count) == expected
    try:
        check_records(bytes(body), count, 0, keys_required=True, create_time_range=(0, 1), max_errors=3)
        checked = True
    except MalformedRecords:
        checked = False
    assert checked == (expected != "refused" and [row[1] for row in expected[0]] == list(range(count)))


GOOD = encode_record(0, 0, b"key", b"value" * 4)
SECOND = encode_record(1, 0, b"key", b"value" * 4)


def record_with(fields: bytes) -> bytes:
    """A record of exactly these field bytes (after its length)."""
    return varint(len(fields)) + fields


@pytest.mark.parametrize("body, count, message", [
    (GOOD + SECOND, 0x7FFFFFFF, "Incorrect declared batch size, premature EOF reached: 2147483647 records cannot fit"),
    (GOOD + SECOND, -1, "Incorrect declared batch size, premature EOF reached: -1 records"),
    (GOOD + SECOND[:-1], 2, "premature EOF reached: record 1 of 2 overruns"),
    (GOOD + SECOND[:1], 2, "premature EOF reached: record 1 of 2"),
    (GOOD + b"\xff\xff", 2, "premature EOF reached: record 1 of 2"),
    (GOOD + b"\xff\xff\xff\xff\xff\x01" + bytes(10), 2, "Record 1 has a varint longer than its type allows"),
    (GOOD + b"\x01" + bytes(10), 2, "Record 1 has a negative length"),
    (varint(200) + GOOD[1:] + bytes(8), 1, f"premature EOF reached: record 0 of 1 overruns the {len(GOOD) + 9} "),
    (GOOD + SECOND + SECOND, 2, "Incorrect declared batch size, records still remaining in file after record 1"),
    (record_with(b"\x00" + b"\xff" * 10 + b"\x00\x00\x00\x00"), 1, "Record 0 has a varint longer than"),
    (record_with(b"\x00\x00\x00\x00") + bytes(3), 1, "Record 0 has fields that overrun its length"),
    (record_with(b"\x00\x00\x00" + varint(50) + b"key\x00\x00"), 1, "Record 0 has fields that overrun its length"),
    (record_with(b"\x00\x00\x00\x00\x00\x00\x00"), 1, "Record 0 length disagrees with its fields"),
    (record_with(b"\x00\x00\x00\x00\x00\x01"), 1, "Found invalid number of record headers -1 in record 0"),
    (record_with(b"\x00\x00\x00\x00\x00" + varint(100) + b"\x00\x00"), 1, "Record 0 has fields that overrun"),
    (record_with(b"\x00\x00\x00\x00\x00\x02\x01\x00"), 1, "Record 0 has a header with a null key"),
    (record_with(b"\x00\x00\x00\x00\x00\x02\x02h" + varint(9) + b"v"), 1, "Record 0 has fields that overrun"),
], ids=["count-0x7FFFFFFF", "count-negative", "truncated-field", "truncated-length", "unterminated-length",
        "six-byte-length", "negative-length", "length-past-the-end", "bytes-remaining", "eleven-byte-varlong",
        "no-room-for-fields", "key-past-its-record", "fields-end-early", "negative-header-count",
        "header-count-past-its-record", "null-header-key", "header-value-past-its-record"])
def test_each_malformed_batch_is_refused_with_what_is_wrong(body, count, message):
    with pytest.raises(MalformedRecords) as walking:
        record_fields(body, [len(body)], [count], with_headers=True)
    with pytest.raises(MalformedRecords) as checking:
        check_records(body, count, 0, keys_required=False, create_time_range=None, max_errors=10)
    assert message in walking.value.message and message in checking.value.message
    assert reference_outcome(body, count) == "refused"


def test_offset_deltas_must_count_from_zero_at_produce_but_not_in_a_compacted_read():
    body = GOOD + encode_record(5, 0, b"k", b"v")
    with pytest.raises(MalformedRecords) as info:
        check_records(body, 2, 0, keys_required=False, create_time_range=None, max_errors=10)
    assert info.value.message == "Record 1 has offset delta 5: a batch's offset deltas must be 0 to 1 in order"
    assert [row[1] for row in walked(body, 2)[0]] == [0, 5]


def test_batches_end_to_end_each_hold_their_count():
    """Two batches' records concatenated: each must end at its own end, so a record cannot straddle two."""
    data = GOOD + SECOND + GOOD
    fields, _ = record_fields(data, [len(GOOD + SECOND), len(data)], [2, 1], with_headers=False)
    assert fields.key_starts.tolist() == [5, 5 + len(GOOD), 5 + 2 * len(GOOD)]
    with pytest.raises(MalformedRecords, match="records still remaining"):
        record_fields(data, [len(GOOD + SECOND), len(data)], [1, 2], with_headers=False)


def test_the_walk_lets_other_threads_run():
    """The GIL is released over the bytes: while another thread checks a big batch (2,000,000 records) five times,
    this one keeps getting turns (a walk that held the GIL would give it about one per call)."""
    many = b"".join(encode_record(index, 0, b"key", b"v" * 20) for index in range(2_000_000))
    done = threading.Event()

    def walk():
        for _ in range(5):
            check_records(many, 2_000_000, 0, keys_required=True, create_time_range=None, max_errors=1)
        done.set()

    walker = threading.Thread(target=walk)
    turns = 0
    walker.start()
    while not done.is_set():
        time.sleep(0)  # gives up the GIL; taking it back waits for a walk that holds it
        turns += 1
    walker.join()
    assert turns > 500, turns


TIMESTAMP = st.integers(-2**40, 2**61)  # wide enough for 10-byte deltas, narrow enough that none wraps
KEPT_RECORD = st.tuples(TIMESTAMP, FIELD, FIELD, st.lists(st.tuples(st.text(max_size=8), FIELD), max_size=2))


def as_kafka_reads(records: list[Record], timestamp_type: int) -> list[Record]:
    stamp = max(record.timestamp for record in records) if timestamp_type else None
    return [record._replace(timestamp=stamp if timestamp_type else record.timestamp,
                            headers=list(record.headers)) for record in records]


@settings(max_examples=300, deadline=None)
@given(st.lists(KEPT_RECORD, min_size=1, max_size=12), st.data(), st.sampled_from([0, 1]),
       st.one_of(st.none(), TIMESTAMP))
def test_kept_records_are_the_batch_encode_batch_writes_for_them(specs, data, timestamp_type, horizon):
    """The cleaner's rewrite copies records in C; byte for byte it is what encoding the decoded records gives."""
    records = [Record(index, *spec) for index, spec in enumerate(specs)]
    frame = dict(base_offset=500, producer_id=7, producer_epoch=2, base_sequence=40, timestamp_type=timestamp_type)
    batch = encode_batch(records, **frame)
    header = parse_header(batch)
    kept = sorted(data.draw(st.sets(st.integers(0, len(records) - 1), min_size=1)))
    read = as_kafka_reads(records, timestamp_type)
    expected = encode_batch([read[index] for index in kept], last_offset_delta=header.last_offset_delta,
                            delete_horizon_ms=horizon, **frame)
    assert kept_batch(header, memoryview(batch)[BATCH_HEADER_SIZE:], array("q", kept), horizon) == expected


def test_kept_records_are_written_with_kafkas_zero_attributes():
    body = bytearray(encode_record(0, 5, b"k", b"v") + encode_record(1, 9, b"k", b"w"))
    body[1] = 1  # the first record's attributes byte, which Kafka's writer leaves 0
    header = parse_header(encode_batch([Record(0, 100, b"k", b"v"), Record(1, 104, b"k", b"w")]))
    header = header._replace(base_timestamp=95, max_timestamp=104)
    rewritten = kept_batch(header, bytes(body), array("q", [0, 1]), None)
    assert decode_batch(rewritten)[1] == [Record(0, 100, b"k", b"v", []), Record(1, 104, b"k", b"w", [])]
    assert rewritten == encode_batch([Record(0, 100, b"k", b"v"), Record(1, 104, b"k", b"w")])


@pytest.mark.parametrize("body, kept, refusal", [
    (encode_record(0, 0, b"k", b"v")[:-1], [0], MalformedRecords),  # the record overruns the bytes
    (encode_record(0, 0, b"k", b"v") * 2, [1, 0], IndexError),  # indexes that do not grow
    (encode_record(0, 0, b"k", b"v") * 2, [2], IndexError),  # past the record count
])
def test_a_rewrite_of_malformed_records_or_indexes_is_refused(body, kept, refusal):
    header = parse_header(encode_batch([Record(0, 0, b"k", b"v"), Record(1, 0, b"k", b"v")]))
    with pytest.raises(refusal):
        kept_batch(header, body, array("q", kept), None)
