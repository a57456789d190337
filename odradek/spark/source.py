"""The "odradek" Spark data source: Spark's Kafka source and sink contract on the Python Data Source API.

Spark's own format("kafka") needs JVM jars that cannot be installed here, so this re-creates its contract in Python:
the same schema, options and offset semantics, so a job changes only the format name. Planning happens on the
driver (one offset range per partition, split further by minPartitions); each task reads its range with
fetcher.read_range and hands Spark Arrow batches (with startingOffsets=iceberg, tasks of iceberg_start.py read the
tables' rows before the log). Streaming offsets are Spark's Kafka JSON ({"topic": {"0": 42}}) kept in Spark's
checkpoint (a startingOffsets=iceberg query's initial one also names its tables' snapshots); the broker's committed
offsets are never touched.
"""

from __future__ import annotations

from typing import Iterator, Sequence

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from odradek.spark.fetcher import read_range
from odradek.spark.iceberg_start import STREAM_SNAPSHOTS, IcebergStart, read_snapshot
from odradek.spark.kafka_io import DataLossError, LogLookup, OffsetRange
from odradek.spark.options import OptionError, SourceOptions, parse_source_options

SOURCE_NAME = "odradek"
RECORD_DDL = ("key binary, value binary, topic string, partition int, offset long, timestamp timestamp, "
              "timestampType int")
HEADERS_DDL = "headers array<struct<key: string, value: binary>>"

StreamOffset = dict[str, dict[str, int]]  # Spark's Kafka offset JSON: topic -> partition (as text) -> offset


class OdradekDataSource(DataSource):
    """format("odradek"): read and write Kafka topics on an Odradek (or any Kafka) broker."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> str:
        include_headers = str(self.options.get("includeheaders", "false")).strip().lower() == "true"
        return f"{RECORD_DDL}, {HEADERS_DDL}" if include_headers else RECORD_DDL

    def reader(self, schema: StructType) -> DataSourceReader:
        return OdradekBatchReader(parse_source_options(self.options, streaming=False))

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return OdradekStreamReader(parse_source_options(self.options, streaming=True))

    def writer(self, schema: StructType, overwrite: bool):
        from odradek.spark.sink import OdradekBatchWriter

        if overwrite:
            raise OptionError("mode: overwrite is not supported by a Kafka sink; use append")
        return OdradekBatchWriter(self.options, schema)

    def streamWriter(self, schema: StructType, overwrite: bool):
        from odradek.spark.sink import OdradekStreamWriter

        return OdradekStreamWriter(self.options, schema)


class OffsetRangePartition(InputPartition):
    """One task's work: an offset range of one partition."""

    def __init__(self, offset_range: OffsetRange):
        super().__init__(offset_range)
        self.offset_range = offset_range


