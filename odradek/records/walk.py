"""The records of v2 batches walked and checked in C (the records._walk extension): the one record walker that
produce-time validation (records.validation), columnar reads (records.arrow) and the cleaner (its map, its
decisions and its rewritten batches: `kept_batch`) share.

A record's fields cannot be found without reading the varints before them, so any walk is a loop over records; in
Python or numpy that loop (or numpy's fixed cost per column) was most of what checking a produced batch cost. The
extension reads each record once, checks every length and varint against the bytes as Kafka's record reader does,
makes no Python object per record and releases the GIL while it reads. This module is its Python face: its answers
as named tuples, its ValueError as batch.MalformedRecords (CORRUPT_MESSAGE; a caller with another contract, as
Produce's INVALID_RECORD, catches it and says so). No numpy here: the broker imports this at start, and a column
(a memoryview of int64) becomes a numpy array without a copy where a caller wants one.

Record layout (after its length varint): attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headerCount varint | (keyLength, key, valueLength, value)*
Lengths are zigzag varints; -1 (any negative) is a null key or value; a header key may not be null.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from typing import NamedTuple

from odradek.records import _walk
from odradek.records.batch import BatchHeader, MalformedRecords, frame_batch

MIN_RECORD_BYTES = _walk.MIN_RECORD_BYTES  # a count the bytes cannot hold is refused before any record is read


class Faults(NamedTuple):
    """Records that parse but a topic refuses: how many have no key, the first of them (indexes in the batch), and
    the first with a timestamp out of range (index, timestamp)."""

    keyless_count: int
    keyless: list[int]
    bad_timestamps: list[tuple[int, int]]


class RecordFields(NamedTuple):
    """Where the fields of some records lie in the bytes they were walked in (int64 columns, one entry per record).
    A negative key or value length is a null."""

    timestamp_deltas: memoryview
    offset_deltas: memoryview
    key_starts: memoryview
    key_lengths: memoryview
    value_starts: memoryview
    value_lengths: memoryview
    header_counts: memoryview


class HeaderFields(NamedTuple):
    """Where the headers of some records lie (int64 columns, one entry per header, record by record in order)."""

    key_starts: memoryview
    key_lengths: memoryview
    value_starts: memoryview
    value_lengths: memoryview


def check_records(body, count: int, base_timestamp: int, *, keys_required: bool,
                  create_time_range: tuple[int, int] | None, max_errors: int) -> Faults | None:
    """Walk the `count` records of one batch (`body`: its decompressed record bytes) with Kafka's produce-time
    checks. MalformedRecords unless they are exactly `count` well-formed records with offset deltas 0 to count - 1;
    else None, or the Faults (at most `max_errors` of each kind listed) of records without a key (if
    `keys_required`) or with a timestamp other than -1 outside `create_time_range` (earliest, latest; inclusive)."""
    earliest, latest = create_time_range or (0, 0)
    try:
        faults = _walk.check_records(body, count, base_timestamp, keys_required, create_time_range is not None,
                                     earliest, latest, max_errors)
    except ValueError as exc:
        raise MalformedRecords(str(exc)) from None
    return None if faults is None else Faults(*faults)


def record_fields(data, ends: Sequence[int], counts: Sequence[int], *,
                  with_headers: bool) -> tuple[RecordFields, HeaderFields | None]:
    """The fields of the records of batches laid end to end in `data` (batch i's records end at ends[i] and are
    counts[i]), and with `with_headers` those of their headers. MalformedRecords unless every batch is exactly
    its count of well-formed records."""
    try:
        records, headers = _walk.record_fields(data, array("q", ends), array("q", counts), with_headers)
    except ValueError as exc:
        raise MalformedRecords(str(exc)) from None
    return (RecordFields(*_columns(records, len(RecordFields._fields))),
            None if headers is None else HeaderFields(*_columns(headers, len(HeaderFields._fields))))


def _columns(raw: bytes, count: int) -> list[memoryview]:
    """`raw` cut into `count` int64 columns of one length."""
    values = memoryview(raw).cast("q")
    length = len(values) // count
    return [values[index * length:(index + 1) * length] for index in range(count)]


def kept_batch(header: BatchHeader, body, kept: Sequence[int], delete_horizon_ms: int | None) -> bytes:
    """The batch `header` frames holding only its records at indexes `kept` (growing; `body`: its decompressed
    record bytes), as `encode_batch` writes those records: the same offsets, timestamps, keys, values and headers,
    baseTimestamp the first kept record's or `delete_horizon_ms`, compressed with the batch's codec. What the
    cleaner writes for a batch that loses records; the records are copied in C, never decoded into objects."""
    try:
        records, base_timestamp, max_timestamp = _walk.kept_records(
            body, header.record_count, kept, header.base_timestamp, header.max_timestamp,
            header.timestamp_type == 1, delete_horizon_ms)
    except ValueError as exc:
        raise MalformedRecords(str(exc)) from None
    return frame_batch(records, len(kept), base_timestamp, max_timestamp, base_offset=header.base_offset,
                       compression=header.compression, producer_id=header.producer_id,
                       producer_epoch=header.producer_epoch, base_sequence=header.base_sequence,
                       transactional=header.is_transactional, control=header.is_control,
                       timestamp_type=header.timestamp_type, partition_leader_epoch=header.partition_leader_epoch,
                       last_offset_delta=header.last_offset_delta, has_delete_horizon=delete_horizon_ms is not None)
