"""Magic v0/v1 message sets (Produce v0-v2) converted to one v2 batch."""

from __future__ import annotations

import struct
import zlib

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import decode_batch, validate_batches
from odradek.records.compression import SNAPPY, compress
from odradek.records.legacy import convert_message_set


def kafka_python_set(magic: int, compression: int, count: int = 4) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=compression, batch_size=1 << 20)
    for index in range(count):
        builder.append(index, timestamp=2_000 + index if magic else None,
                       key=b"key-%d" % index if index % 2 else None, value=b"value-%d" % index)
    return bytes(builder.build())


def hand_message(magic: int, attributes: int, key: bytes | None, value: bytes | None, timestamp: int = 0,
                 offset: int = 0) -> bytes:
    body = struct.pack(">bb", magic, attributes) + (struct.pack(">q", timestamp) if magic else b"")
    for field in (key, value):
        body += struct.pack(">i", -1) if field is None else struct.pack(">i", len(field)) + field
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", offset, len(message)) + message


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("compression", [0, 1])
def test_kafka_python_message_sets(magic, compression):
    batch = convert_message_set(kafka_python_set(magic, compression))
    [header] = validate_batches(batch)
    _, records = decode_batch(batch)
    assert header.record_count == 4 and header.compression == compression
    assert [record.offset_delta for record in records] == [0, 1, 2, 3]
    assert [record.value for record in records] == [b"value-%d" % index for index in range(4)]
    assert [record.key for record in records] == [None, b"key-1", None, b"key-3"]
    expected_timestamps = [2_000 + index for index in range(4)] if magic else [-1] * 4
    assert [record.timestamp for record in records] == expected_timestamps


def test_snappy_wrapper_with_log_append_time_timestamp():
    inner = hand_message(1, 0, None, b"a", 10, 0) + hand_message(1, 0, b"k", b"b", 11, 1)
    wrapper = hand_message(1, SNAPPY | 0x08, None, compress(SNAPPY, inner), timestamp=999, offset=1)
    _, records = decode_batch(convert_message_set(wrapper))
    assert [(record.key, record.value, record.timestamp) for record in records] == [(None, b"a", 999), (b"k", b"b", 999)]


@pytest.mark.parametrize("data, code", [
    (hand_message(0, 3, None, b"old lz4 framing"), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    (hand_message(1, 0, None, b"x")[:-1], ErrorCode.CORRUPT_MESSAGE),
    (hand_message(1, 0, None, b"x")[:-1] + b"y", ErrorCode.CORRUPT_MESSAGE),  # CRC
    (hand_message(1, 1, None, b"not gzip"), ErrorCode.CORRUPT_MESSAGE),
    (hand_message(1, 1, None, compress(1, hand_message(0, 0, None, b"x"))), ErrorCode.INVALID_RECORD),
    (b"", ErrorCode.CORRUPT_MESSAGE),
])
def test_rejects(data, code):
    with pytest.raises(KafkaError) as info:
        convert_message_set(data)
    assert info.value.code == code
