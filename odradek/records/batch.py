"""Kafka's record batch v2 (magic 2): the unit that producers send, the log stores and consumers fetch.

The broker never re-encodes a batch on the produce or fetch path: it parses the fixed 61-byte header with one
`struct.unpack_from` (`parse_header`), checks framing and CRC (`validate_batches`) and patches offsets, leader epoch
and LogAppendTime timestamps in place (`assign_offsets`), all per batch and without touching the records.
The full codec (`encode_batch`, `decode_batch`, control records) is for the places that need records: tests,
compaction, timestamp lookup and tooling.

Layout (big-endian; offsets into the batch):
  0 baseOffset int64 | 8 batchLength int32 | 12 partitionLeaderEpoch int32 | 16 magic int8 | 17 crc uint32 |
  21 attributes int16 | 23 lastOffsetDelta int32 | 27 baseTimestamp int64 | 35 maxTimestamp int64 |
  43 producerId int64 | 51 producerEpoch int16 | 53 baseSequence int32 | 57 recordCount int32 | 61 records
batchLength counts the bytes after itself; the CRC-32C covers attributes..end so that the broker can rewrite
baseOffset and partitionLeaderEpoch without recomputing it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from typing import NamedTuple

from odradek.errors import ErrorCode, KafkaError
from odradek.records import _batch
from odradek.records._crc32c import value as crc32c
from odradek.records.compression import compress, decompress

BATCH_HEADER_SIZE = 61
LOG_OVERHEAD = 12  # baseOffset + batchLength: the part of a batch not counted in batchLength
MAGIC_OFFSET = 16
STAMPED_BYTES = MAGIC_OFFSET  # base offset, length, leader epoch: all assign_offsets changes of a CreateTime batch
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21
MAX_TIMESTAMP_OFFSET = 35
MAGIC_V2 = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_BIT = 0x08
TRANSACTIONAL_BIT = 0x10
CONTROL_BIT = 0x20
DELETE_HORIZON_BIT = 0x40

NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1

_HEADER = struct.Struct(">qiibIhiqqqhii")
_CRC = struct.Struct(">I")
_ATTRIBUTES = struct.Struct(">h")
_MAX_TIMESTAMP = struct.Struct(">q")
_CONTROL_KEY = struct.Struct(">hh")
_CONTROL_VALUE = struct.Struct(">hi")
assert _HEADER.size == BATCH_HEADER_SIZE


class MalformedRecords(KafkaError):
    """Records that do not parse (raised by records.walk): CORRUPT_MESSAGE, with what was wrong."""

    def __init__(self, message: str):
        super().__init__(ErrorCode.CORRUPT_MESSAGE, message)


class BatchHeader(NamedTuple):
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    # read about ten times for each produced batch: sums in C (records/_batch.c), not a Python frame per read
    size = _batch.FieldSum(1, -1, LOG_OVERHEAD)  # bytes the batch occupies in a log or request, header included
    last_offset = _batch.FieldSum(0, 6, 0)  # base_offset + last_offset_delta

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return 1 if self.attributes & TIMESTAMP_TYPE_BIT else 0

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_BIT)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_BIT)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_BIT)


def parse_header(buf, pos: int = 0) -> BatchHeader:
    """The header of the batch at `pos`; `buf` must hold at least 61 bytes there (struct.error otherwise)."""
    return tuple.__new__(BatchHeader, _HEADER.unpack_from(buf, pos))  # BatchHeader._make costs twice as much


# rebased(header, base_offset, partition_leader_epoch) -> BatchHeader: `header` with a new base offset and leader
# epoch (None: its own), as the log stamps them. stamped(header, base_offset, partition_leader_epoch=None) ->
# (head, BatchHeader): what the log stamps on one batch without LogAppendTime, its first STAMPED_BYTES as they are to
# be written (base offset, length, leader epoch: all before the CRC'd part) and its header after. Both run for
# every produced batch, in C (records/_batch.c): 0.5 us in Python for the two, a namedtuple copied twice.
rebased = _batch.rebased
stamped = _batch.stamped


def whole_batches(data) -> list[tuple[BatchHeader, memoryview]]:
    """Header and bytes of each whole batch at the start of `data`, as a Fetch answer holds them: the answer may end
    in a partial batch (cut at the fetch size), which is left out. A batch of another magic, or one whose length
    cannot be right, raises CORRUPT_MESSAGE."""
    view = memoryview(data)
    end = len(view)
    batches = []
    pos = 0
    while end - pos >= BATCH_HEADER_SIZE:
        magic = view[pos + MAGIC_OFFSET]
        if magic != MAGIC_V2:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Record batch magic {magic} where magic 2 is required")
        header = parse_header(view, pos)
        if header.size < BATCH_HEADER_SIZE:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Record batch length {header.batch_length} is too small")
        if pos + header.size > end:
            break
        batches.append((header, view[pos:pos + header.size]))
        pos += header.size
    return batches


def batch_crc(buf, pos: int, size: int) -> int:
    """CRC-32C of a batch's attributes..end, the value its crc field must hold, read in place (records._crc32c)."""
    with memoryview(buf) as view:
        return crc32c(view[pos + ATTRIBUTES_OFFSET:pos + size])


