"""Message sets of magic v0/v1 (Produce v0-v2), converted to one record batch v2 so the log holds one format.

A message set is `[offset int64, message_size int32, message]` repeated, a message being
`crc uint32 (CRC-32 of magic..end), magic int8, attributes int8, [timestamp int64 if magic 1], key bytes, value bytes`
(bytes: int32 length, -1 for null). A compressed message (attributes bits 0-2 = gzip, snappy or lz4) is a wrapper
whose value holds an inner message set; with magic 1 and the LogAppendTime bit its timestamp overrides the inner
ones. Conversion decodes every message, which is acceptable on this rare path; the v2 batch keeps the wrapper's
codec. Magic 0 with lz4 used a broken frame-header checksum (Kafka 0.8-0.9) that our LZ4 reader rejects: those
sets are refused with UNSUPPORTED_FOR_MESSAGE_FORMAT.
"""

from __future__ import annotations

import struct
import zlib

from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import NO_TIMESTAMP, Record, encode_batch
from odradek.records.compression import GZIP, LZ4, SNAPPY, decompress

_ENTRY = struct.Struct(">qi")  # offset, message_size
_MESSAGE_V0 = struct.Struct(">Ibb")  # crc, magic, attributes
_TIMESTAMP = struct.Struct(">q")
_LENGTH = struct.Struct(">i")
_MIN_MESSAGE_SIZE = _MESSAGE_V0.size + 2 * _LENGTH.size
_LOG_APPEND_TIME_BIT = 0x08


def convert_message_set(data) -> bytes:
    """One v2 batch (base offset 0, CreateTime, no producer id) holding every message of a v0/v1 message set."""
    records: list[Record] = []
    codecs = []
    for magic, attributes, timestamp, key, value in _messages(memoryview(data)):
        codec = attributes & 0x07
        if codec == 0:
            records.append(Record(len(records), timestamp, key, value))
            continue
        if codec not in (GZIP, SNAPPY, LZ4):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Invalid compression codec {codec} in a magic {magic} message")
        if magic == 0 and codec == LZ4:
            raise KafkaError(ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
                             "lz4-compressed magic 0 message sets (Kafka 0.8/0.9 framing) are not supported; "
                             "use Produce v2+ or another codec")
        if value is None:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Compressed wrapper message without a value")
        codecs.append(codec)
        log_append_time = magic == 1 and attributes & _LOG_APPEND_TIME_BIT
        for inner_magic, inner_attributes, inner_timestamp, inner_key, inner_value in _messages(
                memoryview(decompress(codec, value))):
            if inner_magic != magic:
                raise KafkaError(ErrorCode.INVALID_RECORD,
                                 f"Inner message magic {inner_magic} differs from its wrapper's {magic}")
            if inner_attributes & 0x07:
                raise KafkaError(ErrorCode.INVALID_RECORD,
                                 "Compressed outer record should not have an inner record with a compression attribute")
            records.append(Record(len(records), timestamp if log_append_time else inner_timestamp,
                                  inner_key, inner_value))
    if not records:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Empty message set")
    return encode_batch(records, compression=codecs[0] if codecs else 0)


def _messages(view: memoryview):
    """(magic, attributes, timestamp, key, value) of each message of a set, after its framing and CRC checks."""
    pos = 0
    end = len(view)
    while pos < end:
        if end - pos < _ENTRY.size:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Trailing partial message")
        _, size = _ENTRY.unpack_from(view, pos)
        start = pos + _ENTRY.size
        stop = start + size
        if size < _MIN_MESSAGE_SIZE or stop > end:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Message size {size} does not fit the message set")
        crc, magic, attributes = _MESSAGE_V0.unpack_from(view, start)
        if magic not in (0, 1):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Invalid message magic {magic}")
        if zlib.crc32(view[start + 4:stop]) != crc:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Message at byte {pos} fails its CRC")
        field = start + _MESSAGE_V0.size
        timestamp = NO_TIMESTAMP
        if magic == 1:
            if stop - field < _TIMESTAMP.size + 2 * _LENGTH.size:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Magic 1 message too short")
            (timestamp,) = _TIMESTAMP.unpack_from(view, field)
            field += _TIMESTAMP.size
        key, field = _read_bytes(view, field, stop)
        value, field = _read_bytes(view, field, stop)
        if field != stop:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Message size disagrees with its fields")
        yield magic, attributes, timestamp, key, value
        pos = stop


def _read_bytes(view: memoryview, pos: int, stop: int) -> tuple[bytes | None, int]:
    if pos + _LENGTH.size > stop:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Message field overruns its message")
    (length,) = _LENGTH.unpack_from(view, pos)
    pos += _LENGTH.size
    if length < 0:
        return None, pos
    if pos + length > stop:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Message field overruns its message")
    return bytes(view[pos:pos + length]), pos + length
