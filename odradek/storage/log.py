"""The partition log: an ordered run of segments with appends at the end and reads anywhere.

The segment list is copy-on-write: appends that roll, retention, DeleteRecords and truncation build a new tuple
under `_lock` and swap the reference, while readers (`read`, timestamp lookups) take whatever tuple is current,
binary-search it and never wait for a writer. Append state that readers look at (`size` of the active segment, the
log end offset) is published after the bytes are in the file, or, for an append made inside a `DeferredWrites`
window, with the bytes held by the log until the window closes: every other operation of the log (a read, a
flush, a roll, a truncation, an append outside the window) writes them first, so none ever sees the file behind
its state. A large window's bytes are written by the DeferredWrites' writer thread instead (one such write per log
at a time), and then every operation but a deferred append waits for that write first. There is no asyncio here:
the broker's event loop calls `append`/`read`, and periodic work (`flush_if_due`, `apply_retention`,
`delete_expired_files`) is driven by the caller, possibly from a worker thread, which is why mutations hold a
`threading.Lock` and fsyncs run outside it.

Everything follows Kafka's log (UnifiedLog/LocalLog/LogSegment): offsets are assigned by rewriting batch headers in
place, segments roll on size, age (by record timestamps, minus jitter), full indexes or relative-offset overflow,
retention removes whole non-active segments by largest timestamp and by total size, a removed segment is renamed
`*.deleted` and its files go after `file.delete.delay.ms`, and an unclean start re-validates every batch from the
segment holding the recovery point and cuts the log at the first bad one.
"""

from __future__ import annotations

import bisect
import logging
import operator
import os
import queue
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from threading import get_ident
from typing import Any, NamedTuple
from pathlib import Path

from odradek.clock import now_ms
from odradek.config import LogConfig
from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import NO_TIMESTAMP, STAMPED_BYTES, BatchHeader, stamped
from odradek.records.batch import assign_offsets as assign_batch_offsets
from odradek.records.region import FileRegion
from odradek.storage.leader_epochs import LeaderEpochCache
from odradek.storage.producer_state import ProducerStateManager
from odradek.storage.transaction_index import AbortedTransaction
from odradek.storage.segment import (
    CLEANED_SUFFIX, DELETED_DIR_SUFFIX, DELETED_SUFFIX, INDEX_SUFFIX, INT32_MAX, LOG_SUFFIX, SWAP_SUFFIX,
    TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, RecoveryCut, Segment,
    fsync_path, segment_file_name, set_aside,
)

_BASE_OFFSET_OF = operator.attrgetter("base_offset")

log = logging.getLogger("odradek.storage")


DEFERRED_PIECES_MAX = 512  # pieces one log holds unwritten at most: one pwritev takes up to IOV_MAX (1024)
WRITER_THREAD_MIN_BYTES = 256 * 1024  # a window holding this much is written by the writer thread


class PendingWrite:
    """A write handed to the WriterThread: the part of concurrent.futures.Future the log, the network shell and the
    tests use (done, exception, result, add_done_callback), on one lock held from its hand-off until it is done."""

    __slots__ = ("_finished", "_error", "_callbacks", "_unfinished")

    def __init__(self):
        self._finished = False
        self._error: BaseException | None = None
        self._callbacks: list = []
        self._unfinished = threading.Lock()
        self._unfinished.acquire()

    def done(self) -> bool:
        return self._finished

    def exception(self, timeout: float | None = None) -> BaseException | None:
        """The write's error, None if it succeeded: once it is done (TimeoutError if not in `timeout` seconds)."""
        if not self._finished:
            if not self._unfinished.acquire(timeout=-1 if timeout is None else timeout):
                raise TimeoutError("the write is not done")
            self._unfinished.release()
        return self._error

    def result(self, timeout: float | None = None) -> None:
        if (error := self.exception(timeout)) is not None:
            raise error

    def add_done_callback(self, callback: Callable[["PendingWrite"], Any]) -> None:
        """`callback(self)` once the write is done: at once if it is, else on the writer thread."""
        with _CALLBACKS_LOCK:
            if not self._finished:
                self._callbacks.append(callback)
                return
        callback(self)

    def finish(self, error: BaseException | None) -> None:
        with _CALLBACKS_LOCK:
            self._error = error
            self._finished = True
            callbacks, self._callbacks = self._callbacks, []
        self._unfinished.release()
        for callback in callbacks:
            try:
                callback(self)
            except Exception:
                log.exception("a callback of a finished write failed")


_CALLBACKS_LOCK = threading.Lock()  # PendingWrite's callbacks, added on the loop and run on the writer thread


