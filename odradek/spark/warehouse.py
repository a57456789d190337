"""Warehouse load: topics -> Parquet partitioned by topic and partition, exactly once across reruns and crashes.

The design loads the log into offline systems with one task per partition, each task keeping the last offset it
read beside its output. Here a task's output is one Parquet file per partition-run, named after the offset range it
holds (part-<start>-<end>.parquet), written under a hidden temporary name and renamed into place: the rename commits
the data and its offsets in one atomic step. The next run of a partition starts at the highest committed end, so a
task that failed before its rename is simply redone, one that finished is never redone, and nothing is read twice
or skipped. Ranges whose records were all compacted away still get an (empty) file, so progress is kept for them too.
The rename happens under a lock on the partition directory and only if the directory's committed end is still the
range's start: a straggler task of a failed run that finishes after a rerun began cannot commit an overlapping
range; its range is dropped and the next run loads what is still missing.

Layout: <output>/topic=<topic>/partition=<n>/part-<start>-<end>.parquet, which spark.read.parquet(<output>) reads
with topic and partition as columns.
"""

from __future__ import annotations

import fcntl
import os
import re
import uuid
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from odradek.spark.fetcher import RECORD_SCHEMA_WITH_HEADERS, read_range
from odradek.spark.kafka_io import DataLossError, LogLookup, OffsetRange, committed_reads
from odradek.storage.segment import fsync_path
from odradek.spark.options import Subscription

LOCK_FILE = "_commit.lock"  # Spark's Parquet reader ignores names starting with "_" or "."
FILE_NAME = re.compile(r"part-(?P<start>\d{20})-(?P<end>\d{20})\.parquet")
STORED_SCHEMA = pa.schema([f for f in RECORD_SCHEMA_WITH_HEADERS if f.name not in ("topic", "partition")])
LOOKUP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LoadedRange:
    topic: str
    partition: int
    start: int
    end: int
    rows: int
    committed: bool  # False when another task committed this partition first (the range is left for the next run)


def partition_dir(output: Path, topic: str, partition: int) -> Path:
    return output / f"topic={topic}" / f"partition={partition}"


def committed_end(directory: Path) -> int | None:
    """The end offset of the last committed run in a partition directory; None if nothing was committed."""
    if not directory.is_dir():
        return None
    ends = [int(match["end"]) for match in map(FILE_NAME.fullmatch, os.listdir(directory)) if match]
    return max(ends, default=None)


def plan_load(client_config: dict[str, str], topics: list[str], output: Path,
              fail_on_data_loss: bool = True) -> list[tuple[OffsetRange, int | None]]:
    """Per partition: from its committed end (or the log's start) to the log's current end, with that committed
    end (None if there is none)."""
    with LogLookup(client_config, LOOKUP_TIMEOUT_S) as lookup:
        topic_partitions = lookup.partitions_of(Subscription(topics=tuple(topics)))
        marks = lookup.watermarks(topic_partitions)
    ranges = []
    for (topic, partition), (earliest, latest) in marks.items():
        resumes_from = start = committed_end(partition_dir(output, topic, partition))
        if start is None:
            start = earliest
        elif start < earliest:
            if fail_on_data_loss:
                raise DataLossError(f"failOnDataLoss: offsets {start}..{earliest - 1} of {topic}-{partition} were "
                                    "deleted before this load could read them")
            start = earliest
        if latest > start:
            ranges.append((OffsetRange(topic, partition, start, latest), resumes_from))
    return ranges


def load_range(client_config: dict[str, str], output: str, offset_range: OffsetRange, resumes_from: int | None,
               fail_on_data_loss: bool = True) -> LoadedRange:
    """One task: read the range, write it to a hidden file, then commit data and offsets with one rename.

    resumes_from is the committed end the range was planned from (None: nothing was committed yet).
    """
    directory = partition_dir(Path(output), offset_range.topic, offset_range.partition)
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / f"part-{offset_range.start:020d}-{offset_range.end:020d}.parquet"
    temporary = directory / f".{final.name}.{uuid.uuid4().hex}.tmp"
    rows = 0
    try:
        with pq.ParquetWriter(temporary, STORED_SCHEMA, compression="zstd") as writer:
            for batch in read_range(client_config, offset_range, include_headers=True,
                                    fail_on_data_loss=fail_on_data_loss,
                                    poll_timeout_s=LOOKUP_TIMEOUT_S):
                writer.write_batch(batch.select(STORED_SCHEMA.names))
                rows += batch.num_rows
        fsync_path(temporary)
        with open(directory / LOCK_FILE, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            committed = committed_end(directory) == resumes_from
            if committed:
                os.rename(temporary, final)
                fsync_path(directory)
    finally:
        temporary.unlink(missing_ok=True)
    return LoadedRange(offset_range.topic, offset_range.partition, offset_range.start, offset_range.end, rows,
                       committed)


def warehouse_load(spark, client_config: dict[str, str], topics: list[str], output: str | os.PathLike,
                   fail_on_data_loss: bool = True) -> list[LoadedRange]:
    """Load everything new in the topics into the output directory (committed records: read_committed unless the
    settings say otherwise); returns what each task did."""
    client_config = committed_reads(client_config)
    output = Path(output).resolve()
    ranges = plan_load(client_config, topics, output, fail_on_data_loss)
    if not ranges:
        return []
    output_text = str(output)
    tasks = spark.sparkContext.parallelize(ranges, len(ranges))
    return tasks.map(lambda planned: load_range(client_config, output_text, *planned, fail_on_data_loss)).collect()
