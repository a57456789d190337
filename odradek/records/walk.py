"""The records of v2 batches located and decoded in bulk with numpy: the one record walker that columnar reads
(records.arrow) and produce-time validation (records.validation) share.

A record's fields cannot be found without reading the varints before them, so one walk over the record-length
varints finds where each record starts (jumping over runs of equal-sized records, the only per-record Python), and
every field after that is decoded for all records at once: one numpy gather per varint byte (`varints`), over the
concatenated record bytes padded with VARLONG_BYTES zeros so that a gather past a truncated last record stays in
the buffer. Each step checks what it reads (fields inside their record, records inside their batch) and raises
batch.MalformedRecords, a CORRUPT_MESSAGE; a caller with another contract (Produce answers INVALID_RECORD, as
Kafka's record iterator does) catches it and says so.

Record layout (after its length varint): attributes int8 | timestampDelta varlong | offsetDelta varint |
keyLength varint | key | valueLength varint | value | headerCount varint | (keyLength, key, valueLength, value)*
Lengths are zigzag varints; -1 is a null key or value.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from odradek.protocol.errors import ProtocolError
from odradek.protocol.varint import read_uvarint
from odradek.records.batch import MalformedRecords

VARINT_BYTES = 5  # a zigzag varint of an int32
VARLONG_BYTES = 10  # of an int64
PADDING = bytes(VARLONG_BYTES)  # vectorised reads may look this far past a truncated last record
MIN_RECORD_BYTES = 7  # length, attributes, timestamp delta, offset delta, key length, value length, header count
_MIN_RUN = 32  # equal-sized records worth a jump: a check costs about as much as walking this many
_MAX_BACKOFF = 1024  # plain steps between checks, at most, where sizes keep changing


class RecordFields(NamedTuple):
    """Where the fields of some records are in the buffer they were decoded from (int64 arrays, one per record).
    A negative key or value length is a null; headers start at `headers_at` and the record ends at `record_ends`."""

    record_ends: np.ndarray
    timestamp_deltas: np.ndarray
    offset_deltas: np.ndarray
    key_starts: np.ndarray
    key_lengths: np.ndarray
    value_starts: np.ndarray
    value_lengths: np.ndarray
    header_counts: np.ndarray
    headers_at: np.ndarray


class HeaderFields(NamedTuple):
    """Where the headers of some records are: record i's are entries list_offsets[i]:list_offsets[i + 1]."""

    list_offsets: np.ndarray
    key_starts: np.ndarray
    key_lengths: np.ndarray
    value_starts: np.ndarray
    value_lengths: np.ndarray


def padded_buffer(data: bytes) -> np.ndarray:
    """A uint8 view of `data`, which must end in PADDING (its bytes are never part of a record)."""
    return np.frombuffer(data, np.uint8)


def record_begins(data: bytes, buffer: np.ndarray, position: int, count: int, end: int) -> tuple[np.ndarray, int]:
    """Where each of `count` records starts in `data` from `position` (the records of one batch, or some of them,
    lying before `end`), and where the walk ended: a walk over the record-length varints that jumps over runs of
    equal-sized records. The caller checks that the walk ended where the records should.

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
    steps_until_check = 0
    backoff = 1
    window = 2 * _MIN_RUN
    left = count
    try:
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
            candidates = min(left, window, (end - position) // size) if size > 0 else 0
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
    except (IndexError, ProtocolError):
        raise MalformedRecords("Record overruns its batch or has a length varint longer than 5 bytes") from None
    return np.concatenate(pieces + [np.array(begins, np.int64)]), position


def record_fields(buffer: np.ndarray, begins: np.ndarray) -> RecordFields:
    """The fields of the records starting at `begins`, decoded together; each must lie inside its record."""
    lengths, position = varints(buffer, begins, VARINT_BYTES)
    record_ends = position + lengths
    timestamp_deltas, position = varints(buffer, position + 1, VARLONG_BYTES)  # + 1: the attributes byte
    offset_deltas, position = varints(buffer, position, VARINT_BYTES)
    key_lengths, key_starts = varints(buffer, position, VARINT_BYTES)
    value_lengths, value_starts = varints(buffer, key_starts + np.maximum(key_lengths, 0), VARINT_BYTES)
    header_counts, headers_at = varints(buffer, value_starts + np.maximum(value_lengths, 0), VARINT_BYTES)
    fits = (headers_at <= record_ends) & (header_counts >= 0) & (2 * header_counts <= record_ends - headers_at)
    if not fits.all():  # (each header takes at least two bytes)
        raise MalformedRecords("Record fields overrun their record")
    return RecordFields(record_ends, timestamp_deltas, offset_deltas, key_starts, key_lengths, value_starts,
                        value_lengths, header_counts, headers_at)


def header_fields(buffer: np.ndarray, positions: np.ndarray, counts: np.ndarray,
                  record_ends: np.ndarray) -> HeaderFields:
    """The headers of records whose header lists start at `positions`, `counts` each, decoded one header index at a
    time across all records that have that many; each record's last header (or its header count, if it has none)
    must end where the record does, and no header key may be null."""
    list_offsets = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=list_offsets[1:])
    total = int(list_offsets[-1])
    key_starts, key_lengths, value_starts, value_lengths = (np.empty(total, np.int64) for _ in range(4))
    positions = positions.copy()
    record_of = np.flatnonzero(counts > 0)
    index = 0
    while len(record_of):
        slots = list_offsets[record_of] + index
        key_lengths[slots], key_starts[slots] = varints(buffer, positions[record_of], VARINT_BYTES)
        value_lengths[slots], value_starts[slots] = varints(
            buffer, key_starts[slots] + np.maximum(key_lengths[slots], 0), VARINT_BYTES)
        positions[record_of] = value_starts[slots] + np.maximum(value_lengths[slots], 0)
        if (positions[record_of] > record_ends[record_of]).any():
            raise MalformedRecords("Record header overruns its record")
        index += 1
        record_of = record_of[counts[record_of] > index]
    if (positions != record_ends).any():
        raise MalformedRecords("Record length disagrees with its fields")
    if (key_lengths < 0).any():
        raise MalformedRecords("Record header with a null key")
    return HeaderFields(list_offsets, key_starts, key_lengths, value_starts, value_lengths)


def varints(buffer: np.ndarray, positions: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray]:
    """The zigzag varints starting at `positions` (int64), decoded together: (values int64, positions after them).

    One gather per varint byte, over only the varints still unfinished after the bytes before it."""
    try:
        first = buffer[positions]
    except IndexError:
        raise MalformedRecords("Record field overruns its batch") from None
    after = positions + 1
    unfinished = np.flatnonzero(first >= 0x80)
    if not len(unfinished):  # every one a single byte, as attributes, null or short keys and header counts mostly are
        small = first.astype(np.int64)
        return (small >> 1) ^ -(small & 1), after
    raw = (first & 0x7F).astype(np.uint64)
    for index in range(1, max_bytes):
        if not len(unfinished):
            break
        try:
            byte = buffer[positions[unfinished] + index]
        except IndexError:
            raise MalformedRecords("Record field overruns its batch") from None
        raw[unfinished] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * index)
        after[unfinished] += 1
        unfinished = unfinished[byte >= 0x80]
    else:
        if len(unfinished):
            raise MalformedRecords(f"Varint longer than {max_bytes} bytes")
    values = (raw >> np.uint64(1)).astype(np.int64) ^ -(raw & np.uint64(1)).astype(np.int64)
    return values, after
