"""format("odradek") with startingOffsets=iceberg (a batch read of key_value Iceberg topics, docs/iceberg.md): each
partition's rows in the topic's table as of its current snapshot, then the log from the offset that snapshot
records for it, one consistent read with no record twice and none missed, including records retention has since
removed from the log.

The driver loads each topic's table once: its snapshot id and recorded offsets fix the plan, so a commit made while
the query runs changes nothing (one task per partition reads that snapshot's rows of it, offsets below both the
recorded one and the query's end, by pyiceberg; the log's tail is the ordinary offset range from there). The catalog
is the broker's own (its iceberg.* settings and log.dirs, by DescribeConfigs) unless the options name it:
iceberg.catalog.uri, iceberg.warehouse, iceberg.namespace. The table keeps no timestamp type: timestampType is 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from odradek.client import Admin
from odradek.spark.fetcher import RECORD_SCHEMA, RECORD_SCHEMA_WITH_HEADERS
from odradek.spark.options import OptionError, SourceOptions


class SnapshotPartition(InputPartition):
    """One partition's rows in one snapshot of its topic's table, below `end`."""

    def __init__(self, catalog: dict[str, str], log_dir: str, topic: str, partition: int, snapshot_id: int,
                 end: int):
        super().__init__((topic, partition, snapshot_id))
        self.catalog, self.log_dir, self.topic, self.partition = catalog, log_dir, topic, partition
        self.snapshot_id, self.end = snapshot_id, end


def snapshot_partitions(options: SourceOptions, topic_partitions: list[tuple[str, int]],
                        ends: dict[tuple[str, int], int]) -> tuple[list[SnapshotPartition], dict]:
    """The snapshot tasks of every table, and where each partition's log read starts (the recorded offsets)."""
    from pyiceberg.exceptions import NoSuchTableError

    from odradek.iceberg.table import KEY_VALUE_SCHEMA, broker_catalog, committed_offsets, open_catalog

    given = options.iceberg
    admin = Admin(options.client_config["bootstrap.servers"], options.poll_timeout_ms / 1000, options.client_config)
    settings, log_dir = broker_catalog(admin, given.get("iceberg.catalog.uri"), given.get("iceberg.warehouse"),
                                       given.get("iceberg.namespace"))
    catalog = open_catalog(settings, log_dir)
    tasks, starts = [], {}
    for topic in sorted({topic for topic, _ in topic_partitions}):
        try:
            table = catalog.load_table((settings["iceberg.namespace"], topic))
        except NoSuchTableError:
            raise OptionError(f"startingOffsets: iceberg: no table {settings['iceberg.namespace']}.{topic} (is "
                              f"odradek.iceberg.mode set on the topic?)") from None
        if {field.name for field in table.schema().fields} != {field.name for field in KEY_VALUE_SCHEMA.fields}:
            raise OptionError(f"startingOffsets: iceberg: {topic}'s table is not a key_value table")
        snapshot = table.current_snapshot()
        recorded = committed_offsets(table)
        for tp in [tp for tp in topic_partitions if tp[0] == topic]:
            starts[tp] = min(recorded.get(tp[1], 0), ends[tp])
            if snapshot is not None and starts[tp] > 0:
                tasks.append(SnapshotPartition(settings, str(log_dir), topic, tp[1], snapshot.snapshot_id,
                                               starts[tp]))
    return tasks, starts


def read_snapshot(task: SnapshotPartition, include_headers: bool) -> Iterator[pa.RecordBatch]:
    from pyiceberg.expressions import And, EqualTo, LessThan

    from odradek.iceberg.table import open_catalog

    table = open_catalog(task.catalog, Path(task.log_dir)).load_table((task.catalog["iceberg.namespace"], task.topic))
    rows = table.scan(row_filter=And(EqualTo("partition", task.partition), LessThan("offset", task.end)),
                      snapshot_id=task.snapshot_id).to_arrow().sort_by("offset")
    schema = RECORD_SCHEMA_WITH_HEADERS if include_headers else RECORD_SCHEMA
    count = rows.num_rows
    arrays = [rows["key"].cast(pa.binary()), rows["value"].cast(pa.binary()),
              pa.repeat(pa.scalar(task.topic, pa.string()), count), rows["partition"], rows["offset"],
              rows["timestamp"], pa.repeat(pa.scalar(0, pa.int32()), count)]
    if include_headers:
        arrays.append(rows["headers"].cast(schema.field("headers").type))
    for batch in pa.Table.from_arrays(arrays, schema=schema).to_batches(max_chunksize=65536):
        yield batch