def validate_batches(data, *, from_leader: bool = False) -> list[BatchHeader]:
    """Headers of the concatenated v2 batches a client produced, after Kafka's per-batch checks.

    Framing and CRC failures raise CORRUPT_MESSAGE, an older magic UNSUPPORTED_FOR_MESSAGE_FORMAT (the caller
    converts v0/v1 message sets with `records.legacy`), inconsistent offsets/counts, control batches and idempotent
    batches without a sequence INVALID_RECORD (Kafka's LogValidator). Records are not decompressed.
    `from_leader`: a follower's copy of its leader's log (Kafka's appendAsFollower checks framing and CRC only): it
    holds what no client may write (the coordinators' markers and sequence-less batches, the cleaner's empty batches),
    so the record count and client-only checks are skipped. The checks run in C (records/_batch.c).
    """
    try:
        return _batch.validate_batches(data, from_leader, BatchHeader)
    except _batch.Refused as refused:
        code, message = refused.args
        raise KafkaError(ErrorCode(code), message) from None


def assign_offsets(buf: bytearray, headers: Sequence[BatchHeader], first_offset: int, *,
                   log_append_time_ms: int | None = None,
                   partition_leader_epoch: int | None = None) -> list[BatchHeader]:
    """Give the batches laid end to end in `buf` dense offsets from `first_offset`, in place; the new headers.
    Each batch's first STAMPED_BYTES are stamped (`stamped`); without `log_append_time_ms` nothing else changes.

    With `log_append_time_ms`, each batch gets the LogAppendTime attribute bit and that maxTimestamp (Kafka's
    `setMaxTimestamp`: baseTimestamp and record deltas stay as the producer wrote them; readers of a LogAppendTime
    batch take maxTimestamp for every record) and its CRC is recomputed. The leader epoch is outside the CRC.
    """
    updated = []
    pos = 0
    next_offset = first_offset
    for header in headers:
        head, header = stamped(header, next_offset, partition_leader_epoch)
        buf[pos:pos + STAMPED_BYTES] = head
        if log_append_time_ms is not None:
            attributes = header.attributes | TIMESTAMP_TYPE_BIT
            _ATTRIBUTES.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
            _MAX_TIMESTAMP.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, log_append_time_ms)
            crc = batch_crc(buf, pos, header.size)
            _CRC.pack_into(buf, pos + CRC_OFFSET, crc)
            header = header._replace(attributes=attributes, max_timestamp=log_append_time_ms, crc=crc)
        updated.append(header)
        next_offset += header.last_offset_delta + 1
        pos += header.size
    return updated


# ---------------------------------------------------------------------------------------------------------------
# Records: the full codec.


class Record(NamedTuple):
    """One record of a batch. `timestamp` is absolute; the absolute offset is the batch's base_offset + offset_delta.
    `decode_batch` gives `headers` as a list."""

    offset_delta: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Sequence[tuple[str, bytes | None]] = ()


