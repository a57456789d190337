"""Log compaction: the cleaner threads that keep at least the last value of every key of a compacted topic.

Kafka's LogCleaner, LogCleanerManager and Cleaner, in one module:

* `LogCleaner` (the manager) owns `log.cleaner.threads` threads, the `cleaner-offset-checkpoint` file (how far
  each log is clean) and the metrics. A thread grabs the filthiest compacted log: the highest dirty ratio
  (bytes after the checkpoint / all bytes) above min.cleanable.dirty.ratio, or any log whose oldest dirty
  segment has waited longer than max.compaction.lag.ms, or, when nothing is dirty enough, one whose tombstones'
  or markers' delete horizon has passed. It sleeps log.cleaner.backoff.ms when there is nothing to do.
* `Cleaner` cleans one log in two passes. It maps the dirty head (checkpoint up to the active segment, or to the
  segment holding the last stable offset, or to the first segment younger than min.compaction.lag.ms) key -> last
  offset in an `OffsetMap` (24 bytes a slot, at most log.cleaner.dedupe.buffer.size / threads; a head that does not
  fit is cleaned in part, up to the last batch that did). It then recopies every segment below that point, oldest
  first, in groups that fit one segment (segment.bytes, index sizes, int32 relative offsets), keeping a record only
  if no later record has its key; tombstones survive until their batch's delete horizon (set at their first
  cleaning to now + delete.retention.ms, in the batch header as Kafka 2.8+ does) has passed. Each group is swapped
  in on its own, so cleaning needs one spare segment of disk (`Log.replace_segments` is the crash-safe swap).
  `BatchFilter` is the per-batch decision, plain bytes in and out.

Offsets never change (a filtered batch keeps its base offset and last offset delta), order is kept, and readers
never wait: they hold the log's immutable segment tuple, and the replaced files stay open, renamed `*.deleted`,
for file.delete.delay.ms. A batch whose records all go is dropped, unless its producer id needs it to rebuild its
state from the log (Kafka's rule: the batch with the last data offset of the producer's latest epoch, else its last
marker): that one stays, as an empty batch with its producer id, epoch, base sequence and offset range.

Transactions are handled as Kafka's cleaner does (odradek/storage/cleaned_transactions.py walks them): every
transaction below the last stable offset is decided, and the aborted ones are known from the `.txnindex` entries.
Aborted batches are dropped and their keys never mapped, so an aborted value neither shadows nor replaces a
committed one; committed transactional records are compacted like any other. A marker stays as long as a batch of
its transaction does (even an emptied one: replaying the log must see the transaction end); the first cleaning that
finds none stamps it with a delete horizon, and a cleaning past the horizon drops it, as for tombstones. The cleaned
segment's `.txnindex` keeps the entries of the ABORT markers whose transaction still had batches. Records
without a key, which a compacted topic refuses at produce time but a topic switched from delete may hold, go.
Compressed batches are decompressed, filtered and recompressed with their codec; a batch that keeps all its
records and needs no delete horizon is copied byte for byte. All cleaner I/O (reads and writes) is throttled to
log.cleaner.io.max.bytes.per.second across the threads.

Data records are never made Python objects: the record walker (records.walk) finds each record's fields as int64
columns, the offset map's C part (storage._offset_map) maps the keys and decides which records stay, and the walker
copies those of a batch that loses some into its rewritten batch, all in C with the GIL released. The rest is
Python, so threads share the GIL with the broker's event loop; one thread (Kafka's default) is the sensible
setting on a small machine, and the event loop only ever waits for the cleaner during the swap itself (a few renames
and two directory fsyncs under the log's lock) and when a topic it is cleaning is deleted.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from odradek.records.batch import (
    BATCH_HEADER_SIZE, BatchHeader, decode_batch, encode_batch, is_abort_marker, parse_header,
)
from odradek.records.compression import decompressed_view
from odradek.records.walk import RecordFields, kept_batch, record_fields
from odradek.storage.checkpoint import read_checkpoint, write_checkpoint
from odradek.storage.cleaned_transactions import CleanedTransactions
from odradek.clock import now_ms
from odradek.config import CLEANER_DYNAMIC_CONFIGS
from odradek.storage.log import Log
from odradek.storage.log_manager import LogManager, TopicPartition
from odradek.storage.offset_map import SLOT_BYTES, OffsetMap
from odradek.storage.segment import CLEANED_SUFFIX, INT32_MAX, Segment

CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
IO_BUFFER_BYTES = 512 * 1024  # log.cleaner.io.buffer.size: read chunks and write batches of this size

logger = logging.getLogger("odradek.cleaner")


class CleaningAborted(Exception):
    """The cleaner is stopping, the log was deleted, or its segments changed under the cleaner."""


class Throttler:
    """Holds the cleaners' combined I/O to a byte rate (Kafka's Throttler): callers report the bytes they moved
    and sleep while the running rate is above the limit. The window restarts every second, so a pause does not
    buy a later burst. Sleeps wait on `stop` so that shutdown is not delayed."""

    def __init__(self, max_bytes_per_second: float, stop: threading.Event):
        self.max_bytes_per_second = max_bytes_per_second
        self._stop = stop
        self._lock = threading.Lock()
        self._window_start = time.monotonic()
        self._window_bytes = 0

    def throttle(self, byte_count: int) -> None:
        if self.max_bytes_per_second >= sys.float_info.max:
            return
        with self._lock:
            now = time.monotonic()
            if now - self._window_start >= 1.0:
                self._window_start, self._window_bytes = now, 0
            self._window_bytes += byte_count
            wait = self._window_bytes / self.max_bytes_per_second - (now - self._window_start)
        if wait > 0:
            self._stop.wait(wait)


@dataclasses.dataclass(frozen=True)
class CleanableLog:
    """Kafka's LogToClean: where a log's dirty section lies and how dirty it is."""

    partition: TopicPartition
    log: Log
    first_dirty_offset: int
    # the lowest base of: the active segment, the segment holding the LSO, the first within min.compaction.lag.ms
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    compaction_delay_ms: int  # how long past max.compaction.lag.ms its oldest dirty segment is (0: not past)

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def dirty_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0

    @property
    def must_clean_now(self) -> bool:
        """max.compaction.lag.ms has passed for some dirty record: clean whatever the ratio."""
        return self.compaction_delay_ms > 0 and self.cleanable_bytes > 0


def cleanable_log(partition: TopicPartition, log: Log, checkpoint: int | None, now_ms: int) -> CleanableLog:
    """Kafka's cleanableOffsets, cleanable bytes and compaction delay, from the log's current segments. A
    checkpoint outside the log (none yet, or the log was cut below it) means everything is dirty. Nothing from the
    segment holding the last stable offset on is cleanable: below it every transaction is decided."""
    config = log.config
    segments = log.segments
    start, end = log.log_start_offset, log.log_end_offset
    first_dirty = checkpoint if checkpoint is not None and start <= checkpoint <= end else start
    inactive = segments[:-1]
    dirty = [segment for segment in inactive if segment.next_offset > first_dirty]
    first_uncleanable = segments[-1].base_offset
    first_unstable = log.producer_state.first_unstable_offset(default=end)
    holding_unstable = next((segment for segment in inactive if segment.next_offset > first_unstable), None)
    if holding_unstable is not None:
        first_uncleanable = holding_unstable.base_offset
    if config.min_compaction_lag_ms > 0:
        too_young = next((segment for segment in dirty
                          if segment.largest_timestamp() > now_ms - config.min_compaction_lag_ms), None)
        if too_young is not None:
            first_uncleanable = min(first_uncleanable, too_young.base_offset)
    first_batch_times = [segment.rolling_timestamp for segment in dirty
                         if segment.rolling_timestamp is not None and segment.rolling_timestamp > 0]
    clean_until = now_ms - config.max_compaction_lag_ms
    earliest = min(first_batch_times, default=None)
    return CleanableLog(
        partition, log, first_dirty, first_uncleanable,
        clean_bytes=sum(segment.size for segment in inactive if segment.next_offset <= first_dirty),
        cleanable_bytes=sum(segment.size for segment in dirty if segment.base_offset < first_uncleanable),
        compaction_delay_ms=clean_until - earliest if earliest is not None and earliest < clean_until else 0)


def group_segments_by_size(segments: Sequence[Segment], max_bytes: int, max_index_bytes: int) -> list[list[Segment]]:
    """Runs of consecutive segments whose cleaned copy fits one segment (Kafka's groupSegmentsBySize): at most
    `max_bytes` of log, indexes within `max_index_bytes` (one spare entry per segment, as batch boundaries move
    when records go) and offsets within int32 of the first base offset."""
    max_offset_entries = max_index_bytes // 8
    max_time_entries = max_index_bytes // 12
    groups: list[list[Segment]] = []
    group: list[Segment] = []
    size = offset_entries = time_entries = 0
    for segment in segments:
        if group and (size + segment.size > max_bytes
                      or offset_entries + len(segment.offset_index) + 1 > max_offset_entries
                      or time_entries + len(segment.time_index) + 1 > max_time_entries
                      or segment.next_offset - 1 - group[0].base_offset > INT32_MAX):
            groups.append(group)
            group, size, offset_entries, time_entries = [], 0, 0, 0
        group.append(segment)
        size += segment.size
        offset_entries += len(segment.offset_index) + 1
        time_entries += len(segment.time_index) + 1
    if group:
        groups.append(group)
    return groups


@dataclasses.dataclass
class CleanStats:
    """What one cleaning of one log did (Kafka's CleanerStats)."""

    partition: TopicPartition
    first_dirty_offset: int
    end_offset: int = 0  # the new checkpoint: everything below it is clean
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_retained: int = 0
    keyless_records: int = 0
    map_entries: int = 0
    map_bytes: int = 0
    map_utilization: float = 0.0
    segments_replaced: int = 0
    segments_written: int = 0
    latest_delete_horizon_ms: int | None = None  # largest horizon among the tombstones still in the log
    elapsed_s: float = 0.0


class Cleaner:
    """Cleans one log at a time (one per cleaner thread, each with its share of the dedupe buffer)."""

    def __init__(self, map_memory_bytes: int, throttler: Throttler, stop: threading.Event,
                 now_ms: Callable[[], int] = now_ms):
        self.map_memory_bytes = map_memory_bytes
        self._throttler = throttler
        self._stop = stop
        self._clock = now_ms

    def clean(self, target: CleanableLog) -> CleanStats:
        """Compact `target.log` below its first uncleanable offset; CleaningAborted if stopped or overtaken."""
        started = time.monotonic()
        log = target.log
        now = self._clock()
        config = log.config
        stats = CleanStats(target.partition, target.first_dirty_offset)
        with log.cleaner_lock:
            self._check_running(log)
            segments = log.segments
            inactive = [segment for segment in segments[:-1] if segment.base_offset < target.first_uncleanable_offset]
            producer_last_offsets, dirty_records = self._scan_headers(log, segments, target)
            offset_map = OffsetMap.for_entries(dirty_records, self.map_memory_bytes)
            end_offset = self._build_offset_map(log, inactive, target, offset_map, stats)
            stats.end_offset = end_offset
            stats.map_entries, stats.map_bytes = offset_map.size, offset_map.memory_bytes
            stats.map_utilization = offset_map.utilization
            to_clean = [segment for segment in inactive if segment.base_offset < end_offset]
            aborted = log.aborted_transactions(to_clean[0].base_offset, to_clean[-1].next_offset) if to_clean else []
            cleaning = BatchFilter(offset_map, end_offset, producer_last_offsets, CleanedTransactions(aborted), now,
                                   now + config.delete_retention_ms, stats)
            for group in group_segments_by_size(to_clean, config.segment_bytes, config.segment_index_bytes):
                cleaned = self._clean_group(log, group, cleaning)
                if not log.replace_segments(cleaned, group):
                    cleaned.delete_files()
                    raise CleaningAborted(f"{log.directory.name}: segments changed while they were cleaned")
                stats.segments_replaced += len(group)
                stats.segments_written += 1
        stats.elapsed_s = time.monotonic() - started
        return stats

    def _check_running(self, log: Log) -> None:
        if self._stop.is_set():
            raise CleaningAborted("the cleaner is stopping")
        if log.is_deleted:
            raise CleaningAborted(f"{log.directory.name} was deleted")

    def _scan_headers(self, log: Log, segments: Sequence[Segment], target: CleanableLog) -> tuple[dict[int, int], int]:
        """One pass over every batch header of the log: the last offset of the batch each producer id needs kept, if
        only empty, so that its state can be rebuilt from the log (Kafka's rule: the batch holding its last sequence,
        the last data batch of its latest epoch; with no data in that epoch, its last marker, which carries the
        epoch), and how many records the dirty section holds (to size the map)."""
        producers: dict[int, tuple[int, int, int]] = {}  # id -> epoch, last data offset in it (-1: none), last offset
        dirty_records = 0
        first_dirty, first_uncleanable = target.first_dirty_offset, target.first_uncleanable_offset
        for segment in segments:
            counts_dirty = segment.next_offset > first_dirty and segment.base_offset < first_uncleanable
            for _, header in segment.iter_headers(0, log.written_size(segment)):  # the active one is being written
                if header.producer_id >= 0:
                    epoch, last_data_offset, _ = producers.get(header.producer_id, (header.producer_epoch, -1, -1))
                    if header.producer_epoch != epoch:
                        last_data_offset = -1
                    if not header.is_control:
                        last_data_offset = header.last_offset
                    producers[header.producer_id] = header.producer_epoch, last_data_offset, header.last_offset
                if counts_dirty and header.last_offset >= first_dirty:
                    dirty_records += header.record_count
        batches_to_keep = {producer_id: last_data_offset if last_data_offset >= 0 else last_offset
                           for producer_id, (_, last_data_offset, last_offset) in producers.items()}
        return batches_to_keep, dirty_records

    def _read_batches(self, log: Log, segment: Segment, stats: CleanStats):
        for header, batch in segment.iter_batches(IO_BUFFER_BYTES):
            self._check_running(log)
            stats.bytes_read += header.size
            self._throttler.throttle(header.size)
            yield header, batch

    def _build_offset_map(self, log: Log, inactive: Sequence[Segment], target: CleanableLog, offset_map: OffsetMap,
                          stats: CleanStats) -> int:
        """Map each key of the dirty batches (from the first dirty offset in the `inactive` segments) to its last
        offset, leaving out aborted transactions and stopping before a batch that might not fit; returns the offset
        after the last batch mapped."""
        first_dirty = target.first_dirty_offset
        transactions = CleanedTransactions(log.aborted_transactions(first_dirty, target.first_uncleanable_offset))
        end_offset = first_dirty
        for segment in inactive:
            if segment.next_offset <= first_dirty:
                continue
            for header, batch in self._read_batches(log, segment, stats):
                if header.last_offset < first_dirty:
                    continue
                if header.is_control:
                    aborts = is_abort_marker(decode_batch(batch)[1])
                    transactions.marker_has_batches(header.producer_id, header.last_offset, aborts)
                elif not transactions.is_aborted(header.producer_id, header.last_offset, header.is_transactional):
                    if offset_map.size + header.record_count > offset_map.max_entries:
                        if end_offset == first_dirty:
                            raise ValueError(f"{log.directory.name}: log.cleaner.dedupe.buffer.size holds "
                                             f"{offset_map.max_entries} keys, too few for the batch at "
                                             f"{header.base_offset}")
                        return end_offset
                    body, fields = _record_columns(header, batch)
                    offset_map.put_records(body, fields.key_starts, fields.key_lengths, header.base_offset,
                                           fields.offset_deltas)
                end_offset = header.last_offset + 1
        return end_offset

    def _clean_group(self, log: Log, group: Sequence[Segment], cleaning: BatchFilter) -> Segment:
        """Copy the retained part of `group` into a new segment named `*.cleaned`, sealed and fsynced, with the
        aborted-transaction entries of the ABORT markers it keeps."""
        directory, config = log.directory, log.config
        cleaned = Segment.create(directory, group[0].base_offset, config, cleaning.now, CLEANED_SUFFIX)
        try:
            pending: list[bytes] = []
            pending_headers: list[BatchHeader] = []
            pending_bytes = 0
            for segment in group:
                for header, batch in self._read_batches(log, segment, cleaning.stats):
                    kept = cleaning.filter(header, batch)
                    if kept is None:
                        continue
                    kept_header, kept_bytes = kept
                    pending.append(kept_bytes)
                    pending_headers.append(kept_header)
                    pending_bytes += len(kept_bytes)
                    if pending_bytes >= IO_BUFFER_BYTES:
                        self._write(cleaned, pending, pending_headers, cleaning.stats)
                        pending, pending_headers, pending_bytes = [], [], 0
            if pending:
                self._write(cleaned, pending, pending_headers, cleaning.stats)
            for entry in cleaning.transactions.take_kept_entries():
                cleaned.transaction_index.append(entry)
            cleaned.transaction_index.path.touch()  # written even when empty: recovery relies on it
            cleaned.seal()
            cleaned.flush()
            return cleaned
        except BaseException:
            cleaned.delete_files()
            raise

    def _write(self, cleaned: Segment, pending: list[bytes], headers: list[BatchHeader], stats: CleanStats) -> None:
        data = b"".join(pending)
        cleaned.append(data, headers)
        stats.bytes_written += len(data)
        self._throttler.throttle(len(data))


@dataclasses.dataclass
class BatchFilter:
    """One cleaning's decision for each batch it copies, in offset order: what of it goes into the cleaned segment.

    Data records stay if no later record below `end_offset` has their key; aborted transactions go whole; tombstones
    and markers whose transaction has no batch left wait for their batch's delete horizon (stamped at the first
    cleaning that finds them: now + delete.retention.ms), then go. A batch that loses every record is dropped
    unless it is the batch its producer id needs kept. Plain bytes in, bytes out."""

    offset_map: OffsetMap
    end_offset: int
    producer_last_offsets: Mapping[int, int]
    transactions: CleanedTransactions
    now: int
    horizon: int  # the delete horizon stamped now
    stats: CleanStats

    def filter(self, header: BatchHeader, batch) -> tuple[BatchHeader, bytes] | None:
        """The batch as it goes into the cleaned segment (header, bytes), or None if it goes altogether."""
        horizon_passed = header.has_delete_horizon and self.now >= header.base_timestamp
        keeps_producer_state = (header.producer_id >= 0
                                and self.producer_last_offsets.get(header.producer_id) == header.last_offset)
        if header.is_control:
            _, markers = decode_batch(batch)
            removable = not self.transactions.marker_has_batches(header.producer_id, header.last_offset,
                                                                  is_abort_marker(markers))
            awaits_horizon = removable and not keeps_producer_state
            if awaits_horizon and horizon_passed:
                markers = []
            kept_count = len(markers)
            rewritten = functools.partial(encode_batch, markers, compression=header.compression, **_same_frame(header))
        elif self.transactions.is_aborted(header.producer_id, header.last_offset, header.is_transactional):
            kept_count, rewritten, awaits_horizon = 0, None, False
        else:  # records are judged and copied in C, over the walk's columns, never decoded into objects
            body, fields = _record_columns(header, batch)
            kept, keyless, tombstones = self.offset_map.retained(body, fields, header.base_offset, self.end_offset,
                                                                 horizon_passed)
            self.stats.keyless_records += keyless
            kept_count, awaits_horizon = len(kept), tombstones > 0
            rewritten = functools.partial(kept_batch, header, body, kept)
        self.stats.records_read += header.record_count
        self.stats.records_retained += kept_count
        if awaits_horizon and kept_count:
            batch_horizon = header.base_timestamp if header.has_delete_horizon else self.horizon
            if self.stats.latest_delete_horizon_ms is None or batch_horizon > self.stats.latest_delete_horizon_ms:
                self.stats.latest_delete_horizon_ms = batch_horizon
        if kept_count == header.record_count and (header.has_delete_horizon or not awaits_horizon):
            return header, bytes(batch)
        if not kept_count:
            if not keeps_producer_state:
                return None
            data = encode_batch([], **_same_frame(header))
        else:
            if header.has_delete_horizon:
                delete_horizon = header.base_timestamp
            else:
                delete_horizon = self.horizon if awaits_horizon else None
            data = rewritten(delete_horizon_ms=delete_horizon)
        return parse_header(data), data


def _same_frame(header: BatchHeader) -> dict[str, Any]:
    """The `encode_batch` arguments that keep a rewritten batch's frame: offsets, producer and kind."""
    return dict(base_offset=header.base_offset, last_offset_delta=header.last_offset_delta,
                partition_leader_epoch=header.partition_leader_epoch, timestamp_type=header.timestamp_type,
                producer_id=header.producer_id, producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence, transactional=header.is_transactional, control=header.is_control)


def _record_columns(header: BatchHeader, batch) -> tuple[memoryview, RecordFields]:
    """A data batch's record bytes (decompressed: a view of the thread's decompression buffer, valid until its next
    decompression) and where each record's fields lie in them, walked in C (records.walk) rather than decoded into
    a Python object each."""
    body = decompressed_view(header.compression, memoryview(batch)[BATCH_HEADER_SIZE:header.size])
    fields, _ = record_fields(body, [len(body)], [header.record_count], with_headers=False)
    return body, fields


class LogCleaner:
    """The cleaner threads of one log directory, their checkpoint file and their metrics."""

    def __init__(self, log_manager: LogManager, config: Mapping[str, Any], *,
                 now_ms: Callable[[], int] = now_ms):
        self._log_manager = log_manager
        self._clock = now_ms
        self.enabled = config["log.cleaner.enable"]
        self._stop = threading.Event()
        self._throttler = Throttler(config["log.cleaner.io.max.bytes.per.second"], self._stop)
        self._take_settings(config)
        self._running = False
        self._checkpoint_path = log_manager.log_dir / CLEANER_CHECKPOINT
        self._lock = threading.Lock()
        self._checkpoints: dict[TopicPartition, int] = read_checkpoint(self._checkpoint_path)
        self._known_logs: dict[TopicPartition, Log] = dict(log_manager.logs())
        self._in_progress: set[TopicPartition] = set()
        self._uncleanable: set[TopicPartition] = set()
        self._delete_horizons: dict[TopicPartition, int] = {}
        self._threads: list[threading.Thread] = []
        self._last_stats: dict[int, CleanStats] = {}  # by the ident of the thread that cleaned
        self._max_dirty_ratio = 0.0
        self._max_compaction_delay_ms = 0
        self._last_run_ms = now_ms()

    # -- threads -----------------------------------------------------------------------------------------------

    def _changes(self, config: Mapping[str, Any]) -> bool:
        return {name: config[name] for name in CLEANER_DYNAMIC_CONFIGS} != self._settings

    def _take_settings(self, config: Mapping[str, Any]) -> None:
        """The settings a running cleaner can change (CLEANER_DYNAMIC_CONFIGS)."""
        self._settings = {name: config[name] for name in CLEANER_DYNAMIC_CONFIGS}
        self.thread_count = config["log.cleaner.threads"]
        self.backoff_ms = config["log.cleaner.backoff.ms"]
        self._throttler.max_bytes_per_second = config["log.cleaner.io.max.bytes.per.second"]
        self._map_memory_bytes = max(SLOT_BYTES * 2, config["log.cleaner.dedupe.buffer.size"]
                                     // max(1, self.thread_count))

    def start(self) -> None:
        """Start the cleaner threads (none if log.cleaner.enable is false or log.cleaner.threads is 0)."""
        self._running = True
        if not self.enabled:
            return
        self._stop.clear()
        for number in range(self.thread_count):
            thread = threading.Thread(target=self._run, daemon=True, name=f"kafka-log-cleaner-thread-{number}")
            self._threads.append(thread)
            thread.start()

    def stop(self) -> None:
        """Stop and join the threads; a cleaning in progress is abandoned (its `*.cleaned` files removed)."""
        self._running = False
        self._stop.set()
        for thread in self._threads:
            thread.join()
        self._threads = []

    def reconfiguration_refusal(self, config: Mapping[str, Any]) -> str | None:
        """Why the cleaner may not take these settings now (Kafka's LogCleaner.validateReconfiguration: the thread
        count may at most halve or double at once), or None. Only a change is judged, as in Kafka."""
        if not self._changes(config):
            return None
        thread_count = config["log.cleaner.threads"]
        if thread_count < 1:
            return "Log cleaner threads should be at least 1"
        if thread_count < self.thread_count // 2:
            return f"Log cleaner threads cannot be reduced to less than half the current value {self.thread_count}"
        if thread_count > self.thread_count * 2:
            return f"Log cleaner threads cannot be increased to more than double the current value {self.thread_count}"
        return None

    def reconfigure(self, config: Mapping[str, Any]) -> None:
        """New cleaner settings while running (dynamic broker configs): as Kafka's LogCleaner.reconfigure, the
        threads stop (a cleaning in progress is abandoned, to be redone) and start again under the new settings,
        each with its share of log.cleaner.dedupe.buffer.size."""
        if not self._changes(config):
            return
        running = self._running
        self.stop()
        self._take_settings(config)
        if running:
            self.start()

    def _run(self) -> None:
        cleaner = Cleaner(self._map_memory_bytes, self._throttler, self._stop, self._clock)
        while not self._stop.is_set():
            if self.clean_filthiest(cleaner) is None:
                self._stop.wait(self.backoff_ms / 1000)

    # -- choosing and cleaning ---------------------------------------------------------------------------------

    def clean_filthiest(self, cleaner: Cleaner | None = None) -> CleanStats | None:
        """Clean the filthiest log once, on the calling thread; its stats, or None if no log needed cleaning
        (or the cleaning was aborted or failed: a failed log is left out from then on, as uncleanable)."""
        cleaner = cleaner or Cleaner(self._map_memory_bytes, self._throttler, self._stop, self._clock)
        target = self._grab_filthiest(self._clock())
        if target is None:
            return None
        partition = target.partition
        logger.info("cleaning %s-%d: dirty from offset %d to %d, dirty ratio %.2f", *partition,
                    target.first_dirty_offset, target.first_uncleanable_offset, target.dirty_ratio)
        stats = None
        try:
            stats = cleaner.clean(target)
        except CleaningAborted as exc:
            logger.info("cleaning of %s-%d aborted: %s", *partition, exc)
        except Exception:
            logger.exception("cleaning of %s-%d failed; it is uncleanable until restart", *partition)
            with self._lock:
                self._uncleanable.add(partition)
        finally:
            self._done_cleaning(target, stats)
        if stats is not None:
            with self._lock:
                self._last_stats[threading.get_ident()] = stats
            logger.info("cleaned %s-%d up to offset %d in %.2fs: %d -> %d bytes, %d of %d records kept, "
                        "%d segments -> %d, map %d keys in %d bytes (%.0f%%)", *partition, stats.end_offset,
                        stats.elapsed_s, stats.bytes_read, stats.bytes_written, stats.records_retained,
                        stats.records_read, stats.segments_replaced, stats.segments_written, stats.map_entries,
                        stats.map_bytes, 100 * stats.map_utilization)
        return stats

    def _grab_filthiest(self, now: int) -> CleanableLog | None:
        """Kafka's grabFilthiestCompactedLog: pick a log and mark it in progress."""
        with self._lock:
            self._last_run_ms = now
            current = dict(self._log_manager.logs())
            for partition, known in list(self._known_logs.items()):
                if current.get(partition) is not known:  # deleted, or deleted and created again
                    self._checkpoints.pop(partition, None)
                    self._uncleanable.discard(partition)
                    self._delete_horizons.pop(partition, None)
            self._known_logs = current
            candidates = [
                cleanable_log(partition, log, self._checkpoints.get(partition), now)
                for partition, log in current.items()
                if log.config.compact and partition not in self._in_progress and partition not in self._uncleanable
            ]
            candidates = [candidate for candidate in candidates if candidate.total_bytes > 0]
            self._max_dirty_ratio = max((candidate.dirty_ratio for candidate in candidates), default=0.0)
            self._max_compaction_delay_ms = max((candidate.compaction_delay_ms for candidate in candidates),
                                                default=0)
            ready = [candidate for candidate in candidates
                     if candidate.must_clean_now
                     or candidate.dirty_ratio > candidate.log.config.min_cleanable_dirty_ratio]
            if ready:
                chosen = max(ready, key=lambda candidate: candidate.dirty_ratio)
            else:
                chosen = next((candidate for candidate in candidates
                               if self._delete_horizons.get(candidate.partition, now + 1) <= now), None)
            if chosen is not None:
                self._in_progress.add(chosen.partition)
            return chosen

    def _done_cleaning(self, target: CleanableLog, stats: CleanStats | None) -> None:
        partition = target.partition
        with self._lock:
            self._in_progress.discard(partition)
            if stats is None or self._known_logs.get(partition) is not target.log:
                return
            self._checkpoints[partition] = stats.end_offset
            if stats.latest_delete_horizon_ms is None:
                self._delete_horizons.pop(partition, None)
            else:
                self._delete_horizons[partition] = stats.latest_delete_horizon_ms
            write_checkpoint(self._checkpoint_path, {partition: offset for partition, offset in
                                                     self._checkpoints.items() if partition in self._known_logs})

    def checkpoints(self) -> dict[TopicPartition, int]:
        with self._lock:
            return dict(self._checkpoints)

    # -- metrics -----------------------------------------------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Kafka's LogCleaner and LogCleanerManager gauges, by their names."""
        with self._lock:
            stats = list(self._last_stats.values())
            return {
                "uncleanable-partitions-count": len(self._uncleanable),
                "max-clean-time-secs": max((s.elapsed_s for s in stats), default=0.0),
                "max-compaction-delay-secs": self._max_compaction_delay_ms / 1000,
                "max-buffer-utilization-percent": 100 * max((s.map_utilization for s in stats), default=0.0),
                "max-dirty-percent": 100 * self._max_dirty_ratio,
                "cleaner-recopy-percent": 100 * max((s.bytes_written / s.bytes_read for s in stats if s.bytes_read),
                                                    default=0.0),
                "dead-thread-count": sum(1 for thread in self._threads if not thread.is_alive()),
                "time-since-last-run-ms": self._clock() - self._last_run_ms,
            }
