"""Record batches v2 to Arrow columns in bulk: how a reader hands a fetch's worth of records to a columnar engine.

`decode_batch` builds one Python object per record, which is what tools and tests want but costs more than the rest
of a columnar read put together. Here the batch headers are parsed (`batch.parse_header`) and payloads decompressed
(`compression.decompress`) once per batch, the only per-record Python work is one walk over the record-length
varints to find where each record starts (jumping over runs of equal-sized records), and every other field is
decoded for all records at once with numpy gathers over the concatenated record bytes. Keys, values and header
values become Arrow binary arrays by taking every other element of one array whose offsets alternate between field
starts and field ends (Arrow's take copies the bytes in C), so no field is ever a Python object.

Record layout (after its length varint): attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headerCount varint | (keyLength, key, valueLength, value)*
Lengths are zigzag varints; -1 is a null key or value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.errors import ProtocolError
from odradek.protocol.varint import read_uvarint
from odradek.records.batch import BATCH_HEADER_SIZE, BatchHeader
from odradek.records.compression import decompress

HEADERS_TYPE = pa.list_(pa.field("element", pa.struct([("key", pa.string()), ("value", pa.binary())])))
VARINT_BYTES = 5  # a zigzag varint of an int32
VARLONG_BYTES = 10  # of an int64
_PADDING = bytes(VARLONG_BYTES)  # vectorised reads may look this far past a truncated last record
_MIN_RUN = 32  # equal-sized records worth a jump: a check costs about as much as walking this many
_MAX_BACKOFF = 1024  # plain steps between checks, at most, where sizes keep changing


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

    Every record of every batch is checked for fitting its batch and its fields for fitting their record (the
    headers of records outside [start, end) are not decoded, so not checked);
    a malformed batch raises KafkaError(CORRUPT_MESSAGE), as `decode_batch` does. Control batches are decoded like
    any other: leaving them out (as consumers must) is the caller's choice.
    """
    bodies, counts = [], []
    for header, batch in batches:
        if header.size < BATCH_HEADER_SIZE or len(batch) < header.size:
            raise _corrupt("Record batch length does not fit its buffer")
        payload = batch[BATCH_HEADER_SIZE:header.size]
        bodies.append(decompress(header.compression, payload) if header.compression else payload)
        counts.append(header.record_count)
    data = b"".join(bodies + [_PADDING])
    body_ends = np.cumsum([len(body) for body in bodies], dtype=np.int64)
    buffer = np.frombuffer(data, np.uint8)
    begins = _record_begins(data, buffer, counts, body_ends.tolist())

    lengths, position = _varints(buffer, begins, VARINT_BYTES)
    record_ends = position + lengths
    batch_of = np.repeat(np.arange(len(counts)), counts)
    timestamp_deltas, position = _varints(buffer, position + 1, VARLONG_BYTES)  # + 1: the attributes byte
    offset_deltas, position = _varints(buffer, position, VARINT_BYTES)
    key_lengths, key_starts = _varints(buffer, position, VARINT_BYTES)
    value_lengths, value_starts = _varints(buffer, key_starts + np.maximum(key_lengths, 0), VARINT_BYTES)
    header_counts, position = _varints(buffer, value_starts + np.maximum(value_lengths, 0), VARINT_BYTES)
    fits = (position <= record_ends) & (header_counts >= 0) & (2 * header_counts <= record_ends - position)
    if not fits.all():  # (each header takes at least two bytes)
        raise _corrupt("Record fields overrun their record")

    base_offsets = np.array([header.base_offset for header, _ in batches], np.int64)
    offsets = base_offsets[batch_of] + offset_deltas
    wanted = (offsets >= start) & (offsets < end)
    if not wanted.all():
        kept = np.flatnonzero(wanted)
        batch_of, offsets, timestamp_deltas, header_counts = (
            batch_of[kept], offsets[kept], timestamp_deltas[kept], header_counts[kept])
        key_starts, key_lengths, value_starts, value_lengths = (
            key_starts[kept], key_lengths[kept], value_starts[kept], value_lengths[kept])
        position, record_ends = position[kept], record_ends[kept]

    log_append_time = np.array([header.timestamp_type for header, _ in batches], np.int32)
    base_timestamps = np.array([header.base_timestamp for header, _ in batches], np.int64)
    max_timestamps = np.array([header.max_timestamp for header, _ in batches], np.int64)
    timestamp_types = log_append_time[batch_of]
    timestamps = np.where(timestamp_types == 1, max_timestamps[batch_of], base_timestamps[batch_of] + timestamp_deltas)

    data_buffer = pa.py_buffer(data)
    headers = None
    if include_headers:
        headers = _headers(buffer, data_buffer, position, header_counts, record_ends)
    elif ((position != record_ends) & (header_counts == 0)).any():  # records with headers end inside them
        raise _corrupt("Record length disagrees with its fields")
    return RecordColumns(offsets, timestamps, timestamp_types, _binary(data_buffer, key_starts, key_lengths),
                         _binary(data_buffer, value_starts, value_lengths), headers)


