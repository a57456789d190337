"""The two sparse indexes of a log segment, in Kafka's file formats: `.index` and `.timeindex`.

Offset index: 8-byte entries `relative offset int32, file position int32`, one per `index.interval.bytes` of log,
keyed by the LAST offset of the batch that starts at the position (Kafka 3.x). Time index: 12-byte entries
`timestamp int64, relative offset int32`, appended only when the segment's max timestamp grows, so both columns
are monotonic. Relative offsets are `offset - segment base offset`.

Each index is loaded once into two `array` columns and searched with `bisect`; an append goes to the arrays and,
with one `pwrite`, to the file. We do not mmap: Python reads of an mmap cost a call and a copy per entry just like
an array does, an mmap must be remapped as the preallocated file is trimmed, and the arrays are small (10 MiB
of index at most per segment). While its segment is active an index file is preallocated to `segment.index.bytes`
(rounded down to whole entries) and kept open; sealing trims it to its entries, fsyncs and closes it, as Kafka does.
The file is created lazily, at the first entry (one per index.interval.bytes of log) or at sealing, as Kafka's
LazyIndex does: a new partition costs one file, not three, and a quiet partition never writes an index. A file that
is missing, short, ragged or not monotonic fails `load` and the segment rebuilds it from the log.
"""

from __future__ import annotations

import bisect
import operator
import os
import struct
import sys
from array import array
from pathlib import Path


def file_holds(path: Path, data: bytes) -> bool:
    """Whether the file at `path` exists and holds exactly `data` (what a rewrite would leave there)."""
    try:
        with open(path, "rb") as file:
            return file.read(len(data) + 1) == data
    except FileNotFoundError:
        return False


