"""The aborted-transaction index of one segment (`.txnindex`): what read_committed fetches hand to consumers.

A transaction aborted by a marker in this segment gets one entry: which producer, the transaction's first and last
(marker) offset, and the last stable offset right after the abort. A consumer fetching from offset F gets every
aborted transaction that overlaps what it reads and drops that producer's records from the transaction's first
offset until it meets the marker. The format is Kafka's TransactionIndex, so the files are interchangeable: 34-byte
big-endian entries of version int16 (0), producerId int64, firstOffset int64, lastOffset int64, lastStableOffset
int64. Aborts are rare next to batches, so entries are also kept in memory (a fetch looks them up without I/O) and the
file exists only once a segment has an entry.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path
from typing import NamedTuple

VERSION = 0
_ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = _ENTRY.size


class AbortedTransaction(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


class TransactionIndex:
    def __init__(self, path: Path):
        self.path = path
        self.entries: list[AbortedTransaction] = []
        self._fd = -1
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return
        whole = len(data) - len(data) % ENTRY_SIZE
        for position in range(0, whole, ENTRY_SIZE):
            version, *fields = _ENTRY.unpack_from(data, position)
            if version != VERSION:
                break
            self.entries.append(AbortedTransaction(*fields))

    def append(self, entry: AbortedTransaction) -> None:
        if self._fd < 0:
            self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(self._fd, _ENTRY.pack(VERSION, *entry))
        self.entries.append(entry)

    def overlapping(self, start_offset: int, end_offset: int) -> list[AbortedTransaction]:
        """Entries whose range [first, last] meets [start_offset, end_offset)."""
        return [entry for entry in self.entries
                if entry.last_offset >= start_offset and entry.first_offset < end_offset]

    def truncate_from(self, offset: int) -> None:
        """Drop the entries whose marker is at or after `offset` (they are re-added as the log is replayed)."""
        kept = [entry for entry in self.entries if entry.last_offset < offset]
        if len(kept) == len(self.entries):
            return
        self.close()
        self.entries = []
        self.path.unlink(missing_ok=True)
        for entry in kept:
            self.append(entry)

    def flush(self) -> None:
        if self._fd >= 0:
            os.fsync(self._fd)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def rename(self, target: Path) -> None:
        self.close()
        if self.path.exists():
            os.replace(self.path, target)
        self.path = target