def split_ranges(ranges: list[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Spark's KafkaOffsetRangeCalculator: with fewer ranges than minPartitions, cut big ranges into pieces.

    Each range gets a share of minPartitions proportional to its size (at least one piece); empty ranges are dropped.
    """
    ranges = [r for r in ranges if r.size > 0]
    if not min_partitions or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    pieces_of_ranges = []
    for r in ranges:
        pieces = max(round(r.size / total * min_partitions), 1)
        bounds = [r.start + r.size * i // pieces for i in range(pieces + 1)]
        pieces_of_ranges += [OffsetRange(r.topic, r.partition, a, b) for a, b in zip(bounds, bounds[1:]) if b > a]
    return pieces_of_ranges


def read_partition(options: SourceOptions, partition: InputPartition) -> Iterator[pa.RecordBatch]:
    """A task's records: its offset range of the log, or its partition's rows in a table (startingOffsets=iceberg)."""
    if not isinstance(partition, OffsetRangePartition):
        return read_snapshot(partition, options.include_headers)
    return read_range(options.client_config, partition.offset_range, include_headers=options.include_headers,
                      fail_on_data_loss=options.fail_on_data_loss, poll_timeout_s=options.poll_timeout_ms / 1000)


def _lookup(options: SourceOptions) -> LogLookup:
    return LogLookup(options.client_config, options.poll_timeout_ms / 1000)


class OdradekBatchReader(DataSourceReader):
    def __init__(self, options: SourceOptions):
        self.options = options

    def partitions(self) -> Sequence[InputPartition]:
        options = self.options
        with _lookup(options) as lookup:
            topic_partitions = lookup.partitions_of(options.subscription)
            ends = lookup.resolve(options.ending, topic_partitions, starting=False)
            if options.starting.kind == "iceberg":
                starts = {}
            else:
                starts = lookup.resolve(options.starting, topic_partitions, starting=True,
                                        no_match=options.starting_timestamp_strategy)
        for tp in starts:
            if starts[tp] > ends[tp]:
                raise OptionError(f"{options.starting.option}: start offset {starts[tp]} of {tp[0]}-{tp[1]} is "
                                  f"after its end offset {ends[tp]}")
        table_tasks = []
        if options.starting.kind == "iceberg":
            start = IcebergStart(options)
            snapshots, starts = start.snapshots(topic_partitions, ends)
            table_tasks = start.partitions(snapshots, starts)
        ranges = [OffsetRange(t, p, starts[(t, p)], ends[(t, p)]) for t, p in topic_partitions]
        return table_tasks + [OffsetRangePartition(r) for r in split_ranges(ranges, options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)


class OdradekStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Micro-batches over per-partition offsets; the checkpoint holds them, commit() leaves the broker alone."""

    def __init__(self, options: SourceOptions):
        self.options = options
        self.available_now_target: StreamOffset | None = None

    def initialOffset(self) -> StreamOffset:
        """Where the query starts; with startingOffsets=iceberg the offsets each table's current snapshot records,
        and under STREAM_SNAPSHOTS that snapshot's id: the first batch reads its rows below them as well."""
        options = self.options
        with _lookup(options) as lookup:
            topic_partitions = lookup.partitions_of(options.subscription)
            if options.starting.kind != "iceberg":
                return _to_stream_offset(lookup.resolve(options.starting, topic_partitions, starting=True,
                                                        no_match=options.starting_timestamp_strategy))
            ends = {tp: marks[1] for tp, marks in lookup.watermarks(topic_partitions).items()}
        snapshots, starts = IcebergStart(options).snapshots(topic_partitions, ends)
        return {**_to_stream_offset(starts), **({STREAM_SNAPSHOTS: snapshots} if snapshots else {})}

    def prepareForTriggerAvailableNow(self) -> None:
        self.available_now_target = self._latest_known()

    def getDefaultReadLimit(self) -> ReadLimit:
        limit = self.options.max_offsets_per_trigger
        return ReadMaxRows(limit) if limit else ReadAllAvailable()

    def latestOffset(self, start: StreamOffset, limit: ReadLimit) -> StreamOffset:
        latest = self.available_now_target or self._latest_known()
        ends = _from_stream_offset(latest)
        starts = self._starts_with_new_partitions(start, ends)
        self._check_for_loss(starts, ends)
        if isinstance(limit, ReadMaxRows):
            ends = _rate_limit(starts, ends, limit.max_rows)
        return _to_stream_offset({tp: max(ends[tp], starts[tp]) for tp in ends})

    def reportLatestOffset(self) -> StreamOffset:
        return self._latest_known()

    def partitions(self, start: StreamOffset, end: StreamOffset) -> Sequence[InputPartition]:
        ends = _from_stream_offset(end)
        starts = self._starts_with_new_partitions(start, ends)
        ranges = [OffsetRange(t, p, starts[(t, p)], ends[(t, p)]) for t, p in sorted(ends)]
        table_tasks = []
        if STREAM_SNAPSHOTS in start:  # startingOffsets=iceberg's first batch: the tables' rows below `start` too
            table_tasks = IcebergStart(self.options).partitions(start[STREAM_SNAPSHOTS], _from_stream_offset(start))
        return table_tasks + [OffsetRangePartition(r) for r in split_ranges(ranges, self.options.min_partitions)]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        return read_partition(self.options, partition)

    def commit(self, end: StreamOffset) -> None:
        """Nothing to do: progress lives in Spark's checkpoint, and the source never commits to the broker."""

    def _latest_known(self) -> StreamOffset:
        with _lookup(self.options) as lookup:
            topic_partitions = lookup.partitions_of(self.options.subscription, missing_ok=True)
            return _to_stream_offset({tp: marks[1] for tp, marks in lookup.watermarks(topic_partitions).items()})

    def _starts_with_new_partitions(self, start: StreamOffset, ends: dict) -> dict[tuple[str, int], int]:
        """Start offsets, with Spark's rule for partitions that appeared after the query started: from earliest."""
        starts = _from_stream_offset(start)
        new_partitions = [tp for tp in ends if tp not in starts]
        if new_partitions:
            with _lookup(self.options) as lookup:
                starts.update({tp: marks[0] for tp, marks in lookup.watermarks(new_partitions).items()})
        return starts

    def _check_for_loss(self, starts: dict, ends: dict) -> None:
        gone = sorted(tp for tp in starts if tp not in ends)
        behind = sorted(tp for tp in ends if ends[tp] < starts[tp])
        if (gone or behind) and self.options.fail_on_data_loss:
            names = ", ".join(f"{t}-{p}" for t, p in gone + behind)
            raise DataLossError(f"failOnDataLoss: partition {names} was deleted or recreated since the last batch; "
                                "set failOnDataLoss=false to carry on")


def _rate_limit(starts: dict, ends: dict, limit: int) -> dict:
    """Spark's maxOffsetsPerTrigger split: each partition gets a share of the limit proportional to its lag."""
    lags = {tp: ends[tp] - starts[tp] for tp in ends if ends[tp] > starts[tp]}
    total = sum(lags.values())
    if total <= limit:
        return ends
    limited = dict(ends)
    for tp, lag in lags.items():
        share = limit * lag / total
        limited[tp] = min(ends[tp], starts[tp] + (int(share) if share >= 1 else 1))  # small lags are not starved
    return limited


def _to_stream_offset(offsets: dict[tuple[str, int], int]) -> StreamOffset:
    result: StreamOffset = {}
    for (topic, partition), offset in sorted(offsets.items()):
        result.setdefault(topic, {})[str(partition)] = int(offset)
    return result


def _from_stream_offset(offset: StreamOffset) -> dict[tuple[str, int], int]:
    return {(topic, int(partition)): value for topic, partitions in offset.items() if topic != STREAM_SNAPSHOTS
            for partition, value in partitions.items()}
