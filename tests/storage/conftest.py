"""Helpers for the storage tests: batches to append and a way to read a whole log back record by record."""

from __future__ import annotations

from odradek.records.batch import Record, decode_batch, encode_batch, parse_header, validate_batches
from odradek.storage.log import Log


def batch(count: int = 1, *, timestamp: int = 1_000_000, value_size: int = 10, tag: int = 0,
          timestamps: list[int] | None = None, base_offset: int = 0) -> bytes:
    """A producer's batch of `count` records; values say which batch (`tag`) and record they are."""
    timestamps = timestamps or [timestamp] * count
    return encode_batch([Record(index, timestamps[index], b"k%d" % index,
                                (b"%d:%d:" % (tag, index)).ljust(value_size, b"x")) for index in range(count)],
                        base_offset=base_offset)


def append(log: Log, data: bytes, **kwargs):
    return log.append(data, validate_batches(data), **kwargs)


def append_raw(log: Log, data: bytes, **kwargs):
    """Append batches that already carry their offsets (replication/cleaner path)."""
    headers, position = [], 0
    while position < len(data):
        header = parse_header(data, position)
        headers.append(header)
        position += header.size
    return log.append(data, headers, assign_offsets=False, **kwargs)


def read_all(log: Log, start: int | None = None, max_bytes: int = 1 << 20) -> list[tuple[int, bytes]]:
    """(offset, value) of every record from `start` (default: the log start) to the log end, through `read`."""
    offset = log.log_start_offset if start is None else start
    out = []
    while True:
        region = log.read(offset, max_bytes)
        if region is None:
            return out
        data = region.read_bytes()
        position = 0
        while position < len(data):
            header, records = decode_batch(data[position:])
            out += [(header.base_offset + record.offset_delta, record.value) for record in records]
            position += header.size
            offset = header.last_offset + 1
