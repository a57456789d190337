"""Helpers for the cleaner tests: a compacted log under a LogManager, keyed batches, transactional writers, and the
log read back whole (as read_uncommitted and as read_committed consumers see it)."""

from __future__ import annotations

import uuid

import pytest

from odradek.cluster.metadata import PartitionAssignment
from odradek.cluster.partition import Partition
from odradek.config import LogConfig, resolve_broker_config
from odradek.records.batch import (
    CONTROL_ABORT, Record, decode_batch, decode_control_record, encode_batch, validate_batches,
)
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
    """(offset, key, value) of every record from `start` (default: the log start) through `Log.read`, as a
    read_uncommitted consumer gets them: transaction markers are not records to it."""
    offset = log.log_start_offset if start is None else start
    out = []
    while (region := log.read(offset, 1 << 20)) is not None:
        data = region.read_bytes()
        position = 0
        while position < len(data):
            header, records = decode_batch(data[position:])
            if not header.is_control:
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


class TransactionalWriter:
    """One transactional producer id writing to `log` as the broker has it write: data batches through
    Partition.append (producer state checks and updates), markers through Partition.write_transaction_marker (which
    also writes the `.txnindex` entry of an abort)."""

    def __init__(self, log: Log, producer_id: int, epoch: int = 0):
        self.partition = Partition("t", 0, uuid.uuid4(), log, PartitionAssignment(0, 0, [0], [0]), 0)
        self.producer_id, self.epoch, self.sequence = producer_id, epoch, 0

    def send(self, pairs) -> dict[int, tuple]:
        """One transactional batch of (key, value) pairs; {offset: (key, value)} written."""
        data = keyed_batch(pairs, producer_id=self.producer_id, producer_epoch=self.epoch,
                           base_sequence=self.sequence, transactional=True)
        first = self.partition.append(data, validate_batches(data)).first_offset
        self.sequence += len(pairs)
        return {first + index: pair for index, pair in enumerate(pairs)}

    def end(self, commit: bool) -> int:
        """Write the COMMIT or ABORT marker; its offset."""
        self.partition.write_transaction_marker(self.producer_id, self.epoch, commit, coordinator_epoch=0)
        return self.partition.log.log_end_offset - 1


def markers(log: Log) -> list[tuple[int, int, bool]]:
    """(offset, producer id, is an abort) of every transaction marker in the log's segments."""
    found = []
    for header, records in read_batches(log):
        if header.is_control and records:
            found.append((header.base_offset, header.producer_id,
                          decode_control_record(records[0])[0] == CONTROL_ABORT))
    return found


def read_committed(log: Log) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record a read_committed consumer from the log start gets: it is handed the
    aborted transactions the log reports for the range and skips each one's records, from its first offset up to
    its producer's next marker (Kafka's consumer-side filtering), and never sees markers."""
    pending = sorted(log.aborted_transactions(log.log_start_offset, log.log_end_offset),
                     key=lambda entry: entry.first_offset)
    aborting: set[int] = set()
    out = []
    for header, records in read_batches(log):
        while pending and pending[0].first_offset <= header.last_offset:
            aborting.add(pending.pop(0).producer_id)
        if header.is_control:
            aborting.discard(header.producer_id)
        elif not (header.is_transactional and header.producer_id in aborting):
            out += [(header.base_offset + record.offset_delta, record.key, record.value) for record in records]
    return out
