"""One log segment: a `.log` file of whole record batches plus its `.index`, `.timeindex` and, once a transaction
aborted in it, `.txnindex` (odradek/storage/transaction_index.py).

Files are named by the 20-digit base offset (`00000000000000000000.log`). The log file is opened at its first use
(an append, a read, recovery), not when the segment is loaded or created: a broker with 50,000 partitions, each
with an active segment and older ones, would otherwise hold a descriptor per segment from the start (over the
usual limits) for partitions nobody reads. Once open it stays open for the segment's life, because the
`FileRegion`s handed to fetches point into it: a removed segment is renamed `*.deleted` and its descriptor is closed
only when the log deletes the files after `file.delete.delay.ms`.

Everything here works per batch: appends index the batches they write, reads and lookups hop from batch header to
batch header, and only timestamp lookups decode (one batch). `size` is the end of the last whole batch and is
published after the bytes are written, so a reader that snapshots it never sees a partial batch; the one exception
is the log's DeferredWrites window, where `extend` publishes it first and the log writes the bytes before anything
reads through it (a reader on another thread asks `Log.written_size`).

What a fetch costs in system calls is kept small in two ways. The batches after the last offset index entry (the
"tail": under index.interval.bytes of them, the part consumers at the log end read) are known in memory, since the
append wrote them: base offset, last offset, position and end of each, in four `array` columns, so a read there is
two bisects and no pread at all. Elsewhere the hops over headers read the file HEADER_CHUNK_BYTES at a time
(`_HeaderReader`), one pread for the many small batches a small fetch spans instead of one per batch. The tail is
dropped when the segment is sealed, so memory stays bounded by the active segments.
Recovery (`recover`) re-reads the file in large chunks, checks every batch (fits, magic 2, offsets increasing,
CRC-32C), rebuilds both indexes from the valid ones and cuts the file after the last of them.
"""

from __future__ import annotations

import bisect
import ctypes
import dataclasses
import os
import random
import threading
import uuid
from array import array
from collections.abc import Iterator
from pathlib import Path

from odradek.config import LogConfig
from odradek.records import _batch
from odradek.records.batch import (
    BATCH_HEADER_SIZE, LOG_OVERHEAD, MAGIC_V2, NO_TIMESTAMP, BatchHeader, batch_crc, decode_batch, parse_header,
)
from odradek.records.region import FileRegion
from odradek.storage.index import OffsetIndex, TimeIndex, file_holds
from odradek.storage.transaction_index import TransactionIndex

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
DELETED_SUFFIX = ".deleted"
CLEANED_SUFFIX = ".cleaned"
SWAP_SUFFIX = ".swap"
DELETED_DIR_SUFFIX = "-delete"  # a partition directory being removed: `<topic>-<partition>.<id>-delete`
STRAY_DIR_SUFFIX = "-stray"  # a partition directory of no known topic, set aside: `<topic>-<partition>.<id>-stray`
INT32_MAX = 2**31 - 1

_SCAN_CHUNK_BYTES = 1 << 20
HEADER_CHUNK_BYTES = 8192  # one pread while hopping over headers: ~50 small batches, two index intervals
# A write of RESERVE_MIN_WRITE bytes or more that goes past the blocks reserved ahead reserves the file's blocks up to
# the end of the RESERVE_CHUNK_BYTES chunk it ends in (`Segment.write`)
RESERVE_MIN_WRITE = 64 << 10
RESERVE_CHUNK_BYTES = 4 << 20
_CLOSED = -1
# Opening a log file and renaming it take this lock, so that two threads reading a segment for the first time (a
# fetch and the cleaner) open it once, and an open never races a rename to a path that is gone. Taken only for the
# first use of a segment, never on the append or read path of an open one.
_FILE_NAMING = threading.Lock()


@dataclasses.dataclass(frozen=True, slots=True)
class RecoveryCut:
    """What recovery cut off the end of one segment file, for the WARN line Kafka also writes."""
    path: Path
    position: int  # the byte where the file now ends
    next_offset: int  # the offset the log continues from
    bytes_dropped: int
    records_dropped: int  # as the headers of whole batches cut off count them
    reason: str


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


