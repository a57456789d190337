"""format("odradek") with startingOffsets=iceberg (key_value Iceberg topics, docs/iceberg.md): each partition's rows
in the topic's table as of one snapshot, then the log from the offset that snapshot records for it, one consistent
read with no record twice and none missed, including records retention has since removed from the log.

A batch read loads each topic's table once when it is planned; a streaming query does so for its initial offset,
which names the snapshots (STREAM_SNAPSHOTS) beside the recorded offsets, so that its first micro-batch, and that
batch again after a restart, reads the same rows; the batches after it read the log alone. A commit made while the
query runs changes nothing: one task per partition reads the chosen snapshot's rows of it, offsets below the
recorded one (and a batch query's end), by pyiceberg; the log's tail is the ordinary offset range from there. The
catalog is the broker's own (its iceberg.* settings and log.dirs, by DescribeConfigs) unless the options name it:
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


# The key of a streaming query's initial offset that names, per topic, the snapshot its first batch reads (not a
# topic: Kafka's topic names have no "@")
STREAM_SNAPSHOTS = "@iceberg"


class IcebergStart:
    """The catalog of the tables a read starts from: the broker's, or the one the options name."""

    def __init__(self, options: SourceOptions):
        from odradek.iceberg.table import broker_catalog, open_catalog

        given = options.iceberg
        admin = Admin(options.client_config["bootstrap.servers"], options.poll_timeout_ms / 1000,
                      options.client_config)
        self.settings, self.log_dir = broker_catalog(admin, given.get("iceberg.catalog.uri"),
                                                     given.get("iceberg.warehouse"), given.get("iceberg.namespace"))
        self.catalog = open_catalog(self.settings, self.log_dir)

    def snapshots(self, topic_partitions: list[tuple[str, int]], ends: dict[tuple[str, int], int]
                  ) -> tuple[dict[str, int], dict[tuple[str, int], int]]:
        """Each topic's current snapshot id (topics whose table has one), and where each partition's log read
        starts: the offset that snapshot records for it (0 if none), at most its end in `ends`."""
        from pyiceberg.exceptions import NoSuchTableError

        from odradek.iceberg.table import KEY_VALUE_SCHEMA, committed_offsets

        namespace = self.settings["iceberg.namespace"]
        snapshots, starts = {}, {}
        for topic in sorted({topic for topic, _ in topic_partitions}):
            try:
                table = self.catalog.load_table((namespace, topic))
            except NoSuchTableError:
                raise OptionError(f"startingOffsets: iceberg: no table {namespace}.{topic} (is "
                                  f"odradek.iceberg.mode set on the topic?)") from None
            if {field.name for field in table.schema().fields} != {field.name for field in KEY_VALUE_SCHEMA.fields}:
                raise OptionError(f"startingOffsets: iceberg: {topic}'s table is not a key_value table")
            snapshot = table.current_snapshot()
            if snapshot is not None:
                snapshots[topic] = snapshot.snapshot_id
            recorded = committed_offsets(table)
            for tp in [tp for tp in topic_partitions if tp[0] == topic]:
                starts[tp] = min(recorded.get(tp[1], 0), ends[tp])
        return snapshots, starts

    def partitions(self, snapshots: dict[str, int], starts: dict[tuple[str, int], int]) -> list[SnapshotPartition]:
        """A task per partition of a topic in `snapshots` with rows below its start."""
        return [SnapshotPartition(self.settings, str(self.log_dir), topic, partition, snapshots[topic], start)
                for (topic, partition), start in sorted(starts.items()) if topic in snapshots and start > 0]


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