def _record_begins(data: bytes, buffer: np.ndarray, counts: list[int], body_ends: list[int]) -> np.ndarray:
    """Where each record (its length varint) starts in `data`: a walk over the record-length varints that jumps over
    runs of equal-sized records.

    Records of one size come in long runs (fixed-size payloads; the varint deltas before them change width only at
    64 and 8192), so after reading a record's length the walk checks, for all the records that could follow at its
    size, whether each repeats its length varint byte for byte: every one that does has the same size, so the next
    one starts a size further on (by induction from the record just read), and the walk jumps to the first that does
    not. Each check looks twice as far as the last run reached; one that finds no run worth the jump backs off (the
    next comes after twice as many plain steps), so records of scattered sizes cost about a plain walk. Lengths of up
    to two varint bytes (records under 8 KiB) are read inline, and only those are jumped over."""
    pieces = []
    begins: list[int] = []
    append = begins.append
    position = 0
    steps_until_check = 0
    backoff = 1
    window = 2 * _MIN_RUN
    try:
        for count, body_end in zip(counts, body_ends):
            left = count
            while left:
                append(position)
                left -= 1
                raw = data[position]
                if raw < 0x80:
                    width = 1
                else:
                    second = data[position + 1]
                    if second >= 0x80:
                        raw, after = read_uvarint(data, position, VARINT_BYTES)
                        position = after + ((raw >> 1) ^ -(raw & 1))
                        continue
                    raw = (raw & 0x7F) | (second << 7)
                    width = 2
                size = width + ((raw >> 1) ^ -(raw & 1))
                start, position = position, position + size
                if steps_until_check:
                    steps_until_check -= 1
                    continue
                candidates = min(left, window, (body_end - position) // size) if size > 0 else 0
                if candidates < _MIN_RUN:
                    continue
                following = np.arange(position, position + candidates * size, size, dtype=np.int64)
                same = buffer[following] == data[start]
                if width == 2:
                    same &= buffer[following + 1] == data[start + 1]
                run = candidates if same.all() else int(same.argmin())
                if run < _MIN_RUN:
                    steps_until_check, backoff, window = backoff, min(2 * backoff, _MAX_BACKOFF), 2 * _MIN_RUN
                    continue
                backoff, window = 1, 2 * run
                pieces += [np.array(begins, np.int64), following[:run]]
                begins.clear()
                position += run * size
                left -= run
            if position != body_end:
                raise _corrupt("Records disagree with their batch's length or count")
    except (IndexError, ProtocolError):
        raise _corrupt("Record overruns its batch or has a length varint longer than 5 bytes") from None
    return np.concatenate(pieces + [np.array(begins, np.int64)])


def _varints(buffer: np.ndarray, positions: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints starting at `positions` (int64), decoded together: (values int64, positions after them).

    One gather per varint byte, over only the varints still unfinished after the bytes before it."""
    try:
        first = buffer[positions]
    except IndexError:
        raise _corrupt("Record field overruns its batch") from None
    raw = (first & 0x7F).astype(np.uint64)
    after = positions + 1
    unfinished = np.flatnonzero(first >= 0x80)
    for index in range(1, max_bytes):
        if not len(unfinished):
            break
        byte = buffer[positions[unfinished] + index]  # within the padding: the first byte was in the buffer
        raw[unfinished] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * index)
        after[unfinished] += 1
        unfinished = unfinished[byte >= 0x80]
    else:
        if len(unfinished):
            raise _corrupt(f"Varint longer than {max_bytes} bytes")
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, after


def _binary(data: pa.Buffer, starts: np.ndarray, lengths: np.ndarray, *, string: bool = False) -> pa.Array:
    """A binary (or string) array of the fields at `starts` with `lengths` in `data`; a negative length is null.

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
    taken = pa.Array.from_buffers(pa.string() if string else pa.binary(), count,
                                  [validity, fields.buffers()[1], fields.buffers()[2]])
    if string:
        taken.validate(full=True)  # UTF-8
    return taken


def _headers(buffer: np.ndarray, data: pa.Buffer, positions: np.ndarray, counts: np.ndarray,
             record_ends: np.ndarray) -> pa.ListArray:
    """The headers of records whose header lists start at `positions`, `counts` each, decoded one header index at a
    time across all records that have that many; each record's last header must end where the record does."""
    list_offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=list_offsets[1:])
    total = int(list_offsets[-1])
    key_starts, key_lengths, value_starts, value_lengths = (np.empty(total, np.int64) for _ in range(4))
    positions = positions.copy()
    record_of = np.flatnonzero(counts > 0)
    index = 0
    while len(record_of):
        slots = list_offsets[record_of] + index
        key_lengths[slots], key_starts[slots] = _varints(buffer, positions[record_of], VARINT_BYTES)
        value_lengths[slots], value_starts[slots] = _varints(
            buffer, key_starts[slots] + np.maximum(key_lengths[slots], 0), VARINT_BYTES)
        positions[record_of] = value_starts[slots] + np.maximum(value_lengths[slots], 0)
        if (positions[record_of] > record_ends[record_of]).any():
            raise _corrupt("Record header overruns its record")
        index += 1
        record_of = record_of[counts[record_of] > index]
    if (positions != record_ends).any():
        raise _corrupt("Record length disagrees with its fields")
    if (key_lengths < 0).any():
        raise _corrupt("Record header with a null key")
    try:
        keys = _binary(data, key_starts, key_lengths, string=True)
    except pa.ArrowInvalid as exc:
        raise _corrupt(f"Record header key is not UTF-8: {exc}") from None
    entries = pa.StructArray.from_arrays([keys, _binary(data, value_starts, value_lengths)],
                                         fields=list(HEADERS_TYPE.value_type))
    has_headers = counts > 0
    validity = None if has_headers.all() else pa.py_buffer(np.packbits(has_headers, bitorder="little"))
    return pa.Array.from_buffers(HEADERS_TYPE, len(counts),
                                 [validity, pa.py_buffer(list_offsets.astype(np.int32))], children=[entries])


def _corrupt(message: str) -> KafkaError:
    return KafkaError(ErrorCode.CORRUPT_MESSAGE, message)
