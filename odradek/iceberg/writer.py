"""The broker's Iceberg writer: one thread that, every iceberg.commit.interval.ms, appends the new records of every
partition this broker leads of every topic with odradek.iceberg.mode set to the topic's table, in one commit per
topic (odradek/iceberg/table.py has the table, schema_sink.py the schema modes' rows and dead letters,
docs/iceberg.md the contract).

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
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException

from odradek.errors import ErrorCode, KafkaError
from odradek.iceberg import table as tables
from odradek.iceberg.schema_sink import SCHEMAS_TOPIC, SchemaSink, State, Translations
from odradek.records.arrow import batches_to_columns
from odradek.records.batch import committed_batches, decode_batch, whole_batches
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


class IcebergWriter:
    def __init__(self, broker, loop: asyncio.AbstractEventLoop):
        self.broker = broker
        self.loop = loop
        self._stop = threading.Event()
        self._catalog = None
        self._registry = State()  # the schema registry's schemas, for the schema modes
        self._registry_offset = 0  # where the next read of _schemas starts
        self._known = Translations()  # the schemas' translations, kept: an id never changes its schema
        self._thread = threading.Thread(target=self._run, name="iceberg-writer", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop after the round under way (blocking: call it off the event loop, which that round may wait on)."""
        self._stop.set()
        self._thread.join()

    # ------------------------------------------------------------------------------------------ on the loop
    def _topics(self) -> list[tuple[str, str, str, list[int]]]:
        """(topic, mode, partition spec, partitions this broker leads) of every topic in an Iceberg mode."""
        found = []
        for topic in list(self.broker.metadata.topics.values()):
            mode = topic.configs.get("odradek.iceberg.mode", "disabled")
            if mode == "disabled":
                continue
            led = [index for index in range(len(topic.partitions)) if self.broker.leads(topic.name, index)]
            if led:
                found.append((topic.name, mode, topic.configs.get("odradek.iceberg.partition.spec",
                                                                  "hour(timestamp)"), led))
        return found

    def _read_chunk(self, topic: str, index: int, offset: int, leader_only: bool = True) -> Chunk | None:
        """Records from `offset` of a partition this broker leads (with `leader_only` False: holds a replica of)."""
        partition = self.broker.partitions.get((topic, index))
        if partition is None or leader_only and not partition.is_leader:
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
        while not self._stop.is_set():
            full = False
            try:
                if self._catalog is None:
                    self._catalog = tables.open_catalog(self.broker.config, self.broker.log_dir)
                for topic, mode, spec, led in self._on_loop(self._topics):
                    full |= self._write_topic(topic, mode, spec, led)
            except Exception as exc:  # the catalog or the loop unreachable, a bad table: the next round retries
                if self._stop.is_set():
                    break
                log.warning("iceberg writer round failed: %r", exc)
            if not full:
                self._stop.wait(interval_s)

    def _write_topic(self, topic: str, mode: str, spec: str, led: list[int]) -> bool:
        """One commit of the new records of the partitions `led` (if any); True if it stopped at COMMIT_BYTES. In
        a schema mode the records that cannot be translated are committed to the dead-letter table first, each
        table carrying its own offsets: a round cut between the two commits writes again only what the table it
        did not reach lacks."""
        namespace = self.broker.config["iceberg.namespace"]
        if mode == "key_value":
            sink = KeyValueSink(tables.load_or_create(self._catalog, namespace, topic, spec))
        else:
            sink = SchemaSink(self._catalog, namespace, topic, spec, mode, self._registry, self._known)
        committed = sink.committed
        offsets = dict(committed)
        taken, full, pending = 0, False, []
        for index in led:
            offset = offsets.get(index, 0)
            while taken < COMMIT_BYTES and not self._stop.is_set():
                chunk = self._on_loop(self._read_chunk, topic, index, offset)
                if chunk is None:  # no longer the leader: what was read of it is not written
                    pending = [entry for entry in pending if entry[0] != index]
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
                columns, offset = self._columns(topic, index, chunk)
                taken += len(chunk.data)
                if columns is not None:
                    pending.append((index, columns))
                offsets[index] = offset
            full |= taken >= COMMIT_BYTES
        if offsets == committed:
            return False  # nothing new; offsets that moved past control batches alone are committed, rowless
        if mode != "key_value":
            self._follow_registry()  # after the records: a schema registered before a record was produced is read
        for index, columns in pending:
            sink.add(index, columns)
        try:
            written = sink.commit(offsets)
        except CommitFailedException as exc:
            log.info("%s: commit lost to another (%s); the next round starts from the table again", topic, exc)
            return True
        log.debug("%s: committed %d rows up to %s", topic, written, offsets)
        return full

    def _follow_registry(self) -> None:
        """Apply the schema registry's new `_schemas` records (read_committed, from a local replica)."""
        while True:
            chunk = self._on_loop(self._read_chunk, SCHEMAS_TOPIC, 0, self._registry_offset, False)
            if chunk is None or not chunk.data:
                return
            batches = [(header, batch) for header, batch in whole_batches(chunk.data) if header.base_offset < chunk.end]
            for header, batch in committed_batches(batches, chunk.aborted):
                for record in decode_batch(batch)[1]:
                    if header.base_offset + record.offset_delta >= chunk.start:
                        self._registry.apply(record.key, record.value)
            self._registry_offset = min(batches[-1][0].last_offset + 1, chunk.end)

    def _columns(self, topic: str, index: int, chunk: Chunk):
        """The columns of a chunk's records below its end (None if it has none a consumer sees), and the offset
        after its last batch."""
        try:
            batches = [(header, batch) for header, batch in whole_batches(chunk.data)
                       if header.base_offset < chunk.end]
            if not batches:
                raise KafkaError(ErrorCode.CORRUPT_MESSAGE, "no whole batch in a read")
            next_offset = min(batches[-1][0].last_offset + 1, chunk.end)
            wanted = list(committed_batches(batches, chunk.aborted))
            if not wanted:
                return None, next_offset
            columns = batches_to_columns(wanted, include_headers=True, start=chunk.start, end=chunk.end)
        except KafkaError as exc:
            raise KafkaError(exc.code, f"{topic}-{index} at {chunk.start}: {exc.message}") from None
        return columns, next_offset


class KeyValueSink:
    """key_value mode: every record a row of the topic's table."""

    def __init__(self, table):
        self.table = table
        self.committed = tables.committed_offsets(table)
        self._pieces: list[tuple[int, pa.Table]] = []

    def add(self, index: int, columns) -> None:
        self._pieces.append((index, tables.key_value_rows(columns, index)))

    def commit(self, offsets: dict[int, int]) -> int:
        rows = pa.concat_tables([rows for _, rows in self._pieces]) if self._pieces else \
            tables.KEY_VALUE_ARROW.empty_table()
        self.table.append(rows, snapshot_properties=tables.offsets_summary(offsets))
        return rows.num_rows