class WriterThread:
    """One thread running what it is handed, in order: the large DeferredWrites windows' writes. A hand-off is one
    put on a C queue and a PendingWrite; a ThreadPoolExecutor's built a Condition per write and ran a Python loop
    of locks around each, a quarter of the event loop's Python under two wire producers (py-spy)."""

    def __init__(self):
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="log-writer", daemon=True)
        self._thread.start()

    def submit(self, function: Callable[..., Any], *args) -> PendingWrite:
        write = PendingWrite()
        self._queue.put((write, function, args))
        return write

    def shutdown(self) -> None:
        """Stop once what was handed over is done."""
        self._queue.put(None)
        self._thread.join()

    def _run(self) -> None:
        take = self._queue.get
        while (item := take()) is not None:
            write, function, args = item
            try:
                function(*args)
            except BaseException as exc:  # the write's outcome, for whoever waits on it
                write.finish(exc)
            else:
                write.finish(None)


class DeferredWrites:
    """A window in which appends leave their bytes for one write per log when it closes.

    The network shell opens it before a request it hands to a handler when more requests follow in the same
    receive, or the request is large (WRITER_THREAD_MIN_BYTES or more), and closes it (`write`) before any answer
    goes out and before it waits for anything, so everything it covers is one synchronous run of handlers on one
    thread: a pipelining producer's requests of one receive, whose appends to a partition then cost one pwritev
    instead of one each (a sticky-partitioning client sends them to the same partition). Nothing is acknowledged
    before the write, since answers leave only after it; a crash before it loses only what nobody was told was
    written. Appends from any other thread, or while the window is closed (replication, the coordinators' tasks,
    the cleaner), write at once as before.

    A window holding WRITER_THREAD_MIN_BYTES or more (a batching producer's large batches) is written by one writer
    thread instead, whose pwritev lets go of the GIL: the copy into the page cache, the largest part of such a
    produce's cost, then runs on another core while the event loop receives and checks the next requests. Its
    answers wait for the writes (the futures `write` returns). Each log has at most one such write at a time, and
    waits for it before anything else it does but a deferred append (see Log); a write that fails leaves its bytes
    held by the log again, ahead of any held since, for the next write to try."""

    __slots__ = ("thread", "_logs", "_held_bytes", "_writer")

    def __init__(self):
        self.thread: int | None = None  # the thread whose appends are deferred (its `get_ident`); None while closed
        self._logs: dict[Log, None] = {}  # logs holding bytes this window deferred, in order
        self._held_bytes = 0  # what this window's appends deferred
        self._writer: WriterThread | None = None  # started at the first large window

    def open(self) -> None:
        self.thread = get_ident()

    def hold(self, log: "Log", size: int) -> None:
        """`log` holds `size` more bytes this window deferred (said at each append; a log that still holds bytes a
        failed write left is written at the window's close like the others)."""
        self._logs[log] = None
        self._held_bytes += size

    def write(self) -> tuple[PendingWrite, ...]:
        """Close the window and write what its appends left. A large window is handed to the writer thread: the
        futures of its writes, which fail with the OSError of a failed one. Otherwise written here: every log is
        tried, then the first OSError raised (those logs keep their bytes, which their next operation tries again),
        and no futures."""
        self.thread = None
        if not self._logs:
            return ()
        logs, self._logs = self._logs, {}
        held, self._held_bytes = self._held_bytes, 0
        if held >= WRITER_THREAD_MIN_BYTES:
            if self._writer is None:
                self._writer = WriterThread()
            return tuple(future for held_by in logs if (future := held_by.hand_to_writer(self._writer)) is not None)
        failure = None
        for held in logs:
            try:
                held.write_deferred()
            except OSError as exc:
                failure = failure or exc
        if failure is not None:
            raise failure
        return ()

    def close(self) -> None:
        """Stop the writer thread (after the logs closed, which waited for their writes)."""
        if self._writer is not None:
            self._writer.shutdown()


def call_when_written(write: PendingWrite, loop, callback: Callable[[BaseException | None], Any]) -> None:
    """Once the writer thread's `write` is done, `callback(its exception or None)` on the event loop `loop`
    (nothing if the loop has stopped: nobody is left to tell). Never a future chained to the write: cancelling what
    waits for it (a connection closing) must not cancel a write still queued."""
    def done(_write: PendingWrite) -> None:
        try:
            loop.call_soon_threadsafe(callback, write.exception())
        except RuntimeError:
            pass

    write.add_done_callback(done)


class _Writing(NamedTuple):
    """A log's bytes handed to the writer thread: where they go, and the pieces, held again if the write fails."""

    future: PendingWrite
    at: int
    pieces: tuple


class AppendResult(NamedTuple):  # a tuple: built once per produce request, cheaper than a frozen dataclass
    first_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


