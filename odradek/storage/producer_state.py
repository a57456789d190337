"""Per-partition producer state: what makes idempotent and transactional appends exactly-once.

For every producer id that wrote to the partition we keep its epoch, the sequence and offset ranges of its last five
batches (a client has at most five requests in flight, so a retry is always one of them), the coordinator epoch of
its last marker and the first offset of its open transaction. The rules are Kafka's ProducerStateManager /
ProducerAppendInfo: a batch from a client must carry the current or a newer epoch; in the current epoch its first
sequence must follow the last one (int32 wraps to 0), a new epoch must start at sequence 0, and a producer we know
nothing about may start anywhere (its state may have gone with retention); a batch whose epoch and sequence range
match a recent one is a retry and is answered with that batch's offsets instead of being written again. Coordinator
appends (transactional offset commits, markers) carry no sequence and are checked for epoch only.

Open transactions give the last stable offset: the first offset of the earliest one. Markers close them; an aborted
one becomes an entry of the active segment's `.txnindex`.

State survives restarts through snapshot files `<offset>.snapshot` in the partition directory (Kafka's format, see
docs/storage-format.md), written when a segment rolls and at clean shutdown: loading reads the newest snapshot at or
below the log end and replays only the batch headers after it (decoding control batches alone). A snapshot keeps only
each producer's last batch, as Kafka's does.
"""

from __future__ import annotations

import dataclasses
import enum
import os
import struct
from collections import deque
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

from odradek.errors import ErrorCode, KafkaError
from odradek.records._crc32c import value as crc32c
from odradek.records.batch import CONTROL_COMMIT, BatchHeader, decode_batch, decode_control_record
from odradek.storage.segment import write_atomically
from odradek.storage.transaction_index import AbortedTransaction

SNAPSHOT_SUFFIX = ".snapshot"
SNAPSHOT_VERSION = 1
RETAINED_BATCHES = 5
NO_SEQUENCE = -1
NO_EPOCH = -1
NO_OFFSET = -1
INT32_MAX = 2**31 - 1

_SNAPSHOT_HEADER = struct.Struct(">hIi")  # version, crc (CRC-32C of everything after it), entry count
_SNAPSHOT_ENTRY = struct.Struct(">qhiqiqiq")


class AppendOrigin(enum.Enum):
    CLIENT = "client"  # full checks: epoch and sequence, duplicates answered from the cache
    COORDINATOR = "coordinator"  # our own coordinators' writes: epoch only


_CLIENT = AppendOrigin.CLIENT  # looked up once, not per batch: an enum member is slow to look up on Python 3.11


class BatchRange(NamedTuple):
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int