class _IndexFile:
    """File handling shared by both indexes: preallocation while active, trimming, flushing, renaming."""

    ENTRY: struct.Struct

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int):
        self.path = path
        self.base_offset = base_offset
        self.max_entries = max(1, max_index_bytes // self.ENTRY.size)
        self._fd: int | None = None
        self._active = False
        self._dirty = False

    def __len__(self) -> int:
        return len(self._keys)

    @property
    def is_full(self) -> bool:
        return len(self._keys) >= self.max_entries  # not len(self): a call less on every append

    def _read_file(self, may_be_unwritten: bool) -> bytes | None:
        """The file's bytes if it holds whole entries, else None. A missing file reads as empty when the index may
        never have been written (its segment is too short for an entry), and as None otherwise."""
        try:
            data = self.path.read_bytes()
        except FileNotFoundError:
            return b"" if may_be_unwritten else None
        if len(data) % self.ENTRY.size:
            return None
        return data

    def activate(self) -> None:
        """The segment is active: the file is opened and preallocated at the first append."""
        self._active = True

    def _open_preallocated(self) -> None:
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        os.ftruncate(self._fd, self.max_entries * self.ENTRY.size)

    def seal(self, *, segment_empty: bool) -> None:
        """Trim to the real entries, fsync and close: the segment is no longer active. An index never opened while
        active is written whole (it may not exist yet, or be preallocated by an earlier run) unless the file
        already holds exactly its entries, or is missing and its segment holds no record (`Segment.open` takes
        that for an index not written yet): a quiet partition's clean shutdown writes and fsyncs nothing."""
        if not self._active:
            return
        self._active = False
        if self._fd is None:
            data = self._encode_all()
            if not (segment_empty and not data and not self.path.exists()) and not file_holds(self.path, data):
                self._write_file(data)
            return
        os.ftruncate(self._fd, len(self) * self.ENTRY.size)
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = None
        self._dirty = False

    def flush(self) -> None:
        if self._fd is not None and self._dirty:
            os.fsync(self._fd)
            self._dirty = False

    def close(self) -> None:
        """Close without trimming (an active index stays preallocated on disk, as after a crash)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def rename(self, path: Path) -> None:
        os.replace(self.path, path)
        self.path = path

    def _append_bytes(self, entry: bytes) -> None:
        if not self._active:  # a rebuild of a sealed segment's index: `rewrite` writes the file at the end
            return
        if self._fd is None:
            self._open_preallocated()
        os.pwrite(self._fd, entry, (len(self) - 1) * self.ENTRY.size)
        self._dirty = True

    def rewrite(self) -> None:
        """Write the in-memory entries as the whole file (after a rebuild or a truncation)."""
        self._write_file(self._encode_all())

    def _write_file(self, data: bytes) -> None:
        with open(self.path, "wb") as file:
            file.write(data)
            file.flush()
            os.fsync(file.fileno())
        if self._fd is not None:
            self._open_preallocated()


class OffsetIndex(_IndexFile):
    """Sparse map from offset to the file position of the batch holding it."""

    ENTRY = struct.Struct(">ii")

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int):
        super().__init__(path, base_offset, max_index_bytes)
        self._keys = array("i")  # last offset of the indexed batch, relative to base_offset
        self._positions = array("i")

    def load(self, log_size: int, may_be_unwritten: bool = False) -> bool:
        """Read the file; False (and empty) if it is missing (unless `may_be_unwritten`) or fails Kafka's sanity
        checks against `log_size`."""
        data = self._read_file(may_be_unwritten)
        if data is None:
            return False
        pairs = array("i", data)
        if sys.byteorder == "little":
            pairs.byteswap()
        keys, positions = pairs[0::2], pairs[1::2]
        if keys and not (keys[0] >= 0 and positions[0] > 0 and positions[-1] < log_size
                         and all(map(operator.lt, keys, keys[1:]))
                         and all(map(operator.lt, positions, positions[1:]))):
            return False
        self._keys, self._positions = keys, positions
        return True

    def append(self, last_offset: int, position: int) -> None:
        relative = last_offset - self.base_offset
        self._keys.append(relative)
        self._positions.append(position)
        self._append_bytes(self.ENTRY.pack(relative, position))

    def lookup(self, offset: int) -> tuple[int, int]:
        """(offset, position) of the last entry at or below `offset`, else (base offset, 0): scan from there."""
        slot = bisect.bisect_right(self._keys, offset - self.base_offset) - 1
        if slot < 0:
            return self.base_offset, 0
        return self.base_offset + self._keys[slot], self._positions[slot]

    def floor_position(self, max_position: int, below_offset: int | None) -> int:
        """Position of the last indexed batch that starts at or before `max_position` and ends below
        `below_offset` (None: no bound); 0 if none. What precedes it in the file is whole batches below that
        offset, so a read can jump there instead of hopping over every header."""
        slot = bisect.bisect_right(self._positions, max_position)
        if below_offset is not None:
            slot = bisect.bisect_left(self._keys, below_offset - self.base_offset, 0, slot)
        return self._positions[slot - 1] if slot > 0 else 0

    def last_position(self) -> int:
        return self._positions[-1] if self._positions else 0

    def reset(self) -> None:
        del self._keys[:], self._positions[:]

    def truncate_to_position(self, position: int) -> None:
        """Drop entries for batches at or after `position` (the log was cut there) and rewrite the file."""
        keep = bisect.bisect_left(self._positions, position)
        del self._keys[keep:], self._positions[keep:]
        self.rewrite()

    def _encode_all(self) -> bytes:
        pairs = array("i", bytes(8 * len(self._keys)))
        pairs[0::2], pairs[1::2] = self._keys, self._positions
        if sys.byteorder == "little":
            pairs.byteswap()
        return pairs.tobytes()


class TimeIndex(_IndexFile):
    """Sparse map from timestamp to the offset up to which no record has a larger timestamp."""

    ENTRY = struct.Struct(">qi")

    def __init__(self, path: Path, base_offset: int, max_index_bytes: int):
        super().__init__(path, base_offset, max_index_bytes)
        self._keys = array("q")  # timestamps, strictly increasing
        self._offsets = array("q")  # absolute

    def load(self, may_be_unwritten: bool = False) -> bool:
        data = self._read_file(may_be_unwritten)
        if data is None:
            return False
        keys, offsets = array("q"), array("q")
        base = self.base_offset
        for timestamp, relative in self.ENTRY.iter_unpack(data):
            keys.append(timestamp)
            offsets.append(base + relative)
        if keys and not (keys[0] >= 0 and offsets[0] >= base and all(map(operator.lt, keys, keys[1:]))
                         and all(map(operator.le, offsets, offsets[1:]))):
            return False
        self._keys, self._offsets = keys, offsets
        return True

    def maybe_append(self, timestamp: int, offset: int, *, skip_full_check: bool = False) -> None:
        """Record (timestamp, offset) if the timestamp is larger than the last entry's (and the index has room)."""
        if timestamp < 0 or (self._keys and timestamp <= self._keys[-1]):
            return
        if self.is_full and not skip_full_check:
            return
        self._keys.append(timestamp)
        self._offsets.append(offset)
        self._append_bytes(self.ENTRY.pack(timestamp, offset - self.base_offset))

    def last_entry(self) -> tuple[int, int] | None:
        """(timestamp, offset) of the last entry."""
        return (self._keys[-1], self._offsets[-1]) if self._keys else None

    def floor_below(self, timestamp: int) -> int | None:
        """Offset of the last entry whose timestamp is below `timestamp`: no record up to it reaches `timestamp`."""
        slot = bisect.bisect_left(self._keys, timestamp) - 1
        return self._offsets[slot] if slot >= 0 else None

    def reset(self) -> None:
        del self._keys[:], self._offsets[:]

    def truncate_to_offset(self, offset: int) -> None:
        """Drop entries at or after `offset` and rewrite the file."""
        keep = bisect.bisect_left(self._offsets, offset)
        del self._keys[keep:], self._offsets[keep:]
        self.rewrite()

    def _encode_all(self) -> bytes:
        base = self.base_offset
        return b"".join(self.ENTRY.pack(timestamp, offset - base) for timestamp, offset in zip(self._keys, self._offsets))
