"""Helpers for the cleaner tests: a compacted log under a LogManager, keyed batches, and the log read back whole."""

from __future__ import annotations

import pytest

from odradek.config import LogConfig, resolve_broker_config
from odradek.records.batch import Record, decode_batch, encode_batch, validate_batches
from odradek.storage.cleaner import LogCleaner
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager

NOW = 2_000_000_000_000
COMPACTED = LogConfig(cleanup_policy=("compact",), segment_bytes=4096, index_interval_bytes=256,
                      min_cleanable_dirty_ratio=0.01, delete_retention_ms=60_000, file_delete_delay_ms=60_000)


@pytest.fixture
def manager(tmp_path, clock) -> LogManager:
    logs = LogManager(tmp_path / "logs", {}, now_ms=clock)
    yield logs
    logs.close()


def cleaner_for(manager: LogManager, clock, **settings) -> LogCleaner:
    config = resolve_broker_config({"log.cleaner.backoff.ms": 10, **settings})
    return LogCleaner(manager, config, now_ms=clock)


def keyed_batch(pairs, *, timestamp: int = NOW, compression: int = 0, **producer) -> bytes:
    """One batch of (key, value) records, all at `timestamp`."""
    return encode_batch([Record(index, timestamp, key, value) for index, (key, value) in enumerate(pairs)],
                        compression=compression, **producer)


def produce(log: Log, pairs, **kwargs):
    data = keyed_batch(pairs, **kwargs)
    return log.append(data, validate_batches(data))


def fill(log: Log, rounds: int, keys: int, *, per_batch: int = 10, value_size: int = 20) -> dict[int, tuple]:
    """`rounds` updates of keys k0..k{keys-1}, `per_batch` records a batch; {offset: (key, value)} written."""
    written = {}
    pairs = [(b"k%d" % (index % keys), (b"r%d-%d" % (index // keys, index % keys)).ljust(value_size, b"."))
             for index in range(rounds * keys)]
    for start in range(0, len(pairs), per_batch):
        chunk = pairs[start:start + per_batch]
        first = produce(log, chunk).first_offset
        written.update({first + index: pair for index, pair in enumerate(chunk)})
    return written


def read_records(log: Log, start: int | None = None) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from `start` (default: the log start) through `Log.read`."""
    offset = log.log_start_offset if start is None else start
    out = []
    while (region := log.read(offset, 1 << 20)) is not None:
        data = region.read_bytes()
        position = 0
        while position < len(data):
            header, records = decode_batch(data[position:])
            out += [(header.base_offset + record.offset_delta, record.key, record.value) for record in records]
            position += header.size
            offset = header.last_offset + 1
    return out


def read_batches(log: Log):
    """(header, records) of every batch in the log's segments, in order."""
    out = []
    for segment in log.segments:
        for header, batch in segment.iter_batches():
            out.append(decode_batch(batch))
    return out


def last_offsets(written: dict[int, tuple]) -> dict[bytes, int]:
    """key -> offset of its last record."""
    last = {}
    for offset in sorted(written):
        last[written[offset][0]] = offset
    return last
