"""records.arrow: record batches to Arrow columns in bulk, checked against decode_batch on the same bytes (every
codec, real clients' batches, headers, nulls, control batches, offset bounds) and on corrupted bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from odradek.errors import ErrorCode, KafkaError
from odradek.records.arrow import batches_to_columns
from odradek.records.batch import (
    Record, decode_batch, encode_batch, encode_control_batch, parse_header, whole_batches,
)
from odradek.records.compression import GZIP, LZ4, NONE, SNAPPY, ZSTD

from .test_batch import kafka_python_batch, records_strategy

BASE_TS = 1_700_000_000_000
CODECS = [NONE, GZIP, SNAPPY, LZ4, ZSTD]


def expected_rows(batches: list[bytes], start: int = -2**63, end: int = 2**63 - 1) -> list[tuple]:
    """What decode_batch makes of the batches, as rows of (offset, timestamp, type, key, value, headers or None),
    header keys as Java reads them (decode_batch keeps bytes that are not UTF-8 as surrogates; Java has U+FFFD)."""
    rows = []
    for batch in batches:
        header, records = decode_batch(batch)
        for record in records:
            offset = header.base_offset + record.offset_delta
            if start <= offset < end:
                rows.append((offset, record.timestamp, header.timestamp_type, record.key, record.value,
                             [(java_string(key), value) for key, value in record.headers] or None))
    return rows


def java_string(text: str) -> str:
    return text.encode(errors="surrogateescape").decode(errors="replace")


def columns_rows(batches: list[bytes], **bounds) -> list[tuple]:
    columns = batches_to_columns(whole_batches(b"".join(batches)), include_headers=True, **bounds)
    headers = [None if entries is None else [(entry["key"], entry["value"]) for entry in entries]
               for entries in columns.headers.to_pylist()]
    return list(zip(columns.offsets.tolist(), columns.timestamps.tolist(), columns.timestamp_types.tolist(),
                    columns.keys.to_pylist(), columns.values.to_pylist(), headers))


def varied_records(count: int, *, first_delta: int = 0, delta_step: int = 1) -> list[Record]:
    """Null and empty keys and values, sizes across the one-, two- and three-byte length varints, headers or none."""
    sizes = [0, 1, 12, 13, 63, 64, 100, 8191, 8192, 70_000]
    records = []
    for index in range(count):
        key = None if index % 5 == 0 else b"k%d" % index
        value = None if index % 7 == 3 else bytes([index % 256]) * sizes[index % len(sizes)]
        headers = [(f"h{j}-é", None if j == 1 else b"v%d" % j) for j in range(index % 4)]
        records.append(Record(first_delta + index * delta_step, BASE_TS + index * 37 - 5000, key, value, headers))
    return records


def equal_sized_runs() -> list[Record]:
    """Long runs of records of one size (which the decoder jumps over), broken by odd ones, with the offset
    delta's varint growing a byte at 64 and the timestamp delta's at 64 ms, as producers' batches have them."""
    odd_sizes = {90: 7, 91: 7, 200: 7, 300: 164}  # 164: a length varint whose first byte is the 100's
    values = [b"v" * odd_sizes.get(index, 100) for index in range(400)]
    return [Record(index, BASE_TS + index // 3, None, value) for index, value in enumerate(values)]


@pytest.mark.parametrize("codec", [NONE, LZ4])
def test_runs_of_equal_sized_records_match_decode_batch(codec):
    batches = [encode_batch(equal_sized_runs(), base_offset=0, compression=codec),
               encode_batch(equal_sized_runs()[:100], base_offset=400, compression=codec),
               encode_batch(varied_records(40), base_offset=500, compression=codec)]
    rows = columns_rows(batches)
    assert [row[0] for row in rows] == list(range(540)) and rows == expected_rows(batches)


@pytest.mark.parametrize("codec", CODECS)
def test_every_codec_matches_decode_batch(codec):
    batches = [encode_batch(varied_records(30), base_offset=100, compression=codec),
               encode_batch(varied_records(5, delta_step=3), base_offset=200, compression=codec, timestamp_type=1)]
    assert columns_rows(batches) == expected_rows(batches)
    assert {row[2] for row in columns_rows(batches)} == {0, 1}  # LogAppendTime rows carry the batch's maxTimestamp


@pytest.mark.parametrize("codec", CODECS)
def test_real_client_batches_match_decode_batch(codec):
    batch = kafka_python_batch(codec, count=50)  # xerial snappy, lz4 frames, headers with a null value
    assert columns_rows([batch]) == expected_rows([batch])


def test_offset_bounds_cut_inside_batches():
    batches = [encode_batch(varied_records(20), base_offset=0), encode_batch(varied_records(20), base_offset=20,
                                                                              compression=LZ4)]
    rows = columns_rows(batches, start=7, end=33)
    assert [row[0] for row in rows] == list(range(7, 33))
    assert rows == expected_rows(batches, 7, 33)
    assert columns_rows(batches, start=50) == []


def test_compacted_offsets_and_empty_batches():
    """Offset gaps inside a batch, and a batch emptied by compaction, decode to exactly the surviving records."""
    gappy = encode_batch(varied_records(10, first_delta=2, delta_step=5), base_offset=1000, last_offset_delta=60)
    empty = encode_batch([], base_offset=1061, last_offset_delta=9)
    rows = columns_rows([gappy, empty])
    assert [row[0] for row in rows] == [1002 + 5 * i for i in range(10)] and rows == expected_rows([gappy, empty])


def test_control_batches_decode_like_any_batch():
    marker = encode_control_batch(producer_id=7, producer_epoch=0, commit=True, coordinator_epoch=3,
                                  timestamp=BASE_TS, base_offset=9)
    assert columns_rows([marker]) == expected_rows([marker]) and len(columns_rows([marker])) == 1


def test_headers_left_out_unless_asked_and_null_lists_for_records_without():
    batch = encode_batch(varied_records(8))
    without = batches_to_columns(whole_batches(batch), include_headers=False)
    assert without.headers is None and without.values.to_pylist() == [row[4] for row in expected_rows([batch])]
    with_headers = batches_to_columns(whole_batches(batch), include_headers=True)
    assert with_headers.headers.null_count == sum(1 for i in range(8) if i % 4 == 0)


def test_header_keys_that_are_not_utf8_read_as_javas_consumer_reads_them():
    """The broker takes any header key bytes, as Kafka does; Spark's Kafka source (Java) decodes them with U+FFFD
    for what is not UTF-8, so a topic holding one still reads instead of failing the task."""
    batch = encode_batch([Record(0, BASE_TS, b"k", b"v", [("ok", b"1"), ("bad\udcff", b"2")]),
                          Record(1, BASE_TS, b"k", b"v", [("fine", None)])])
    columns = batches_to_columns(whole_batches(batch), include_headers=True)
    assert columns.headers.to_pylist() == [[{"key": "ok", "value": b"1"}, {"key": "bad\ufffd", "value": b"2"}],
                                           [{"key": "fine", "value": None}]]


def test_whole_batches_leave_out_a_partial_tail_and_refuse_other_magics():
    batches = [encode_batch(varied_records(3), base_offset=0), encode_batch(varied_records(3), base_offset=3)]
    data = b"".join(batches)
    assert [header.base_offset for header, _ in whole_batches(data[:-1])] == [0]
    assert whole_batches(data[:len(batches[0]) - 1]) == [] and whole_batches(data[:30]) == []
    assert [bytes(batch) for _, batch in whole_batches(data)] == batches
    legacy = bytearray(batches[0])
    legacy[16] = 1
    with pytest.raises(KafkaError) as info:
        whole_batches(bytes(legacy))
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


@pytest.mark.parametrize("mutate", [
    lambda b: b[:-1],  # the last record cut short: the batch length no longer covers it
    lambda b: b[:57] + (int.from_bytes(b[57:61], "big") + 1).to_bytes(4, "big") + b[61:],  # one record too many
    lambda b: b[:57] + (int.from_bytes(b[57:61], "big") - 1).to_bytes(4, "big") + b[61:],  # one too few
], ids=["truncated", "count-high", "count-low"])
def test_malformed_batches_are_corrupt_messages(mutate):
    batch = mutate(encode_batch(varied_records(6)))
    header = parse_header(batch)
    with pytest.raises(KafkaError) as info:
        batches_to_columns([(header._replace(batch_length=len(batch) - 12), memoryview(batch))], include_headers=True)
    assert info.value.code == ErrorCode.CORRUPT_MESSAGE


@settings(max_examples=200, deadline=None)
@given(records_strategy, st.sampled_from(CODECS), st.integers(0, 2**40))
def test_any_records_match_decode_batch(specs, codec, base_offset):
    records = [Record(delta, timestamp, key, value, headers)
               for delta, (timestamp, key, value, headers) in enumerate(specs)]
    batch = encode_batch(records, base_offset=base_offset, compression=codec)
    assert columns_rows([batch]) == expected_rows([batch])


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_damaged_bytes_are_corrupt_or_decode_as_decode_batch_does(data):
    """Any byte of the records overwritten: either both decoders agree, or ours refuses with CORRUPT_MESSAGE."""
    batch = bytearray(encode_batch(data.draw(st.sampled_from([varied_records(5), equal_sized_runs()[:150]]))))
    for _ in range(data.draw(st.integers(1, 3))):
        batch[data.draw(st.integers(61, len(batch) - 1))] = data.draw(st.integers(0, 255))
    try:
        rows = columns_rows([bytes(batch)])
    except KafkaError as exc:
        assert exc.code == ErrorCode.CORRUPT_MESSAGE
        return
    assert rows == expected_rows([bytes(batch)])
