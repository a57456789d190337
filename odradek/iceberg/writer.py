"""The broker's Iceberg writer: one thread that, every iceberg.commit.interval.ms, appends the new records of every
partition this broker leads of every topic with odradek.iceberg.mode=key_value to the topic's table, in one
commit per topic (odradek/iceberg/table.py has the table, docs/iceberg.md the contract).

Exactly once comes from the table alone, nothing is kept in memory between commits: each round loads the table,
reads where its snapshot summary says each partition resumes, reads the log from there up to the last stable offset
(what a read_committed consumer may see) and commits the rows with the map of offsets moved on. pyiceberg's commit
asserts that the table's current snapshot is still the one loaded; a commit that loses the race (another broker's
for other partitions, or a deposed leader's) fails whole, and the next round starts again from the table. A broker
killed between commits resumes, after its restart, from the last commit, as does a new leader after a failover.

The thread never touches a log itself: the reads run on the event loop (the logs belong to it), a chunk of at most
READ_BYTES at a time, and come back as bytes; decoding, Parquet and the catalog run here. A round that gathers
COMMIT_BYTES of one topic's records commits them at once and starts the next round without waiting.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException

from odradek.errors import KafkaError
from odradek.iceberg import table as tables
from odradek.records.arrow import batches_to_columns
from odradek.records.batch import whole_batches
from odradek.storage.transaction_index import AbortedTransaction

log = logging.getLogger("odradek.iceberg")
READ_BYTES = 1 << 20  # one read on the event loop
COMMIT_BYTES = 64 << 20  # record bytes one commit takes at most
LOOP_TIMEOUT_S = 10.0


@dataclass
class Chunk:
    """What one read on the event loop gives: None from `read_chunk` when this broker does not lead the partition."""

    start: int  # the offset the read began at (the log start, if the table's offset fell out of the log)
    end: int  # the last stable offset: rows are written below it
    data: bytes
    aborted: list[AbortedTransaction]


@dataclass
class WriterStats:
    """What the writer has done since the broker started (for `odradek iceberg describe`, logs and the bench)."""

    commits: int = 0
    rows: int = 0
    conflicts: int = 0
    cpu_s: float = 0.0  # the writer thread's CPU time
    last_error: str | None = None
    committed_at_ms: dict[str, int] = field(default_factory=dict)


class IcebergWriter:
    def __init__(self, broker, loop: asyncio.AbstractEventLoop):
        self.broker = broker
        self.loop = loop
        self.stats = WriterStats()
        self._stop = threading.Event()
        self._catalog = None
        self._thread = threading.Thread(target=self._run, name="iceberg-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the round under way (blocking: call it off the event loop, which that round may wait on)."""
        self._stop.set()
        self._thread.join()

    # ------------------------------------------------------------------------------------------ on the loop
    def _topics(self) -> list[tuple[str, str, list[int]]]:
        """(topic, partition spec, partitions this broker leads) of every topic in key_value mode."""
        found = []
        for topic in list(self.broker.metadata.topics.values()):
            if topic.configs.get("odradek.iceberg.mode", "disabled") == "disabled":
                continue
            led = [index for index in range(len(topic.partitions)) if self.broker.leads(topic.name, index)]
            if led:
                found.append((topic.name, topic.configs.get("odradek.iceberg.partition.spec", "hour(timestamp)"),
                              led))
        return found

    def _read_chunk(self, topic: str, index: int, offset: int) -> Chunk | None:
        partition = self.broker.partitions.get((topic, index))
        if partition is None or not partition.is_leader:
            return None
        partition_log = partition.log
        end = partition.last_stable_offset
        start = max(offset, partition_log.log_start_offset)
        if start >= end:
            return Chunk(start, end, b"", [])
        region = partition_log.read(start, READ_BYTES, max_offset=end)
        data = region.read_bytes() if region is not None else b""
        return Chunk(start, end, data, partition_log.aborted_transactions(start, end))

    def _on_loop(self, function: Callable, *args):
        async def call():
            return function(*args)
        return asyncio.run_coroutine_threadsafe(call(), self.loop).result(LOOP_TIMEOUT_S)

    # ---------------------------------------------------------------------------------------- on the thread
    def _run(self) -> None:
        interval_s = self.broker.config["iceberg.commit.interval.ms"] / 1000
        started = time.thread_time()
        while not self._stop.is_set():
            full = False
            try:
                if self._catalog is None:
                    self._catalog = tables.open_catalog(self.broker.config, self.broker.log_dir)
                for topic, spec, led in self._on_loop(self._topics):
                    full |= self._write_topic(topic, spec, led)
                self.stats.last_error = None
            except Exception as exc:  # the catalog or the loop unreachable, a bad table: the next round retries
                if self._stop.is_set():
                    break
                self.stats.last_error = repr(exc)
                log.warning("iceberg writer round failed: %r", exc)
            self.stats.cpu_s = time.thread_time() - started
            if not full:
                self._stop.wait(interval_s)

    def _write_topic(self, topic: str, spec: str, led: list[int]) -> bool:
        """One commit of the new records of the partitions `led` (if any); True if it stopped at COMMIT_BYTES."""
        table = tables.load_or_create(self._catalog, self.broker.config["iceberg.namespace"], topic, spec)
        committed = tables.committed_offsets(table)
        offsets = dict(committed)
        pieces, taken, full = [], 0, False
        for index in led:
            offset = offsets.get(index, 0)
            while taken < COMMIT_BYTES and not self._stop.is_set():
                chunk = self._on_loop(self._read_chunk, topic, index, offset)
                if chunk is None:  # no longer the leader: what was read of it is not written
                    pieces = [piece for piece in pieces if piece[0] != index]
                    if index in committed:
                        offsets[index] = committed[index]
                    else:
                        offsets.pop(index, None)
                    break
                if chunk.start > offset:
                    log.warning("%s-%d: offsets %d to %d left the log before they reached the table", topic, index,
                                offset, chunk.start)
                offset = chunk.start
                if not chunk.data:
                    break
                rows, offset = self._rows(topic, index, chunk)
                taken += len(chunk.data)
                if rows is not None:
                    pieces.append((index, rows))
                offsets[index] = offset
            full |= taken >= COMMIT_BYTES
        if not pieces and offsets == committed:
            return False  # nothing new; offsets that moved past control batches alone are committed, rowless
        rows = pa.concat_tables([rows for _, rows in pieces]) if pieces else \
            tables.KEY_VALUE_ARROW.empty_table()
        try:
            table.append(rows, snapshot_properties=tables.offsets_summary(offsets))
        except CommitFailedException as exc:
            self.stats.conflicts += 1
            log.info("%s: commit lost to another (%s); the next round starts from the table again", topic, exc)
            return True
        self.stats.commits += 1
        self.stats.rows += rows.num_rows
        self.stats.committed_at_ms[topic] = int(time.time() * 1000)
        return full

    def _rows(self, topic: str, index: int, chunk: Chunk) -> tuple[pa.Table | None, int]:
        """The rows of a chunk's records below its end, and the offset after its last batch."""
        try:
            batches = [(header, batch) for header, batch in whole_batches(chunk.data)
                       if header.base_offset < chunk.end]
            next_offset = min(batches[-1][0].last_offset + 1, chunk.end)
            wanted = list(tables.delivered(batches, chunk.aborted))
            if not wanted:
                return None, next_offset
            columns = batches_to_columns(wanted, include_headers=True, start=chunk.start, end=chunk.end)
        except KafkaError as exc:
            raise KafkaError(exc.code, f"{topic}-{index} at {chunk.start}: {exc.message}") from None
        return tables.key_value_rows(columns, index), next_offset