def fsync_path(path: Path) -> None:
    """fsync a file, or a directory to make the creations, renames and removals in it durable."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def set_aside(directory: Path, suffix: str) -> Path:
    """Rename a partition directory to `<name>.<32 hex digits><suffix>` (durably) so that nothing opens it as a
    partition again; returns the new path."""
    aside = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{suffix}")
    os.rename(directory, aside)
    fsync_path(directory.parent)
    return aside


def write_atomically(path: Path, data: bytes, *, unless_held: bool = False) -> None:
    """Replace `path` with `data` so that a crash leaves the old file or the new one: write `<name>.tmp`, fsync it,
    rename it over `path`, fsync the directory. With `unless_held`, a file that already holds `data` is left as it
    is: a read instead of two fsyncs."""
    if unless_held and file_holds(path, data):
        return
    temporary = path.with_name(path.name + ".tmp")
    with open(temporary, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(temporary, path)
    fsync_path(path.parent)


class _HeaderReader:
    """Reads at positions of one file through a chunk of up to HEADER_CHUNK_BYTES (never past `end`): successive
    header reads that fall in the chunk cost no system call."""

    __slots__ = ("fd", "end", "chunk", "chunk_start")

    def __init__(self, fd: int, end: int):
        self.fd = fd
        self.end = end
        self.chunk = b""
        self.chunk_start = 0

    def header(self, position: int) -> BatchHeader | None:
        """The batch header at `position`, None if the file holds fewer than BATCH_HEADER_SIZE bytes there."""
        if not self._holds(position, BATCH_HEADER_SIZE):
            return None
        return parse_header(self.chunk, position - self.chunk_start)

    def first_batch_reaching(self, position: int, offset: int) -> int | None:
        """From the batch boundary `position`, the position of the first batch whose last offset is >= `offset`;
        None if there is none before the end or a header that is not a plausible v2 batch. The hops run over the
        chunk in place (records._batch), and read the next chunk where one ends."""
        while True:
            chunk_start = self.chunk_start
            code, at = _batch.hop_to_offset(self.chunk, position - chunk_start, self.end - chunk_start, offset)
            position = chunk_start + at
            if code == _batch.HOP_AT:
                return position
            if code == _batch.HOP_NONE or not self._holds(position, BATCH_HEADER_SIZE):
                return None

    def whole_batches_end(self, position: int, limit: int, max_offset: int | None) -> int:
        """From the batch boundary `position`, the end of the run of whole batches that ends by `limit` and holds
        no batch whose base offset is >= `max_offset` (None: no bound): `position` itself if none qualifies. The
        hops run over the chunk in place (records._batch); only leaving the chunk costs a pread."""
        while True:
            chunk_start = self.chunk_start
            code, at = _batch.hop_whole_batches(self.chunk, position - chunk_start, self.end - chunk_start,
                                                limit - chunk_start, max_offset)
            position = chunk_start + at
            if code == _batch.HOP_AT or not self._holds(position, LOG_OVERHEAD):
                return position

    def _holds(self, position: int, length: int) -> bool:
        start = self.chunk_start
        if position < start or position + length > start + len(self.chunk):
            self.chunk = os.pread(self.fd, max(length, min(HEADER_CHUNK_BYTES, self.end - position)), position)
            self.chunk_start = position
            return len(self.chunk) >= length
        return True


def _keep_size_fallocate():
    """libc's fallocate(2), for FALLOC_FL_KEEP_SIZE, which os.posix_fallocate cannot ask for; None where there is
    none (the reservation in `Segment.write` is then skipped)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fallocate = getattr(libc, "fallocate64", None) or libc.fallocate
    except (OSError, AttributeError):
        return None
    fallocate.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64)
    fallocate.restype = ctypes.c_int
    return fallocate


_FALLOCATE = _keep_size_fallocate()
_FALLOC_FL_KEEP_SIZE = 1


