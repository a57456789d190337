"""A partition's leader epoch cache and its `leader-epoch-checkpoint` file (Kafka's LeaderEpochFileCache, KIP-101).

The cache is the list of (leader epoch, start offset) pairs of the log: the first offset written in each epoch, both
increasing. It answers OffsetForLeaderEpoch (`end_offset_for`: the largest epoch at or below the one asked and where
it ended), which followers use to find where their log parts from the leader's instead of cutting it to the high
watermark. Entries are added as batches of a new partition_leader_epoch are appended (by a leader or a follower) and
when a leader takes over (its epoch starts at its log end); they are cut with the log at both ends.

The file is Kafka's text format: the version `0`, the entry count, then `epoch startOffset` lines, rewritten
atomically (temporary file, fsync, rename) at every change, which is once per epoch, never per append. A missing or
malformed file is rebuilt from the partition_leader_epoch of the log's batch headers.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path

from odradek.storage.segment import write_atomically

LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
VERSION = 0
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1


def read_leader_epoch_checkpoint(path: Path) -> list[tuple[int, int]] | None:
    """The file's (epoch, start offset) entries, or None when it is missing or malformed."""
    try:
        lines = path.read_text().splitlines()
        if int(lines[0]) != VERSION:
            return None
        count = int(lines[1])
        if len(lines) != 2 + count:  # as Kafka's reader: nothing may follow the entries
            return None
        entries = [(int(epoch), int(offset)) for epoch, offset in (line.split(" ") for line in lines[2:2 + count])]
        return entries if len(entries) == count else None
    except (OSError, ValueError, IndexError):
        return None


class LeaderEpochCache:
    def __init__(self, directory: Path, entries: list[tuple[int, int]]):
        self.path = directory / LEADER_EPOCH_CHECKPOINT
        self._entries = entries
        self._lock = threading.Lock()

    @classmethod
    def load(cls, directory: Path, batch_epochs: Iterable[tuple[int, int]]) -> "LeaderEpochCache":
        """From the checkpoint file, or when there is none from `batch_epochs` ((partition_leader_epoch, base
        offset) of every batch in log order), then written back if that found any: creating a partition writes no
        checkpoint (its write-and-fsync twice was 12 ms of each new partition's 14 ms)."""
        entries = read_leader_epoch_checkpoint(directory / LEADER_EPOCH_CHECKPOINT)
        if entries is not None:
            return cls(directory, entries)
        cache = cls(directory, [])
        for epoch, offset in batch_epochs:
            cache._add(epoch, offset)
        if cache._entries:  # no file for no entries: a new partition's log has none, and rebuilding it reads nothing
            cache._write()
        return cache

    @property
    def entries(self) -> list[tuple[int, int]]:
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        return self._entries[-1][0] if self._entries else UNDEFINED_EPOCH

    def assign(self, epoch: int, start_offset: int) -> None:
        """Epoch `epoch` starts at `start_offset` (no-op unless it is newer than the latest one)."""
        with self._lock:
            if self._add(epoch, start_offset):
                self._write()

    def _add(self, epoch: int, start_offset: int) -> bool:
        if epoch < 0 or (self._entries and epoch <= self._entries[-1][0]):
            return False
        # an entry at or past the new start offset belongs to records that are no longer there (Kafka's rule)
        while self._entries and self._entries[-1][1] >= start_offset:
            self._entries.pop()
        self._entries.append((epoch, start_offset))
        return True

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """(epoch, end offset) for OffsetForLeaderEpoch, as Kafka's endOffsetFor: the latest epoch ends at the log
        end; an earlier one is answered with the largest epoch at or below it (itself when it precedes every
        entry) and the start offset of the first epoch above it; (-1, -1) past the latest epoch or with none."""
        with self._lock:
            entries = self._entries
            if requested_epoch == UNDEFINED_EPOCH or not entries or requested_epoch > entries[-1][0]:
                return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
            if requested_epoch == entries[-1][0]:
                return requested_epoch, log_end_offset
            higher = next(position for position, (epoch, _) in enumerate(entries) if epoch > requested_epoch)
            floor_epoch = entries[higher - 1][0] if higher > 0 else requested_epoch
            return floor_epoch, entries[higher][1]

    def truncate_from_end(self, end_offset: int) -> None:
        """The log now ends at `end_offset`: epochs that started at or after it go."""
        with self._lock:
            kept = [entry for entry in self._entries if entry[1] < end_offset]
            if len(kept) != len(self._entries):
                self._entries = kept
                self._write()

    def truncate_from_start(self, start_offset: int) -> None:
        """The log now starts at `start_offset`: epochs wholly before it go, the one holding it starts there."""
        with self._lock:
            later = [entry for entry in self._entries if entry[1] >= start_offset]
            earlier = [entry for entry in self._entries if entry[1] < start_offset]
            if earlier:
                if not later or later[0][1] > start_offset:
                    later.insert(0, (earlier[-1][0], start_offset))
                self._entries = later
                self._write()

    def clear(self) -> None:
        with self._lock:
            self._entries = []
            self._write()

    def _write(self) -> None:
        lines = [str(VERSION), str(len(self._entries))] + [f"{epoch} {offset}" for epoch, offset in self._entries]
        write_atomically(self.path, ("\n".join(lines) + "\n").encode())
