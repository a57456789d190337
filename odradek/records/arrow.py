"""Record batches v2 to Arrow columns in bulk: how a reader hands a fetch's worth of records to a columnar engine.

`decode_batch` builds one Python object per record, which is what tools and tests want but costs more than the rest
of a columnar read put together. Here the batch headers are parsed (`batch.parse_header`) and payloads decompressed
(`compression.decompress`) once per batch, and records.walk (the C walker) locates every field of every record of
the concatenated record bytes in one call, as int64 columns that numpy takes without a copy. Keys, values and header
values become Arrow binary arrays by taking every other element of one array whose offsets alternate between field
starts and field ends (Arrow's take copies the bytes in C), so no field is ever a Python object.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import accumulate
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import BATCH_HEADER_SIZE, BatchHeader, MalformedRecords
from odradek.records.compression import decompress
from odradek.records.walk import HeaderFields, record_fields

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))


class RecordColumns(NamedTuple):
    """The records of some batches as columns, in log order. `headers` is None unless asked for; a record without
    headers has a null list there (as Spark's Kafka source shows it)."""

    offsets: np.ndarray  # int64
    timestamps: np.ndarray  # int64 milliseconds: CreateTime per record, or the batch's LogAppendTime
    timestamp_types: np.ndarray  # int32: 0 CreateTime, 1 LogAppendTime
    keys: pa.BinaryArray
    values: pa.BinaryArray
    headers: pa.ListArray | None


def batches_to_columns(batches: Sequence[tuple[BatchHeader, memoryview]], *, include_headers: bool,
                       start: int = -2**63, end: int = 2**63 - 1) -> RecordColumns:
    """The records with offsets in [start, end) of `batches` (each a parsed header and the batch's bytes).

    Every record of every batch is checked for fitting its batch and its fields (headers included) for fitting
    their record; a malformed batch raises KafkaError(CORRUPT_MESSAGE), as `decode_batch` does. Control batches are
    decoded like any other: leaving them out (as consumers must) is the caller's choice.
    """
    bodies, counts = [], []
    for header, batch in batches:
        if header.size < BATCH_HEADER_SIZE or len(batch) < header.size:
            raise _corrupt("Record batch length does not fit its buffer")
        payload = batch[BATCH_HEADER_SIZE:header.size]
        bodies.append(decompress(header.compression, payload) if header.compression else payload)
        counts.append(header.record_count)
    data = b"".join(bodies)
    try:
        fields, header_fields = record_fields(data, list(accumulate(map(len, bodies))), counts,
                                              with_headers=include_headers)
    except MalformedRecords as exc:
        raise _corrupt(exc.message) from None
    (timestamp_deltas, offset_deltas, key_starts, key_lengths, value_starts, value_lengths,
     header_counts) = map(np.asarray, fields)
    if header_fields is not None:
        header_fields = HeaderFields(*map(np.asarray, header_fields))
    batch_of = np.repeat(np.arange(len(counts)), counts)

    base_offsets = np.array([header.base_offset for header, _ in batches], np.int64)
    offsets = base_offsets[batch_of] + offset_deltas
    wanted = (offsets >= start) & (offsets < end)
    if not wanted.all():
        if header_fields is not None:
            wanted_headers = np.repeat(wanted, header_counts)
            header_fields = HeaderFields(*(column[wanted_headers] for column in header_fields))
        kept = np.flatnonzero(wanted)
        batch_of, offsets, timestamp_deltas, header_counts = (
            batch_of[kept], offsets[kept], timestamp_deltas[kept], header_counts[kept])
        key_starts, key_lengths, value_starts, value_lengths = (
            key_starts[kept], key_lengths[kept], value_starts[kept], value_lengths[kept])

    log_append_time = np.array([header.timestamp_type for header, _ in batches], np.int32)
    base_timestamps = np.array([header.base_timestamp for header, _ in batches], np.int64)
    max_timestamps = np.array([header.max_timestamp for header, _ in batches], np.int64)
    timestamp_types = log_append_time[batch_of]
    timestamps = np.where(timestamp_types == 1, max_timestamps[batch_of], base_timestamps[batch_of] + timestamp_deltas)

    data_buffer = pa.py_buffer(data)
    headers = None if header_fields is None else _headers(data_buffer, header_fields, header_counts)
    return RecordColumns(offsets, timestamps, timestamp_types, _binary(data_buffer, key_starts, key_lengths),
                         _binary(data_buffer, value_starts, value_lengths), headers)


def _binary(data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray) -> pa.Array:
    """A binary array of the fields at `starts` with `lengths` in `data`; a negative length is null.

    The fields lie in increasing order with gaps between them, so one array whose offsets alternate start, end,
    start, end ... holds each field at an even index and each gap at an odd one; taking the even ones copies the
    fields into a fresh contiguous array in Arrow's C++."""
    count = len(starts)
    present = lengths >= 0
    bounds = np.empty(2 * count + 1, np.int64)
    bounds[0:2 * count:2] = starts
    bounds[1:2 * count:2] = starts + np.where(present, lengths, 0)
    bounds[2 * count] = bounds[2 * count - 1] if count else 0
    if count and bounds[-1] > np.iinfo(np.int32).max:
        raise _corrupt("Records past 2 GiB in one decode")  # callers decode a fetch response at a time
    interleaved = pa.Array.from_buffers(pa.binary(), 2 * count, [None, pa.py_buffer(bounds.astype(np.int32)), data])
    fields = interleaved.take(pa.array(np.arange(0, 2 * count, 2)))
    validity = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), count, [validity, fields.buffers()[1], fields.buffers()[2]])


def _headers(data: pa.Buffer, headers: HeaderFields, counts: np.ndarray) -> pa.ListArray:
    """The headers of records with `counts` headers each, located by `walk.record_fields` (as numpy arrays), as
    one list array."""
    list_offsets = np.zeros(len(counts) + 1, np.int32)
    np.cumsum(counts, out=list_offsets[1:])
    keys = _binary(data, headers.key_starts, headers.key_lengths)
    try:
        keys = keys.cast(pa.string())  # checks the UTF-8 without copying
    except pa.ArrowInvalid:  # the broker takes any bytes, as Kafka does; Java's consumer decodes them with U+FFFD
        keys = pa.array([None if key is None else key.decode("utf-8", "replace") for key in keys.to_pylist()],
                        pa.string())
    entries = pa.StructArray.from_arrays([keys, _binary(data, headers.value_starts, headers.value_lengths)],
                                         fields=list(HEADERS_TYPE.value_type))
    has_headers = counts > 0
    validity = None if has_headers.all() else pa.py_buffer(np.packbits(has_headers, bitorder="little"))
    return pa.Array.from_buffers(HEADERS_TYPE, len(counts),
                                 [validity, pa.py_buffer(list_offsets)], children=[entries])


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)