def _write_varint(out: bytearray, value: int) -> None:
    """Append Kafka's zigzag varint (varlong when needed) of a signed 64-bit value."""
    unsigned = ((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF
    while unsigned >= 0x80:
        out.append((unsigned & 0x7F) | 0x80)
        unsigned >>= 7
    out.append(unsigned)


def _read_varint(buf, pos: int) -> tuple[int, int]:
    """Decode a zigzag varint at `pos`: (value, position after it)."""
    shift = 0
    unsigned = 0
    while True:
        byte = buf[pos]
        pos += 1
        unsigned |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (unsigned >> 1) ^ -(unsigned & 1), pos
        shift += 7
        if shift > 63:
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Varint longer than 10 bytes")


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        _write_varint(out, -1)
    else:
        _write_varint(out, len(data))
        out += data


def _read_bytes(buf, pos: int) -> tuple[bytes | None, int]:
    length, pos = _read_varint(buf, pos)
    if length < 0:
        return None, pos
    end = pos + length
    if end > len(buf):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Record field overruns its batch")
    return bytes(buf[pos:end]), end


def _encode_record(out: bytearray, record: Record, base_timestamp: int) -> None:
    body = bytearray(b"\x00")  # attributes: unused
    _write_varint(body, record.timestamp - base_timestamp)
    _write_varint(body, record.offset_delta)
    _write_bytes(body, record.key)
    _write_bytes(body, record.value)
    _write_varint(body, len(record.headers))
    for name, value in record.headers:
        _write_bytes(body, name.encode(errors="surrogateescape"))
        _write_bytes(body, value)
    _write_varint(out, len(body))
    out += body


def encode_batch(records: Sequence[Record], *, base_offset: int = 0, compression: int = 0,
                 producer_id: int = -1, producer_epoch: int = -1, base_sequence: int = -1,
                 transactional: bool = False, control: bool = False, timestamp_type: int = 0,
                 partition_leader_epoch: int = -1, last_offset_delta: int | None = None,
                 delete_horizon_ms: int | None = None) -> bytes:
    """A complete v2 batch holding `records`, compressed with codec `compression`.

    `last_offset_delta` defaults to the last record's delta; the cleaner passes the original one so that a batch
    emptied by compaction keeps its offset range. With `delete_horizon_ms`, baseTimestamp holds the horizon and the
    delete-horizon attribute bit is set, as Kafka's cleaner writes it.
    """
    if delete_horizon_ms is not None:
        base_timestamp = delete_horizon_ms
    else:
        base_timestamp = records[0].timestamp if records else NO_TIMESTAMP
    max_timestamp = max((record.timestamp for record in records), default=NO_TIMESTAMP)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset_delta if records else 0
    body = bytearray()
    for record in records:
        _encode_record(body, record, base_timestamp)
    return frame_batch(bytes(body), len(records), base_timestamp, max_timestamp, base_offset=base_offset,
                       compression=compression, producer_id=producer_id, producer_epoch=producer_epoch,
                       base_sequence=base_sequence, transactional=transactional, control=control,
                       timestamp_type=timestamp_type, partition_leader_epoch=partition_leader_epoch,
                       last_offset_delta=last_offset_delta, has_delete_horizon=delete_horizon_ms is not None)


def frame_batch(body: bytes, record_count: int, base_timestamp: int, max_timestamp: int, *, base_offset: int,
                compression: int, producer_id: int, producer_epoch: int, base_sequence: int, transactional: bool,
                control: bool, timestamp_type: int, partition_leader_epoch: int, last_offset_delta: int,
                has_delete_horizon: bool) -> bytes:
    """A complete v2 batch around `record_count` encoded records `body`: compressed with codec `compression`, the
    header written and the CRC computed."""
    payload = compress(compression, body) if compression else body
    attributes = (compression | (TIMESTAMP_TYPE_BIT if timestamp_type else 0)
                  | (TRANSACTIONAL_BIT if transactional else 0) | (CONTROL_BIT if control else 0)
                  | (DELETE_HORIZON_BIT if has_delete_horizon else 0))
    batch = bytearray(BATCH_HEADER_SIZE + len(payload))
    _HEADER.pack_into(batch, 0, base_offset, len(batch) - LOG_OVERHEAD, partition_leader_epoch, MAGIC_V2, 0,
                      attributes, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
                      base_sequence, record_count)
    batch[BATCH_HEADER_SIZE:] = payload
    _CRC.pack_into(batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))
    return bytes(batch)


def decode_batch(buf) -> tuple[BatchHeader, list[Record]]:
    """Header and records of the one batch at the start of `buf`, decompressing them; CORRUPT_MESSAGE if malformed.

    Records of a LogAppendTime batch carry the batch's maxTimestamp, as Kafka's readers report them.
    """
    view = memoryview(buf)
    if len(view) < BATCH_HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Record batch shorter than its header")
    header = parse_header(view)
    if header.magic != MAGIC_V2:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Invalid record batch magic {header.magic}")
    if header.size > len(view) or header.size < BATCH_HEADER_SIZE:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Record batch length does not fit its buffer")
    payload = view[BATCH_HEADER_SIZE:header.size]
    body = decompress(header.compression, payload) if header.compression else payload
    return header, decode_records(header, body)


def decode_records(header: BatchHeader, body) -> list[Record]:
    """The records of a batch with `header` from its decompressed record bytes `body`; CORRUPT_MESSAGE if they
    are not exactly record_count well-formed records (a null header key or a negative header count included, as
    Kafka's reader refuses them). Header keys that are not UTF-8 are kept, byte for byte (surrogateescape, which
    `encode_batch` reverses), as Kafka's broker keeps them."""
    log_append_time = header.timestamp_type == 1
    records = []
    pos = 0
    try:
        for _ in range(header.record_count):
            length, pos = _read_varint(body, pos)
            end = pos + length
            if end > len(body):
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Record overruns its batch")
            pos += 1  # attributes
            timestamp_delta, pos = _read_varint(body, pos)
            offset_delta, pos = _read_varint(body, pos)
            key, pos = _read_bytes(body, pos)
            value, pos = _read_bytes(body, pos)
            header_count, pos = _read_varint(body, pos)
            if header_count < 0:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Found invalid number of record headers {header_count}")
            record_headers = []
            for _ in range(header_count):
                name, pos = _read_bytes(body, pos)
                if name is None:
                    raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Record header with a null key")
                header_value, pos = _read_bytes(body, pos)
                record_headers.append((name.decode(errors="surrogateescape"), header_value))
            if pos != end:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Record length disagrees with its fields")
            timestamp = header.max_timestamp if log_append_time else header.base_timestamp + timestamp_delta
            records.append(Record(offset_delta, timestamp, key, value, record_headers))
    except IndexError as exc:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Malformed record: {exc}") from None
    if pos != len(body):
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Bytes left over after the batch's records")
    return records


# ---------------------------------------------------------------------------------------------------------------
# Control records: transaction markers.

CONTROL_ABORT = 0
CONTROL_COMMIT = 1


def encode_control_batch(producer_id: int, producer_epoch: int, commit: bool, coordinator_epoch: int,
                         timestamp: int, *, base_offset: int = 0, partition_leader_epoch: int = -1) -> bytes:
    """A transaction marker: a transactional control batch of one record (key: version 0 + type, value: version 0 +
    coordinator epoch)."""
    key = _CONTROL_KEY.pack(0, CONTROL_COMMIT if commit else CONTROL_ABORT)
    value = _CONTROL_VALUE.pack(0, coordinator_epoch)
    return encode_batch([Record(0, timestamp, key, value)], base_offset=base_offset, producer_id=producer_id,
                        producer_epoch=producer_epoch, transactional=True, control=True,
                        partition_leader_epoch=partition_leader_epoch)


def decode_control_record(record: Record) -> tuple[int, int]:
    """(type, coordinator epoch) of a control record: type CONTROL_ABORT or CONTROL_COMMIT."""
    if record.key is None or len(record.key) < _CONTROL_KEY.size:
        raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "Control record key too short")
    _, control_type = _CONTROL_KEY.unpack_from(record.key)
    coordinator_epoch = -1
    if record.value is not None and len(record.value) >= _CONTROL_VALUE.size:
        _, coordinator_epoch = _CONTROL_VALUE.unpack_from(record.value)
    return control_type, coordinator_epoch


def is_abort_marker(records: Sequence[Record]) -> bool:
    """Whether a control batch's records are an ABORT marker (an empty control batch, left by compaction, is not)."""
    return bool(records) and decode_control_record(records[0])[0] == CONTROL_ABORT


def committed_batches(batches: Iterable[tuple[BatchHeader, memoryview]],
                      aborted_transactions: Iterable) -> Iterator[tuple[BatchHeader, memoryview]]:
    """The batches a read_committed consumer sees, as Kafka's Java consumer decides: no control batches, none of an
    aborted transaction. Each aborted transaction is listed (a Fetch answer's or the transaction index's entries,
    with `producer_id` and `first_offset`) from its first offset; it ends at that producer's abort marker."""
    aborted = sorted(aborted_transactions, key=lambda entry: entry.first_offset)
    aborting: set[int] = set()
    for header, batch in batches:
        if header.producer_id >= 0:
            while aborted and aborted[0].first_offset <= header.last_offset:
                aborting.add(aborted.pop(0).producer_id)
            if header.is_control and is_abort_marker(decode_batch(batch)[1]):
                aborting.discard(header.producer_id)
            elif header.is_transactional and header.producer_id in aborting:
                continue
        if not header.is_control:
            yield header, batch