class CompletedTransaction(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int  # the marker's offset
    aborted: bool


def last_sequence_of(header: BatchHeader) -> int:
    """The batch's last sequence: base + last offset delta, wrapping past int32 max to 0 (Kafka's incrementSequence)."""
    if header.base_sequence > INT32_MAX - header.last_offset_delta:
        return header.last_offset_delta - (INT32_MAX - header.base_sequence) - 1
    return header.base_sequence + header.last_offset_delta


def _follows(last_sequence: int, next_sequence: int) -> bool:
    return next_sequence == last_sequence + 1 or (next_sequence == 0 and last_sequence == INT32_MAX)


@dataclasses.dataclass
class ProducerEntry:
    producer_id: int
    epoch: int = NO_EPOCH
    batches: deque = dataclasses.field(default_factory=lambda: deque(maxlen=RETAINED_BATCHES))
    coordinator_epoch: int = -1
    last_timestamp: int = -1
    transaction_first_offset: int = NO_OFFSET  # first offset of the open transaction, NO_OFFSET if none

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    def find_duplicate(self, epoch: int, first_sequence: int, last_sequence: int) -> BatchRange | None:
        if epoch != self.epoch:
            return None
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None

    def _enter_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.epoch = epoch
            self.batches.clear()


class ProducerStateManager:
    def __init__(self, directory: Path):
        self.directory = directory
        self.producers: dict[int, ProducerEntry] = {}
        self._open_transactions: dict[int, int] = {}  # producer id -> first offset

    # -- checks before an append -----------------------------------------------------------------------------

    def check_batch(self, header: BatchHeader, origin: AppendOrigin) -> BatchRange | None:
        """Raise the error Kafka would for this data batch; return the cached batch if it is a client's retry."""
        entry = self.producers.get(header.producer_id)
        if entry is None:
            return None
        epoch = header.producer_epoch
        if origin is _CLIENT:
            duplicate = entry.find_duplicate(epoch, header.base_sequence, last_sequence_of(header))
            if duplicate is not None:
                return duplicate
        self._check_epoch(entry, epoch)
        if origin is _CLIENT:
            if epoch != entry.epoch:
                if header.base_sequence != 0 and entry.epoch != NO_EPOCH:
                    raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                     f"Invalid sequence number {header.base_sequence} for new epoch {epoch} of "
                                     f"producer {header.producer_id} (current epoch {entry.epoch})")
            elif entry.epoch != NO_EPOCH and not _follows(entry.last_sequence, header.base_sequence):
                raise KafkaError(ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER,
                                 f"Out of order sequence number for producer {header.producer_id}: "
                                 f"{header.base_sequence} (incoming), {entry.last_sequence} (current end)")
        if entry.transaction_first_offset != NO_OFFSET and not header.is_transactional:
            raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                             f"Non-transactional write from producer {header.producer_id} during its transaction")
        return None

    def check_marker(self, producer_id: int, epoch: int, coordinator_epoch: int) -> None:
        entry = self.producers.get(producer_id)
        if entry is None:
            return
        self._check_epoch(entry, epoch)
        if coordinator_epoch < entry.coordinator_epoch:
            raise KafkaError(ErrorCode.TRANSACTION_COORDINATOR_FENCED,
                             f"Marker of coordinator epoch {coordinator_epoch} below {entry.coordinator_epoch}")

    @staticmethod
    def _check_epoch(entry: ProducerEntry, epoch: int) -> None:
        if epoch < entry.epoch:
            raise KafkaError(ErrorCode.INVALID_PRODUCER_EPOCH,
                             f"Epoch {epoch} of producer {entry.producer_id} is below the last seen epoch "
                             f"{entry.epoch}")

    # -- updates after an append -----------------------------------------------------------------------------

    def record_batch(self, header: BatchHeader) -> None:
        """A data batch at its final offsets (`header.base_offset` assigned by the log)."""
        producer_id = header.producer_id
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        entry._enter_epoch(header.producer_epoch)
        if header.base_sequence >= 0:
            entry.batches.append(BatchRange(header.base_sequence, last_sequence_of(header), header.base_offset,
                                            header.last_offset, header.max_timestamp))
        entry.last_timestamp = header.max_timestamp
        if header.is_transactional and entry.transaction_first_offset == NO_OFFSET:
            entry.transaction_first_offset = header.base_offset
            self._open_transactions[producer_id] = header.base_offset

    def record_marker(self, producer_id: int, epoch: int, commit: bool, coordinator_epoch: int, offset: int,
                      timestamp: int) -> CompletedTransaction | None:
        """A marker written at `offset`; the transaction it closed, if the producer had one open here."""
        entry = self.producers.get(producer_id)
        if entry is None:
            entry = self.producers[producer_id] = ProducerEntry(producer_id)
        completed = None
        if entry.transaction_first_offset != NO_OFFSET:
            completed = CompletedTransaction(producer_id, entry.transaction_first_offset, offset, not commit)
            del self._open_transactions[producer_id]
        entry._enter_epoch(epoch)
        entry.transaction_first_offset = NO_OFFSET
        entry.coordinator_epoch = coordinator_epoch
        entry.last_timestamp = timestamp
        return completed

    def aborted_entry(self, completed: CompletedTransaction) -> AbortedTransaction:
        """The `.txnindex` entry of an abort just recorded: its last stable offset is the first offset of the
        earliest transaction still open, or the offset after the marker."""
        return AbortedTransaction(completed.producer_id, completed.first_offset, completed.last_offset,
                                  self.first_unstable_offset(default=completed.last_offset + 1))

    # -- reading ---------------------------------------------------------------------------------------------

    def first_unstable_offset(self, default: int) -> int:
        """First offset of the earliest open transaction, else `default`."""
        open_transactions = self._open_transactions
        return min(open_transactions.values()) if open_transactions else default

    def remove_expired(self, now_ms: int, expiration_ms: int) -> int:
        """producer.id.expiration.ms: forget producers idle that long with no open transaction; how many went."""
        expired = [producer_id for producer_id, entry in self.producers.items()
                   if entry.transaction_first_offset == NO_OFFSET and now_ms - entry.last_timestamp >= expiration_ms]
        for producer_id in expired:
            del self.producers[producer_id]
        return len(expired)

    # -- snapshots and loading -------------------------------------------------------------------------------

    def snapshot_offsets(self, names: Iterable[str] | None = None) -> list[int]:
        """The offsets of the snapshots in the directory, or among `names` (a listing of it the caller has)."""
        return sorted(offset for name in (os.listdir(self.directory) if names is None else names)
                      if (offset := _snapshot_offset(name)) is not None)

    def take_snapshot(self, offset: int) -> None:
        """Write `<offset>.snapshot` (state as of the log end `offset`): temporary file, fsync, rename; nothing if
        the file already holds that state (a clean shutdown with nothing produced since the last start)."""
        body = bytearray()
        for entry in self.producers.values():
            last = entry.batches[-1] if entry.batches else None
            body += _SNAPSHOT_ENTRY.pack(
                entry.producer_id, entry.epoch, last.last_sequence if last else NO_SEQUENCE,
                last.last_offset if last else NO_OFFSET, last.last_offset - last.first_offset if last else 0,
                entry.last_timestamp, entry.coordinator_epoch, entry.transaction_first_offset)
        count_and_body = struct.pack(">i", len(self.producers)) + body
        data = struct.pack(">hI", SNAPSHOT_VERSION, crc32c(count_and_body)) + count_and_body
        write_atomically(self.directory / _snapshot_name(offset), data, unless_held=True)

    def delete_snapshots_before(self, offset: int) -> None:
        for snapshot in self.snapshot_offsets():
            if snapshot < offset:
                (self.directory / _snapshot_name(snapshot)).unlink(missing_ok=True)

    def _read_snapshot(self, offset: int) -> bool:
        """Replace the state with the snapshot at `offset`; False (state untouched) if it is unreadable."""
        try:
            data = (self.directory / _snapshot_name(offset)).read_bytes()
            version, crc, count = _SNAPSHOT_HEADER.unpack_from(data)
        except (OSError, struct.error):
            return False
        if (version != SNAPSHOT_VERSION or crc32c(data[6:]) != crc
                or len(data) != _SNAPSHOT_HEADER.size + count * _SNAPSHOT_ENTRY.size):
            return False
        self.producers, self._open_transactions = {}, {}
        for position in range(_SNAPSHOT_HEADER.size, len(data), _SNAPSHOT_ENTRY.size):
            (producer_id, epoch, last_sequence, last_offset, offset_delta, timestamp, coordinator_epoch,
             transaction_first_offset) = _SNAPSHOT_ENTRY.unpack_from(data, position)
            entry = self.producers[producer_id] = ProducerEntry(producer_id, epoch, coordinator_epoch=coordinator_epoch,
                                                                last_timestamp=timestamp,
                                                                transaction_first_offset=transaction_first_offset)
            if last_offset >= 0:
                entry.batches.append(BatchRange((last_sequence - offset_delta) % (INT32_MAX + 1), last_sequence,
                                                last_offset - offset_delta, last_offset, timestamp))
            if transaction_first_offset != NO_OFFSET:
                self._open_transactions[producer_id] = transaction_first_offset
        return True

    def load(self, segments, log_start_offset: int, log_end_offset: int, names: Iterable[str] | None = None) -> None:
        """Rebuild the state for a log ending at `log_end_offset`: the newest readable snapshot at or below it, then
        a replay of the batches after it, which also rewrites those offsets' `.txnindex` entries. Snapshots past the
        log end (the log was cut since) are deleted. `names`: a listing of the directory the caller has (a snapshot
        listed there and gone since reads as unreadable)."""
        self.producers, self._open_transactions = {}, {}
        start = log_start_offset
        for offset in reversed(self.snapshot_offsets(names)):
            if offset > log_end_offset or not self._read_snapshot(offset):
                (self.directory / _snapshot_name(offset)).unlink(missing_ok=True)
            else:
                start = max(offset, log_start_offset)
                break
        for segment in segments:
            if segment.next_offset > start:
                segment.transaction_index.truncate_from(start)
        if start >= log_end_offset:
            return
        for segment in segments:
            if segment.next_offset <= start:
                continue
            found = segment.find_batch(start)
            if found is None:
                continue
            for position, header in segment.iter_headers(found[0]):
                if header.last_offset < start or header.producer_id < 0:
                    continue
                completed = self.replay(header, None if not header.is_control
                                        else os.pread(segment.fd, header.size, position))
                if completed is not None and completed.aborted:
                    segment.transaction_index.append(self.aborted_entry(completed))

    def replay(self, header: BatchHeader, batch) -> CompletedTransaction | None:
        """Take in a batch already in the log (recovery, or a follower copying its leader); `batch` is its bytes,
        needed only for a control batch. The transaction a marker closed, if any."""
        if not header.is_control:
            self.record_batch(header)
            return None
        _, records = decode_batch(bytes(batch))
        if not records:
            return None
        control_type, coordinator_epoch = decode_control_record(records[0])
        return self.record_marker(header.producer_id, header.producer_epoch, control_type == CONTROL_COMMIT,
                                  coordinator_epoch, header.base_offset, header.max_timestamp)

    def clear(self) -> None:
        """Forget everything and delete every snapshot (the log starts over)."""
        self.producers, self._open_transactions = {}, {}
        self.delete_snapshots_before(2**63 - 1)


def _snapshot_name(offset: int) -> str:
    return f"{offset:020d}{SNAPSHOT_SUFFIX}"


def _snapshot_offset(name: str) -> int | None:
    stem = name[:-len(SNAPSHOT_SUFFIX)]
    if name.endswith(SNAPSHOT_SUFFIX) and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None