class Segment:
    def __init__(self, directory: Path, base_offset: int, config: LogConfig, size: int, now_ms: int,
                 file_suffix: str = ""):
        self.base_offset = base_offset
        self._fd: int | None = None  # opened at the first use of `fd`; _CLOSED once closed
        self.size = size
        self.log_path = directory / (segment_file_name(base_offset, LOG_SUFFIX) + file_suffix)
        self.offset_index = OffsetIndex(directory / (segment_file_name(base_offset, INDEX_SUFFIX) + file_suffix),
                                        base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(directory / (segment_file_name(base_offset, TIME_INDEX_SUFFIX) + file_suffix),
                                    base_offset, config.segment_index_bytes)
        self.transaction_index = TransactionIndex(
            directory / (segment_file_name(base_offset, TXN_INDEX_SUFFIX) + file_suffix))
        self.index_interval_bytes = config.index_interval_bytes
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.offset_of_max_timestamp = base_offset
        self.rolling_timestamp: int | None = None  # max timestamp of the first batch: what segment.ms ages by
        self.created_ms = now_ms
        jitter_bound = min(config.segment_jitter_ms, config.segment_ms)
        self.roll_jitter_ms = random.randrange(jitter_bound) if jitter_bound > 0 else 0
        self.bytes_since_last_index_entry = 0
        # whether an index holds all segment.index.bytes allow (the log then rolls): kept here as the indexes change,
        # since the log asks at every append and the indexes' `is_full` are a Python call each
        self.indexes_full = False
        # where the blocks the log file holds end, when past `size`: log.preallocate's whole segment, or what a large
        # write reserved ahead (`write`); given back at `seal`
        self.reserved_end = 0
        self._clear_tail()

    @classmethod
    def create(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int,
               file_suffix: str = "") -> "Segment":
        """A new, empty, active segment (its files must not exist). The cleaner builds its output under
        `file_suffix` `.cleaned` and renames it into place (`rename_files`)."""
        segment = cls(directory, base_offset, config, 0, now_ms, file_suffix)
        fd = os.open(segment.log_path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            if config.preallocate:
                os.posix_fallocate(fd, 0, config.segment_bytes)
                segment.reserved_end = config.segment_bytes
        finally:
            os.close(fd)  # reopened by the first append: a partition nobody writes to holds no descriptor
        segment.activate()
        return segment

    @classmethod
    def open(cls, directory: Path, base_offset: int, config: LogConfig, now_ms: int) -> tuple["Segment", bool]:
        """An existing segment, and whether both its indexes loaded and passed their sanity checks."""
        size = os.stat(directory / segment_file_name(base_offset, LOG_SUFFIX)).st_size
        segment = cls(directory, base_offset, config, size, now_ms)
        # indexes are written lazily: one too short to have reached its first entry may not exist, and that is fine
        unwritten_ok = segment.size <= config.index_interval_bytes
        indexes_ok = (segment.offset_index.load(segment.size, unwritten_ok)
                      and segment.time_index.load(unwritten_ok))
        if indexes_ok:
            last = segment.time_index.last_entry()
            if last is not None:
                segment.max_timestamp, segment.offset_of_max_timestamp = last
        else:
            segment.offset_index.reset()
            segment.time_index.reset()
        return segment, indexes_ok

    @property
    def is_empty(self) -> bool:
        """No bytes in the log file and no index entries: the state a new segment starts in."""
        return self.size == 0 and not len(self.offset_index) and not len(self.time_index)

    @property
    def fd(self) -> int:
        """The log file's descriptor, opened now if this is its first use (-1 once the segment is closed)."""
        fd = self._fd
        if fd is None:
            with _FILE_NAMING:
                if self._fd is None:
                    self._fd = os.open(self.log_path, os.O_RDWR)
                fd = self._fd
        return fd

    def release_file(self) -> None:
        """Close the log file until its next use; only while no FileRegion of it can be out (the log is loading)."""
        with _FILE_NAMING:
            fd = self._fd
            if fd == _CLOSED:
                return
            self._fd = None
        if fd is not None:
            os.close(fd)

    # -- appending ---------------------------------------------------------------------------------------------

    def append(self, data, headers: list[BatchHeader]) -> None:
        """Write whole batches at the end, then index them and publish the new size."""
        self.write(data, self.size)
        self.extend(headers)

    def write(self, data, position: int) -> None:
        """`data` (bytes-like, or a tuple of bytes-like pieces written in that order with one pwritev) at `position`.

        A large write past the blocks reserved so far first reserves the file's blocks to the end of the
        RESERVE_CHUNK_BYTES chunk it ends in, past the file's end without moving it (FALLOC_FL_KEEP_SIZE): ext4 charges
        a write that extends a file for allocating its blocks (delayed allocation, page by page), and into reserved
        blocks the same write takes about 30% less system time (docs/performance.md). Only large writes reserve, so a
        partition written a little at a time holds no blocks it does not use; `seal` gives back what the active
        segment did not fill, and a reservation that fails (no such call, a full disk) only costs the saving."""
        fd = self.fd
        length = sum(map(len, data)) if type(data) is tuple else len(data)
        end = position + length
        if length >= RESERVE_MIN_WRITE and end > self.reserved_end and _FALLOCATE is not None:
            start = position if position > self.reserved_end else self.reserved_end
            self.reserved_end = (end // RESERVE_CHUNK_BYTES + 1) * RESERVE_CHUNK_BYTES
            _FALLOCATE(fd, _FALLOC_FL_KEEP_SIZE, start, self.reserved_end - start)
        if type(data) is tuple:
            written = os.pwritev(fd, data, position)
            if written == length:  # the one call it nearly always takes
                return
            data = b"".join(data)  # a short write, rare: the rest from one joined copy
        else:
            written = os.pwrite(fd, data, position)
            if written == length:
                return
        view = memoryview(data)[written:]
        position += written
        while view:
            written = os.pwrite(fd, view, position)
            view = view[written:]
            position += written

    def extend(self, headers: list[BatchHeader]) -> None:
        """Index whole batches laid at the end and publish the new size: after `append` wrote them, or for the
        log, which holds a DeferredWrites window's bytes until it writes them (see Log)."""
        position = self.size
        for header in headers:
            position = self._index_batch(position, header)
        self.size = position

    def _index_batch(self, position: int, header: BatchHeader) -> int:
        """Account for the batch at `position`: max timestamp, sparse index entries, next offset (Kafka's rules);
        where it ends."""
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.offset_of_max_timestamp = header.last_offset
        if self.rolling_timestamp is None:
            self.rolling_timestamp = header.max_timestamp
        if self.bytes_since_last_index_entry > self.index_interval_bytes:
            self.offset_index.append(header.last_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            self._note_indexes_full()
            self.bytes_since_last_index_entry = 0
            self._clear_tail()
        end = position + header.size
        self._extend_tail(position, end, header)
        self.bytes_since_last_index_entry += end - position
        self.next_offset = header.last_offset + 1
        return end

    def _note_indexes_full(self) -> None:
        self.indexes_full = self.offset_index.is_full or self.time_index.is_full

    def _clear_tail(self) -> None:
        """Start an empty tail (new arrays, so a reader holding the old ones still sees them whole)."""
        self._tail_bases, self._tail_lasts = array("q"), array("q")
        self._tail_positions, self._tail_ends = array("q"), array("q")

    def _extend_tail(self, position: int, end: int, header: BatchHeader) -> None:
        """The batch from `position` to `end` joins the tail; its end goes last, since readers bisect the ends."""
        self._tail_bases.append(header.base_offset)
        self._tail_lasts.append(header.last_offset)
        self._tail_positions.append(position)
        self._tail_ends.append(end)

    def load_tail(self) -> bool:
        """Rebuild the in-memory append state from the batches after the last index entry (clean open, truncation);
        False if those batches do not end exactly at the end of the file (the segment then needs `recover`)."""
        last = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = last if last else (NO_TIMESTAMP, self.base_offset)
        position = self.offset_index.last_position()
        self.next_offset = self.base_offset
        self.rolling_timestamp = None
        if self.size:
            self.rolling_timestamp = self.read_header(0).max_timestamp
        self.bytes_since_last_index_entry = self.size - position
        self._note_indexes_full()
        self._clear_tail()
        end = position
        for position, header in self.iter_headers(position):
            end = position + header.size
            self._extend_tail(position, end, header)
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp, self.offset_of_max_timestamp = header.max_timestamp, header.last_offset
            self.next_offset = header.last_offset + 1
        return end == self.size

    # -- reading -----------------------------------------------------------------------------------------------

    def read_header(self, position: int) -> BatchHeader:
        return parse_header(os.pread(self.fd, BATCH_HEADER_SIZE, position))

    def iter_headers(self, start: int, end: int | None = None) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each whole batch from `start` up to `end` (default: the published size), stopping
        at anything that is not a plausible v2 batch header."""
        end = self.size if end is None else end
        return self._headers(_HeaderReader(self.fd, end), start, end)

    @staticmethod
    def _headers(reader: _HeaderReader, start: int, end: int) -> Iterator[tuple[int, BatchHeader]]:
        position = start
        while position + BATCH_HEADER_SIZE <= end:
            header = reader.header(position)
            if header is None:
                return
            if header.magic != MAGIC_V2 or header.size < BATCH_HEADER_SIZE or position + header.size > end:
                return
            yield position, header
            position += header.size

    def iter_batches(self, chunk_bytes: int = _SCAN_CHUNK_BYTES) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Header and bytes of each whole batch of the file up to the published size, read `chunk_bytes` at a time
        (the cleaner's sequential read)."""
        end = self.size
        chunk = b""
        chunk_start = position = 0
        while position + BATCH_HEADER_SIZE <= end:
            if position + BATCH_HEADER_SIZE > chunk_start + len(chunk):
                chunk, chunk_start = os.pread(self.fd, min(chunk_bytes, end - position), position), position
            header = parse_header(chunk, position - chunk_start)
            if header.magic != MAGIC_V2 or header.size < BATCH_HEADER_SIZE or position + header.size > end:
                raise ValueError(f"{self.log_path}: no whole v2 batch at byte {position}")
            if position + header.size > chunk_start + len(chunk):
                chunk, chunk_start = os.pread(self.fd, min(max(header.size, chunk_bytes), end - position),
                                              position), position
            yield header, memoryview(chunk)[position - chunk_start:position - chunk_start + header.size]
            position += header.size

    def find_batch(self, offset: int, end: int | None = None,
                   reader: _HeaderReader | None = None) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset`: index, then header hops."""
        end = self.size if end is None else end
        reader = reader or _HeaderReader(self.fd, end)
        position = reader.first_batch_reaching(self.offset_index.lookup(offset)[1], offset)
        return None if position is None else (position, reader.header(position))

    def read(self, offset: int, max_bytes: int, max_offset: int | None,
             min_one_batch: bool = True, end: int | None = None) -> FileRegion | None:
        """Whole batches from the one holding `offset`, at least one, then more while they fit in `max_bytes`;
        none whose base offset is >= `max_offset`, none past byte `end` (a batch boundary; default: the size).
        With `min_one_batch` False a first batch larger than `max_bytes` gives an empty region (the data is here, it
        just does not fit). In the tail the in-memory columns answer; elsewhere the offset index skips to the last
        indexed batch that fits, so only the headers after it (under index.interval.bytes of them) are hopped over,
        a chunk at a time."""
        end_of_data = self.size if end is None else end
        ends = self._tail_ends
        published = bisect.bisect_right(ends, end_of_data)
        if published and ends[published - 1] == end_of_data and offset >= self._tail_bases[0]:
            return self._read_tail(offset, max_bytes, max_offset, min_one_batch, published)
        reader = _HeaderReader(self.fd, end_of_data)
        found = self.find_batch(offset, end_of_data, reader)
        if found is None:
            return None
        start, header = found
        if max_offset is not None and header.base_offset >= max_offset:
            return None
        if not min_one_batch and header.size > max_bytes:
            return FileRegion(reader.fd, start, 0)
        limit = start + max_bytes if start + max_bytes < end_of_data else end_of_data
        indexed_end = self.offset_index.floor_position(limit, max_offset)
        region_end = indexed_end if indexed_end > start + header.size else start + header.size
        region_end = reader.whole_batches_end(region_end, start + max_bytes, max_offset)
        return FileRegion(reader.fd, start, region_end - start)  # its fd: a property call less

    def _read_tail(self, offset: int, max_bytes: int, max_offset: int | None, min_one_batch: bool,
                   published: int) -> FileRegion | None:
        """`read` over the tail's first `published` batches, from memory: the same answer, no system call."""
        ends, bases = self._tail_ends, self._tail_bases
        first = bisect.bisect_left(self._tail_lasts, offset, 0, published)
        if first == published:
            return None
        start = self._tail_positions[first]
        if max_offset is not None and bases[first] >= max_offset:
            return None
        if not min_one_batch and ends[first] - start > max_bytes:
            return FileRegion(self.fd, start, 0)
        stop = bisect.bisect_right(ends, start + max_bytes, first, published)  # batches before it fit
        if max_offset is not None:
            stop = bisect.bisect_left(bases, max_offset, first, stop)
        return FileRegion(self.fd, start, ends[(stop if stop > first else first + 1) - 1] - start)

    def find_timestamp(self, timestamp: int, min_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `min_offset` whose timestamp is >= `timestamp`."""
        below = self.time_index.floor_below(timestamp)
        start = max(min_offset, below + 1 if below is not None else self.base_offset)
        found = self.find_batch(start)
        if found is None:
            return None
        for position, header in self.iter_headers(found[0]):
            if header.max_timestamp >= timestamp and header.last_offset >= min_offset:
                for offset, record_timestamp in self._record_timestamps(position, header):
                    if offset >= min_offset and record_timestamp >= timestamp:
                        return offset, record_timestamp
        return None

    def find_max_timestamp_offset(self) -> int:
        """Offset of the first record carrying the segment's max timestamp (decodes the one batch holding it)."""
        found = self.find_batch(self.offset_of_max_timestamp)
        if found is not None:
            for offset, record_timestamp in self._record_timestamps(*found):
                if record_timestamp == self.max_timestamp:
                    return offset
        return self.offset_of_max_timestamp

    def _record_timestamps(self, position: int, header: BatchHeader) -> list[tuple[int, int]]:
        _, records = decode_batch(os.pread(self.fd, header.size, position))
        return [(header.base_offset + record.offset_delta, record.timestamp) for record in records]

    def largest_timestamp(self) -> int:
        """What retention.ms ages the segment by: its max record timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return self.last_modified_ms

    @property
    def last_modified_ms(self) -> int:
        """The log file's mtime: when a batch was last written to it (Kafka's LogSegment.lastModified)."""
        stat = os.stat(self.log_path) if self._fd is None else os.fstat(self._fd)
        return stat.st_mtime_ns // 1_000_000

    # -- recovery and truncation -------------------------------------------------------------------------------

    def recover(self) -> "RecoveryCut | None":
        """Check every batch, rebuild the indexes and cut the file after the last valid batch; what was cut off
        (None when every byte was valid)."""
        file_size = os.fstat(self.fd).st_size
        self.offset_index.reset()
        self.time_index.reset()
        self.next_offset = self.base_offset
        self.max_timestamp, self.offset_of_max_timestamp = NO_TIMESTAMP, self.base_offset
        self.rolling_timestamp = None
        self.bytes_since_last_index_entry = 0
        self._clear_tail()
        valid_end = 0
        scan = self._scan_valid_batches(file_size)
        while True:
            try:
                position, header = next(scan)
            except StopIteration as stop:
                reason = stop.value
                break
            valid_end = self._index_batch(position, header)
        cut = None
        if valid_end < file_size:
            cut = RecoveryCut(self.log_path, valid_end, self.next_offset, file_size - valid_end,
                              self.count_records(valid_end, file_size), reason)
            os.ftruncate(self.fd, valid_end)
        self.size = valid_end
        self.reserved_end = 0
        self.offset_index.rewrite()
        self.time_index.rewrite()
        return cut

    def count_records(self, start: int, end: int) -> int:
        """Records in the batches from `start` to `end` as their headers count them, a last batch cut short
        included (no CRC check): what a truncation drops, for its log line."""
        count, position = 0, start
        while position + BATCH_HEADER_SIZE <= end:
            header = self.read_header(position)
            if header.magic != MAGIC_V2 or header.size < BATCH_HEADER_SIZE:
                break
            count += header.last_offset_delta + 1
            position += header.size
        return count

    def _scan_valid_batches(self, file_size: int) -> Iterator[tuple[int, BatchHeader]]:
        """Batches from the start of the file up to the first one that is cut short, malformed or fails its CRC;
        returns why it stopped there (None at the end of the file)."""
        chunk = b""
        chunk_start = 0
        position = 0
        next_offset = self.base_offset
        while position + BATCH_HEADER_SIZE <= file_size:
            if position + BATCH_HEADER_SIZE > chunk_start + len(chunk):
                chunk, chunk_start = os.pread(self.fd, _SCAN_CHUNK_BYTES, position), position
            header = parse_header(chunk, position - chunk_start)
            size = header.size
            if position + size > file_size and header.magic == MAGIC_V2 and size >= BATCH_HEADER_SIZE:
                return f"a batch of {size} bytes with {file_size - position} left in the file"
            if (header.magic != MAGIC_V2 or size < BATCH_HEADER_SIZE
                    or header.base_offset < next_offset or header.last_offset_delta < 0
                    or header.last_offset - self.base_offset > INT32_MAX):
                return "an invalid batch header"
            if position + size > chunk_start + len(chunk):
                chunk, chunk_start = os.pread(self.fd, max(size, _SCAN_CHUNK_BYTES), position), position
            if batch_crc(chunk, position - chunk_start, size) != header.crc:
                return "a CRC-32C mismatch"
            yield position, header
            next_offset = header.last_offset + 1
            position += size
        return f"{file_size - position} bytes too few for a batch header" if position < file_size else None

    def truncate_to(self, offset: int) -> None:
        """Cut the batch holding `offset` and everything after it."""
        found = self.find_batch(offset)
        if found is None:
            return
        position = found[0]
        os.ftruncate(self.fd, position)
        self.size = position
        self.reserved_end = 0
        self.offset_index.truncate_to_position(position)
        self.time_index.truncate_to_offset(offset)
        self.transaction_index.truncate_from(offset)
        self.load_tail()

    # -- lifecycle ---------------------------------------------------------------------------------------------

    def activate(self) -> None:
        self.offset_index.activate()
        self.time_index.activate()

    def seal(self) -> None:
        """The segment stops being active: final time index entry, indexes trimmed and synced (Kafka's roll)."""
        self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp, skip_full_check=True)
        self.offset_index.seal(segment_empty=self.size == 0)
        self.time_index.seal(segment_empty=self.size == 0)
        if self.reserved_end > self.size:
            os.ftruncate(self.fd, self.size)  # which frees the blocks past the end too (tested on ext4)
            self.reserved_end = 0
        self._clear_tail()

    def flush(self) -> None:
        """fsync what was written; a log file not open (never used, or closed) has nothing of ours to sync."""
        if self._fd is not None and self._fd != _CLOSED:
            os.fdatasync(self._fd)
        self.offset_index.flush()
        self.time_index.flush()
        self.transaction_index.flush()

    def mark_deleted(self) -> None:
        """Rename the files to `*.deleted`; the log descriptor stays open for regions already handed out."""
        self.rename_files("", DELETED_SUFFIX)

    def rename_files(self, old_suffix: str, new_suffix: str) -> None:
        """Rename the index files, then the log, from `<name><old_suffix>` to `<name><new_suffix>` (the cleaner's
        swap relies on the log going last); indexes are closed first, a missing one only changes its name, and the
        log descriptor stays open."""
        self.offset_index.close()
        self.time_index.close()

        def renamed(path: Path) -> Path:
            return path.with_name(path.name[:len(path.name) - len(old_suffix)] + new_suffix)

        for index in (self.offset_index, self.time_index, self.transaction_index):
            if index.path.exists():
                index.rename(renamed(index.path))
            else:  # not written yet (indexes are created lazily): it will be, under the new name
                index.path = renamed(index.path)
        new_log_path = renamed(self.log_path)
        with _FILE_NAMING:
            os.replace(self.log_path, new_log_path)
            self.log_path = new_log_path

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        self.transaction_index.close()
        with _FILE_NAMING:
            fd, self._fd = self._fd, _CLOSED
        if fd is not None and fd != _CLOSED:
            os.close(fd)

    def delete_files(self) -> None:
        self.close()
        for path in (self.log_path, self.offset_index.path, self.time_index.path, self.transaction_index.path):
            path.unlink(missing_ok=True)

    def __repr__(self) -> str:
        return f"Segment(base_offset={self.base_offset}, size={self.size}, next_offset={self.next_offset})"