class Log:
    def __init__(self, directory: Path, config: LogConfig, segments: list[Segment], log_start_offset: int,
                 clock: Callable[[], int], deferred_writes: DeferredWrites | None = None):
        self.directory = directory
        self._deferred_writes = deferred_writes
        # Bytes appended in a DeferredWrites window and not written yet: pieces laid end to end from `_unwritten_at`
        # in the active segment (a roll writes them first, so they never span two segments).
        self._unwritten: list = []
        self._unwritten_at = 0
        self._writing: _Writing | None = None  # bytes before `_unwritten_at` the writer thread is writing
        # `config`, `log_start_offset` and `log_end_offset` (the offset the next appended record gets) are read on
        # every produce and fetch: plain attributes, which only the log sets (as properties each read was a call,
        # 80 ns on Python 3.11)
        self.config = config
        self._clock = clock
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._segments: tuple[Segment, ...] = tuple(segments)
        self.log_end_offset = segments[-1].next_offset
        self.log_start_offset = log_start_offset
        self._recovery_point = self.log_end_offset
        self._unflushed_messages = 0
        self._last_flush_ms = clock()
        self._directory_dirty = False
        self._truncations = 0
        self._pending_deletes: list[tuple[int, Segment]] = []
        self.producer_state = ProducerStateManager(directory)
        self.leader_epochs = LeaderEpochCache.load(
            directory, ((header.partition_leader_epoch, header.base_offset) for header, _ in self.iter_batches()))
        # entries for records recovery cut go; one starting at the log end (a leader's epoch with no batch yet) stays
        self.leader_epochs.truncate_from_end(self.log_end_offset + 1)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        self.cleaner_lock = threading.Lock()  # held by the log cleaner while it copies this log
        self.is_deleted = False

    # -- opening and recovery ----------------------------------------------------------------------------------

    @classmethod
    def open(cls, directory: Path, config: LogConfig, *, recovery_point: int = 0, clean_shutdown: bool,
             log_start_offset: int | None = None, now_ms: Callable[[], int] = now_ms,
             deferred_writes: DeferredWrites | None = None) -> "Log":
        """Load the partition directory (creating it if needed); recover it unless it was shut down cleanly."""
        directory.mkdir(parents=True, exist_ok=True)
        now = now_ms()
        swapped_bases, names = _clear_stray_files(directory)
        bases = sorted(base for name in names if (base := _segment_base(name, LOG_SUFFIX)) is not None)
        loaded = [Segment.open(directory, base, config, now) for base in bases]
        segments = [segment for segment, _ in loaded]
        if clean_shutdown:
            first_unflushed = len(segments)
        else:
            first_unflushed = max(0, bisect.bisect_right(segments, recovery_point, key=_BASE_OFFSET_OF) - 1)
        for position, (segment, indexes_ok) in enumerate(loaded):
            if indexes_ok and segment.is_empty:
                continue  # nothing to check or rebuild (most partitions of a big broker): the file stays unopened
            if position >= first_unflushed or not indexes_ok or not segment.load_tail():
                cut = segment.recover()
                if cut is None:
                    continue
                unflushed = position >= first_unflushed  # past the recovery point a cut ends the log
                later = segments[position + 1:] if unflushed else []
                _warn_truncation(cut, later)
                if unflushed:
                    for dropped in later:
                        dropped.delete_files()
                    segments = segments[:position + 1]
                    break
        for base in swapped_bases:
            segments = _drop_segments_replaced_by_swap(segments, base)
        if not segments:
            segments = [Segment.create(directory, log_start_offset or 0, config, now)]
        for segment in segments[:-1]:
            segment.seal()
        segments[-1].activate()
        start = max(log_start_offset or 0, segments[0].base_offset)
        log = cls(directory, config, segments, start, now_ms, deferred_writes)
        if start > log.log_end_offset:
            log._truncate_fully_and_start_at(start)
        log.producer_state.load(log._segments, log.log_start_offset, log.log_end_offset, names)
        for segment in log._segments:  # loading read some files; a partition holds descriptors only once in use
            segment.release_file()
        if not clean_shutdown:
            # As Kafka's LogLoader: what recovery checked is not fsynced here (it is in the page cache, which is all
            # the default flush policy ever promises), so the recovery point stays where the checkpoint had it and
            # a second crash checks the same tail again. Start-up does not wait for gigabytes to reach the disk.
            log._recovery_point = min(recovery_point, log.log_end_offset)
        return log

    # -- properties ------------------------------------------------------------------------------------------

    @property
    def recovery_point(self) -> int:
        """Every offset below this is fsynced."""
        return self._recovery_point

    @property
    def segments(self) -> tuple[Segment, ...]:
        return self._segments

    def offset_times(self, now_ms: int) -> list[tuple[int, int]]:
        """(offset, last modified ms) of each segment's first offset still in the log, then of the log end when the
        active segment holds data (written up to now): the points Kafka's old-style offsets answer with."""
        segments, start = self._segments, self.log_start_offset
        points = [(max(segment.base_offset, start), segment.last_modified_ms) for segment in segments]
        if segments[-1].size > 0:
            points.append((max(self.log_end_offset, start), now_ms))
        return points

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    def update_config(self, config: LogConfig) -> None:
        with self._lock:
            self.config = config
            self._segments[-1].index_interval_bytes = config.index_interval_bytes

    # -- appending ---------------------------------------------------------------------------------------------

    def check_sizes(self, data, headers: list[BatchHeader]) -> None:
        """The size limits `append` checks first (max.message.bytes per batch, segment.bytes in all), for callers
        that do costlier checks of their own before appending (Produce walks every record)."""
        config = self.config
        total = 0
        for header in headers:
            size = header.size
            if size > config.max_message_bytes:
                raise KafkaError(ErrorCode.MESSAGE_TOO_LARGE,
                                 f"Record batch of {size} bytes exceeds max.message.bytes {config.max_message_bytes}")
            total += size
        if total != len(data):
            raise KafkaError(ErrorCode.CORRUPT_MESSAGE, f"Batches of {total} bytes in {len(data)} bytes of records")
        if total > config.segment_bytes:
            raise KafkaError(ErrorCode.RECORD_LIST_TOO_LARGE,
                             f"Records of {total} bytes exceed segment.bytes {config.segment_bytes}")

    def append(self, data, headers: list[BatchHeader], *, assign_offsets: bool = True, now_ms: int | None = None,
               partition_leader_epoch: int | None = None, sizes_checked: bool = False) -> AppendResult:
        """Append whole v2 batches (`headers` from `validate_batches`, laid end to end in `data`).

        With `assign_offsets` (the produce path) the batches get dense offsets from the log end offset, the leader
        epoch if given, and LogAppendTime timestamps if the topic uses them, in a private copy written with one
        write. CreateTime timestamps are not the log's to check: Produce checks every record's against
        message.timestamp.{before,after}.max.ms before it appends (records.validation). Without `assign_offsets`
        (replication, the cleaner) the batches keep their offsets, which must increase from the log end offset.
        `sizes_checked`: the caller ran `check_sizes` on these batches already (Produce, before it walked them).
        """
        config = self.config
        now = self._clock() if now_ms is None else now_ms
        if not sizes_checked:
            self.check_sizes(data, headers)
        total = len(data)
        append_time = now if assign_offsets and config.log_append_time else -1
        deferred = self._deferred_writes
        defer = deferred is not None and deferred.thread == get_ident()
        with self._lock:
            if (self._unwritten or self._writing is not None) and not defer:
                self._write_unwritten()
            if not headers:
                return AppendResult(self.log_end_offset, self.log_end_offset - 1, append_time,
                                    self.log_start_offset)
            if assign_offsets and append_time < 0 and len(headers) == 1:
                # Produce v3+'s one CreateTime batch: what the log stamps (base offset, leader epoch) lies in the
                # first STAMPED_BYTES, before the CRC'd part, so only they are made anew and the rest is written as
                # it came (a copy of every byte less: as much as the pwrite's own copy for a 1 MB batch)
                head, header = stamped(headers[0], self.log_end_offset, partition_leader_epoch)
                headers = [header]
                data = (head, memoryview(data)[STAMPED_BYTES:])
            elif assign_offsets:
                buffer = bytearray(data)
                headers = assign_batch_offsets(buffer, headers, self.log_end_offset,
                                               log_append_time_ms=append_time if append_time >= 0 else None,
                                               partition_leader_epoch=partition_leader_epoch)
                data = buffer
            else:
                _check_increasing(headers, self.log_end_offset)
            first_offset, last_offset = headers[0].base_offset, headers[-1].last_offset
            if len(headers) == 1:  # what Produce v3+ carries: no generator per field
                max_timestamp, record_count = headers[0].max_timestamp, headers[0].record_count
            else:
                max_timestamp = max(header.max_timestamp for header in headers)
                record_count = sum(header.record_count for header in headers)
            segment = self._maybe_roll(total, first_offset, last_offset, max_timestamp, now)
            if defer:
                unwritten = self._unwritten
                if not unwritten:
                    self._unwritten_at = segment.size
                segment.extend(headers)
                deferred.hold(self, total)
                if type(data) is tuple:
                    unwritten += data
                else:
                    unwritten.append(data)
                if len(unwritten) >= DEFERRED_PIECES_MAX:
                    self._write_unwritten()
            else:
                segment.append(data, headers)
            self.log_end_offset = last_offset + 1
            if headers[-1].partition_leader_epoch > self.leader_epochs.latest_epoch:
                for header in headers:
                    self.leader_epochs.assign(header.partition_leader_epoch, header.base_offset)
            self._unflushed_messages += record_count
            flush_now = self._unflushed_messages >= config.flush_messages
            # tuple.__new__: the NamedTuple's own __new__ is a Python function, a third of a microsecond per append
            result = tuple.__new__(AppendResult, (first_offset, last_offset, append_time, self.log_start_offset))
        if flush_now:
            self.flush()
        return result

    def write_deferred(self) -> None:
        """Write the bytes appends in a DeferredWrites window left (OSError, with them kept, if that fails)."""
        if self._unwritten or self._writing is not None:
            with self._lock:
                self._write_unwritten()

    def hand_to_writer(self, writer: WriterThread) -> PendingWrite | None:
        """Hand the bytes a DeferredWrites window left to its writer thread, once this log's previous such write is
        done: the future of the write (None if nothing is held)."""
        with self._lock:
            if self._writing is not None:
                self._wait_for_writing()
            if not self._unwritten:
                return None
            pieces, at = tuple(self._unwritten), self._unwritten_at
            self._writing = _Writing(writer.submit(self._segments[-1].write, pieces, at), at, pieces)
            self._unwritten = []
            return self._writing.future

    def written_size(self, segment: Segment) -> int:
        """How much of `segment` is in its file: its size, less what a DeferredWrites window holds for it or its
        writer thread is writing. For readers on other threads that read a segment without going through the log
        (the cleaner's scan of headers)."""
        with self._lock:
            if segment is self._segments[-1]:
                if self._writing is not None:
                    return self._writing.at
                if self._unwritten:
                    return self._unwritten_at
            return segment.size

    def _write_unwritten(self) -> None:
        """Under `_lock`: the deferred bytes into the active segment, where its state already places them (after
        the writer thread's write of earlier ones)."""
        if self._writing is not None:
            self._wait_for_writing()
        unwritten = self._unwritten
        if unwritten:
            self._segments[-1].write(tuple(unwritten), self._unwritten_at)
            self._unwritten = []

    def _wait_for_writing(self) -> None:
        """Under `_lock`: wait for the writer thread's write; if it failed (its connection was told so), its bytes
        are held again, ahead of those deferred since, which follow them in the file."""
        writing, self._writing = self._writing, None
        if writing.future.exception() is not None:
            self._unwritten[:0] = writing.pieces
            self._unwritten_at = writing.at

    def _maybe_roll(self, size: int, first_offset: int, last_offset: int, max_timestamp: int, now: int) -> Segment:
        """The segment to append to, after rolling if Kafka would (LogSegment.shouldRoll)."""
        config = self.config
        active = self._segments[-1]
        if active.rolling_timestamp is not None and active.rolling_timestamp >= 0:
            time_waited = max_timestamp - active.rolling_timestamp
        else:
            time_waited = now - active.created_ms
        if (active.size > config.segment_bytes - size
                or (active.size > 0 and time_waited > config.segment_ms - active.roll_jitter_ms)
                or active.indexes_full
                or last_offset - active.base_offset > INT32_MAX):
            return self._roll(first_offset, now)
        return active

    def roll(self) -> None:
        """Start a new active segment at the log end offset (nothing happens if the active one is empty)."""
        with self._lock:
            self._roll(self.log_end_offset, self._clock())

    def _roll(self, base_offset: int, now: int) -> Segment:
        self._write_unwritten()  # they belong to the segment about to be sealed
        active = self._segments[-1]
        if active.size == 0:
            if active.base_offset == base_offset:
                return active
            active.delete_files()  # empty: no reader can hold a region of it
            kept = self._segments[:-1]
        else:
            active.seal()
            kept = self._segments
            self.producer_state.take_snapshot(base_offset)
        segment = Segment.create(self.directory, base_offset, self.config, now)
        self._segments = kept + (segment,)
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self._directory_dirty = True
        return segment

    # -- reading -----------------------------------------------------------------------------------------------

    def iter_batches(self) -> Iterator[tuple[BatchHeader, memoryview]]:
        """Header and bytes of every batch from the log start to the end, over a snapshot of the segments: how the
        coordinators load their internal topics at start. Not for fetches, which hand out FileRegions instead."""
        self.write_deferred()
        start = self.log_start_offset
        for segment in self._segments:
            for header, batch in segment.iter_batches():
                if header.last_offset >= start:
                    yield header, batch

    def read(self, offset: int, max_bytes: int, *, max_offset: int | None = None,
             min_one_batch: bool = True, written_only: bool = False) -> FileRegion | None:
        """Whole batches from the one holding `offset`: at least one (with `min_one_batch` False, none when it is
        larger than `max_bytes`), more while they fit in `max_bytes`, none whose base offset is >= `max_offset`.
        None at the log end. OFFSET_OUT_OF_RANGE outside the log. With `written_only` (on the event loop) a write
        the writer thread has in flight is not waited for: the read stops where that write starts, None if nothing
        before it is wanted (`write_in_flight` is what to wait for then)."""
        written_end = None
        writing = self._writing
        if written_only and writing is not None and not self._unwritten and not writing.future.done():
            written_end = writing.at  # of the active segment: a roll waits for the write first
        elif self._unwritten or writing is not None:
            self.write_deferred()
        segments = self._segments
        log_end = self.log_end_offset
        if offset < self.log_start_offset or offset > log_end:
            raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                             f"Offset {offset} is outside the log [{self.log_start_offset}, {log_end}]")
        if offset == log_end:
            return None
        first = bisect.bisect_right(segments, offset, key=_BASE_OFFSET_OF) - 1
        first = first if first > 0 else 0  # (min and max cost ten times a comparison: this runs per Fetch)
        active = segments[-1]
        for segment in segments[first:]:
            region = segment.read(offset, max_bytes, max_offset, min_one_batch,
                                  written_end if segment is active else None)
            if region is not None:
                return region if region.length else None
        return None

    def write_in_flight(self) -> PendingWrite | None:
        """The writer thread's write of this log while it is not done (what a `written_only` read stops before)."""
        writing = self._writing
        return writing.future if writing is not None and not writing.future.done() else None

    def aborted_transactions(self, start_offset: int, end_offset: int) -> list[AbortedTransaction]:
        """Aborted transactions that overlap [start_offset, end_offset): from the `.txnindex` of the segment holding
        `start_offset` and of every later one (a transaction's entry sits with its marker)."""
        segments = self._segments
        first = max(0, bisect.bisect_right(segments, start_offset, key=_BASE_OFFSET_OF) - 1)
        found = []
        for segment in segments[first:]:
            found += segment.transaction_index.overlapping(start_offset, end_offset)
        return found

    def offset_for_timestamp(self, timestamp_ms: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record whose timestamp is >= `timestamp_ms`, or None."""
        self.write_deferred()
        log_start = self.log_start_offset
        for segment in self._segments:
            if segment.max_timestamp >= timestamp_ms and segment.next_offset > log_start:
                found = segment.find_timestamp(timestamp_ms, log_start)
                if found is not None:
                    return found
        return None

    def max_timestamp(self) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp in the log, or None."""
        self.write_deferred()
        best = None
        for segment in self._segments:
            if segment.max_timestamp > (best.max_timestamp if best else NO_TIMESTAMP):
                best = segment
        if best is None:
            return None
        return best.find_max_timestamp_offset(), best.max_timestamp

    # -- flushing ----------------------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync everything appended so far; the recovery point becomes the log end offset."""
        self._flush_up_to(None)

    def flush_if_due(self, now_ms: int) -> None:
        """flush.ms: flush if that long has passed since the last flush. Segments rolled since the last flush are
        synced in any case (Kafka flushes a rolled segment right after the roll), so the recovery point advances
        even under the default policy that leaves the active segment to the OS."""
        segments = self._segments
        if now_ms - self._last_flush_ms >= self.config.flush_ms and self.log_end_offset > self._recovery_point:
            self._flush_up_to(None)
        elif len(segments) > 1 and segments[-1].base_offset > self._recovery_point:
            self._flush_up_to(segments[-1].base_offset)

    def _flush_up_to(self, offset: int | None) -> None:
        """fsync the segments holding offsets below `offset` (None: all) outside the append lock."""
        with self._flush_lock:
            with self._lock:
                self._write_unwritten()
                target = self.log_end_offset if offset is None else offset
                recovery_point = self._recovery_point
                dirty = [segment for segment in self._segments
                         if segment.next_offset > recovery_point and segment.base_offset < target]
                directory_dirty, self._directory_dirty = self._directory_dirty, False
                truncations = self._truncations
                if offset is None:
                    self._unflushed_messages = 0
                    self._last_flush_ms = self._clock()
            for segment in dirty:
                segment.flush()
            if directory_dirty:
                fsync_path(self.directory)
            with self._lock:
                if truncations == self._truncations and target > self._recovery_point:
                    self._recovery_point = target

    # -- retention, DeleteRecords, truncation ------------------------------------------------------------------

    def apply_retention(self, now_ms: int) -> int:
        """Remove the oldest non-active segments past retention.ms (by largest timestamp) or retention.bytes;
        the number removed. Only for topics whose cleanup.policy includes delete."""
        config = self.config
        if not config.delete:
            return 0
        with self._lock:
            segments = self._segments
            candidates = segments[:-1]
            count = 0
            if config.retention_ms >= 0:
                while count < len(candidates) and now_ms - candidates[count].largest_timestamp() > config.retention_ms:
                    count += 1
            if config.retention_bytes >= 0:
                excess = sum(segment.size for segment in segments[count:]) - config.retention_bytes
                while count < len(candidates) and excess >= candidates[count].size:
                    excess -= candidates[count].size
                    count += 1
            if count:
                self._remove_oldest(count, now_ms)
            return count

    def delete_records_before(self, offset: int) -> int:
        """DeleteRecords: move the log start offset up to `offset`, drop whole segments below it; the new start."""
        with self._lock:
            if offset > self.log_end_offset:
                raise KafkaError(ErrorCode.OFFSET_OUT_OF_RANGE,
                                 f"Cannot delete records up to {offset}: the log ends at {self.log_end_offset}")
            if offset <= self.log_start_offset:
                return self.log_start_offset
            self.log_start_offset = offset
            self.leader_epochs.truncate_from_start(offset)
            segments = self._segments
            count = 0
            while count < len(segments) - 1 and segments[count + 1].base_offset <= offset:
                count += 1
            if count:
                self._remove_oldest(count, self._clock())
            return self.log_start_offset

    def _remove_oldest(self, count: int, now_ms: int) -> None:
        removed, self._segments = self._segments[:count], self._segments[count:]
        self.log_start_offset = max(self.log_start_offset, self._segments[0].base_offset)
        self.leader_epochs.truncate_from_start(self.log_start_offset)
        self.producer_state.delete_snapshots_before(self._segments[0].base_offset)
        self._schedule_deletion(removed, now_ms)

    def _schedule_deletion(self, segments, now_ms: int) -> None:
        deadline = now_ms + self.config.file_delete_delay_ms
        for segment in segments:
            segment.mark_deleted()
            self._pending_deletes.append((deadline, segment))

    def delete_expired_files(self, now_ms: int) -> int:
        """Close and remove the `*.deleted` files whose delay has passed; how many segments went."""
        with self._lock:
            expired = [segment for deadline, segment in self._pending_deletes if deadline <= now_ms]
            self._pending_deletes = [entry for entry in self._pending_deletes if entry[0] > now_ms]
        for segment in expired:
            segment.delete_files()
        return len(expired)

    def replace_segments(self, cleaned: Segment, replaced: Sequence[Segment]) -> bool:
        """Swap the cleaner's output `cleaned` (sealed, fsynced, files named `*.cleaned`) in for `replaced`, the
        run of non-active segments it was copied from; False, with nothing changed, if they are no longer a run
        of this log (retention or truncation got there first).

        Kafka's crash-safe order: rename the cleaned files to `*.swap`, the log last (its rename is the commit
        point), and fsync the directory; publish the new segment tuple; rename the replaced files to `*.deleted`,
        kept open for readers until file.delete.delay.ms, and fsync; drop the `.swap` suffix, again log last. A
        crash before the commit point leaves the old segments, after it the new one (`Log.open` finishes the
        swap, see `_clear_stray_files`)."""
        with self._lock:
            segments = self._segments
            first = next((position for position, segment in enumerate(segments) if segment is replaced[0]), None)
            if first is None:
                return False
            end = first + len(replaced)
            if end >= len(segments) or any(old is not new for old, new in zip(segments[first:end], replaced)):
                return False
            cleaned.rename_files(CLEANED_SUFFIX, SWAP_SUFFIX)
            fsync_path(self.directory)
            self._segments = segments[:first] + (cleaned,) + segments[end:]
            self._schedule_deletion(replaced, self._clock())
            fsync_path(self.directory)
            cleaned.rename_files(SWAP_SUFFIX, "")
            self._directory_dirty = True
            return True

    def truncate_to(self, offset: int) -> None:
        """Cut the log so that `offset` is its end (a follower truncating to its leader). No-op at or past the end."""
        with self._lock:
            if offset >= self.log_end_offset:
                return
            self._write_unwritten()
            if self._segments[0].base_offset > offset:
                self._truncate_fully_and_start_at(offset)
                return
            kept = tuple(segment for segment in self._segments if segment.base_offset <= offset)
            removed = self._segments[len(kept):]
            self._segments = kept
            self._schedule_deletion(removed, self._clock())
            kept[-1].truncate_to(offset)
            kept[-1].activate()
            self.log_end_offset = offset
            self._recovery_point = min(self._recovery_point, offset)
            self.log_start_offset = min(self.log_start_offset, offset)
            self._truncations += 1
            self.leader_epochs.truncate_from_end(offset)
            self.producer_state.load(kept, self.log_start_offset, offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        """Empty the log and start it at `offset` (a follower behind its leader's log start)."""
        with self._lock:
            self._truncate_fully_and_start_at(offset)

    def _truncate_fully_and_start_at(self, offset: int) -> None:
        if self._writing is not None:  # into a segment this removes: done before its file is let go
            self._wait_for_writing()
        self._unwritten = []  # their records go with the rest
        removed = self._segments
        self._schedule_deletion(removed, self._clock())
        self._segments = (Segment.create(self.directory, offset, self.config, self._clock()),)
        self.log_end_offset = self.log_start_offset = self._recovery_point = offset
        self._directory_dirty = True
        self._truncations += 1
        self.leader_epochs.clear()
        self.producer_state.clear()

    # -- shutdown ----------------------------------------------------------------------------------------------

    def close(self) -> None:
        """Flush, seal the active segment's indexes (trimmed, final time index entry), snapshot the producer state
        at the log end (so the next start replays nothing) and close every file. An empty log with no producer
        state and no snapshot takes none: it loads the same state without one (a new partition's first stop)."""
        self.flush()
        with self._lock:
            state = self.producer_state
            if self.log_end_offset > self.log_start_offset or state.producers or state.snapshot_offsets():
                state.take_snapshot(self.log_end_offset)
            self._segments[-1].seal()
            for segment in self._segments:
                segment.close()
            for _, segment in self._pending_deletes:
                segment.delete_files()
            self._pending_deletes = []

    def delete_all(self) -> None:
        """Topic deletion: close every file and remove the partition directory (after the cleaner, seeing
        `is_deleted`, has let go of the log). The directory is first renamed `<name>.<id>-delete`, as Kafka does,
        so a crash halfway through the removal leaves no half-deleted partition that could be opened again: the
        log manager removes leftover `-delete` directories at start."""
        self.is_deleted = True
        with self.cleaner_lock, self._lock:
            if self._writing is not None:  # done before the file it writes is closed
                self._wait_for_writing()
            self._unwritten = []
            for segment in self._segments:
                segment.close()
            for _, segment in self._pending_deletes:
                segment.close()
            self._pending_deletes = []
            shutil.rmtree(set_aside(self.directory, DELETED_DIR_SUFFIX), ignore_errors=True)

    def __repr__(self) -> str:
        return (f"Log({self.directory.name}, start={self.log_start_offset}, end={self.log_end_offset}, "
                f"segments={len(self._segments)})")


def _check_increasing(headers: list[BatchHeader], log_end_offset: int) -> None:
    next_offset = log_end_offset
    for header in headers:
        if header.base_offset < next_offset:
            raise KafkaError(ErrorCode.UNKNOWN_SERVER_ERROR,
                             f"Batch at offset {header.base_offset} is below the next offset {next_offset}")
        next_offset = header.last_offset + 1


def _segment_base(name: str, suffix: str) -> int | None:
    """Base offset of a segment file called `<20 digits><suffix>`, else None."""
    stem = name[:-len(suffix)]
    if name.endswith(suffix) and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


def _clear_stray_files(directory: Path) -> tuple[list[int], list[str]]:
    """Delete `*.deleted` and `*.cleaned` files and index files without a log, and complete interrupted swaps
    (`Log.replace_segments`). The swap renames a segment's files to `.swap` and back with the log last, so a
    `<base>.log.swap` means the swap was committed: it is renamed into place with its `.txnindex.swap` if that is
    still there (the cleaner always writes one, so without it the `.txnindex` in place is already the new one), and
    the offset and time indexes are rebuilt. Index `.swap` files without a log `.swap` are from a swap that never
    committed and go. Returns the base offsets of swapped-in segments and the names of the files left, from one
    listing of the directory (a second only after a swap or a removal, which are rare): a broker with many
    partitions opens each at start-up, and listings and existence checks were a third of that."""
    names = sorted(os.listdir(directory))
    swapped = [base for name in names if name.endswith(SWAP_SUFFIX)
               and (base := _segment_base(name[:-len(SWAP_SUFFIX)], LOG_SUFFIX)) is not None]
    for base in swapped:
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            (directory / segment_file_name(base, suffix)).unlink(missing_ok=True)
        for suffix in (TXN_INDEX_SUFFIX, LOG_SUFFIX):
            swap = directory / (segment_file_name(base, suffix) + SWAP_SUFFIX)
            if swap.exists():
                os.replace(swap, directory / segment_file_name(base, suffix))
    stray = [name for name in names if name.endswith((DELETED_SUFFIX, CLEANED_SUFFIX, SWAP_SUFFIX))]
    for name in stray:
        (directory / name).unlink(missing_ok=True)
    if swapped or stray:
        names = sorted(os.listdir(directory))
    logs = {name for name in names if name.endswith(LOG_SUFFIX)}
    left = []
    for name in names:
        if any((base := _segment_base(name, suffix)) is not None and segment_file_name(base, LOG_SUFFIX) not in logs
               for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)):
            (directory / name).unlink()
        else:
            left.append(name)
    return swapped, left


def _drop_segments_replaced_by_swap(segments: list[Segment], base: int) -> list[Segment]:
    """Segments the compacted (swapped-in) segment at `base` replaces: those starting inside its offset range."""
    swapped = next((segment for segment in segments if segment.base_offset == base), None)
    if swapped is None:
        return segments
    kept = []
    for segment in segments:
        if base < segment.base_offset < swapped.next_offset:
            segment.delete_files()
        else:
            kept.append(segment)
    return kept


def _warn_truncation(cut: RecoveryCut, later: Sequence[Segment]) -> None:
    """Kafka's "Corruption found in segment ..., truncating to offset ..." with what went: bytes, records and the
    later segments removed with them."""
    dropped_bytes = cut.bytes_dropped + sum(segment.size for segment in later)
    dropped_records = cut.records_dropped + sum(segment.count_records(0, segment.size) for segment in later)
    log.warning("Corruption found in segment %s at byte %d (%s): truncating to offset %d, dropping %d bytes and "
                "%d records%s", cut.path, cut.position, cut.reason, cut.next_offset, dropped_bytes, dropped_records,
                f" ({len(later)} later segment(s) removed)" if later else "")
