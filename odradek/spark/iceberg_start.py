"""format("odradek") with startingOffsets=iceberg (Iceberg topics, docs/iceberg.md): each partition's rows in the
topic's table as of one snapshot, then the log from the offset that snapshot records for it, one consistent read with
no record twice and none missed, including records retention has since removed from the log.

A key_value table's rows are the records. A schema mode's table gives each record's own fields from its `kafka`
struct, the value's bytes (kafka.value, kept as the log had them, frame and all) among them, and the records that
went to the dead-letter table `<topic>~dlq` (its rows are key_value rows) are read too, merged in by offset: a task
reads both tables' rows of its partition. The dead-letter table is loaded after the table, since the writer commits
it first in every round: its current snapshot then has every dead letter below the table's recorded offsets (an
offset in both, a record a later round could translate after its dead letter was committed, is read from the
table). Rows written before the writer kept kafka.value hold null there and cannot be read as records: such a
table is refused at planning if it lacks the field, a task fails on such a row.

A batch read loads each topic's tables once when it is planned; a streaming query does so for its initial offset,
which names the snapshots (STREAM_SNAPSHOTS, the dead-letter table's under `<topic>~dlq`) beside the recorded
offsets, so that its first micro-batch, and that batch again after a restart, reads the same rows; the batches after
it read the log alone. A commit made while the query runs changes nothing: one task per partition reads the chosen
snapshots' rows of it, offsets below the recorded one (and a batch query's end), by pyiceberg; the log's tail is the
ordinary offset range from there. The catalog is the broker's own (its iceberg.* settings and log.dirs, by
DescribeConfigs) unless the options name it: iceberg.catalog.uri, iceberg.warehouse, iceberg.namespace. The tables
keep no timestamp type: timestampType is 0.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from odradek.client import Admin
from odradek.spark.fetcher import RECORD_SCHEMA, RECORD_SCHEMA_WITH_HEADERS
from odradek.spark.options import OptionError, SourceOptions


RECORD_FIELDS = ("key", "value", "headers", "timestamp", "partition", "offset")  # a table row's, as key_value's


class SnapshotPartition(InputPartition):
    """One partition's rows in one snapshot of its topic's table, below `end`; with `dead_letters`, the snapshot id
    of the dead-letter table whose rows of the partition are read too (a schema mode's)."""

    def __init__(self, catalog: dict[str, str], log_dir: str, topic: str, partition: int, snapshot_id: int,
                 end: int, dead_letters: int | None = None):
        super().__init__((topic, partition, snapshot_id))
        self.catalog, self.log_dir, self.topic, self.partition = catalog, log_dir, topic, partition
        self.snapshot_id, self.end, self.dead_letters = snapshot_id, end, dead_letters


# The key of a streaming query's initial offset that names, per table, the snapshot its first batch reads (neither
# is a topic: Kafka's topic names have no "@", and none has the "~" of a dead-letter table's `<topic>~dlq`)
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
        """Each table's current snapshot id (by table name: the topic's, and in a schema mode `<topic>~dlq` if it
        has one; tables without a snapshot have none), and where each partition's log read starts: the offset the
        topic's table's snapshot records for it (0 if none), at most its end in `ends`."""
        from pyiceberg.exceptions import NoSuchTableError

        from odradek.iceberg.table import DLQ_SUFFIX, KAFKA_COLUMN, KAFKA_VALUE, KEY_VALUE_SCHEMA, committed_offsets

        namespace = self.settings["iceberg.namespace"]
        snapshots, starts = {}, {}
        for topic in sorted({topic for topic, _ in topic_partitions}):
            try:
                table = self.catalog.load_table((namespace, topic))
            except NoSuchTableError:
                raise OptionError(f"startingOffsets: iceberg: no table {namespace}.{topic} (is "
                                  f"odradek.iceberg.mode set on the topic?)") from None
            names = {field.name for field in table.schema().fields}
            if KAFKA_COLUMN in names:
                kafka = table.schema().find_field(KAFKA_COLUMN).field_type
                if KAFKA_VALUE not in {field.name for field in kafka.fields}:
                    raise OptionError(
                        f"startingOffsets: iceberg: {namespace}.{topic} was written by a writer that did not keep "
                        f"the records' value bytes ({KAFKA_COLUMN}.{KAFKA_VALUE}, docs/iceberg.md): its rows' typed "
                        "columns do not give them back; read the topic from the log")
            elif names != {field.name for field in KEY_VALUE_SCHEMA.fields}:
                raise OptionError(f"startingOffsets: iceberg: {topic}'s table is neither a key_value table nor a "
                                  "schema mode's")
            snapshot = table.current_snapshot()
            if snapshot is not None:
                snapshots[topic] = snapshot.snapshot_id
            recorded = committed_offsets(table)
            for tp in [tp for tp in topic_partitions if tp[0] == topic]:
                starts[tp] = min(recorded.get(tp[1], 0), ends[tp])
            if KAFKA_COLUMN in names:  # after the table: the writer commits its dead letters first
                try:
                    dead = self.catalog.load_table((namespace, topic + DLQ_SUFFIX)).current_snapshot()
                except NoSuchTableError:
                    dead = None
                if dead is not None:
                    snapshots[topic + DLQ_SUFFIX] = dead.snapshot_id
        return snapshots, starts

    def partitions(self, snapshots: dict[str, int], starts: dict[tuple[str, int], int]) -> list[SnapshotPartition]:
        """A task per partition of a topic in `snapshots` with rows below its start."""
        from odradek.iceberg.table import DLQ_SUFFIX

        return [SnapshotPartition(self.settings, str(self.log_dir), topic, partition, snapshots[topic], start,
                                  snapshots.get(topic + DLQ_SUFFIX))
                for (topic, partition), start in sorted(starts.items()) if topic in snapshots and start > 0]


def read_snapshot(task: SnapshotPartition, include_headers: bool) -> Iterator[pa.RecordBatch]:
    """The task's partition's rows below its end, as records in offset order: the table's, and in a schema mode the
    dead-letter table's at offsets the table lacks."""
    import pyarrow.compute as pc

    from odradek.iceberg.table import DLQ_SUFFIX, KAFKA_COLUMN, KAFKA_VALUE, open_catalog

    catalog, namespace = open_catalog(task.catalog, Path(task.log_dir)), task.catalog["iceberg.namespace"]
    table = catalog.load_table((namespace, task.topic))
    if KAFKA_COLUMN not in {field.name for field in table.schema().fields}:
        rows = _rows(table, task, task.snapshot_id)
    else:
        rows = _rows(table, task, task.snapshot_id, f"{KAFKA_COLUMN}.")
        if rows["value"].null_count:
            first = pc.min(rows.filter(pc.is_null(rows["value"]))["offset"]).as_py()
            raise ValueError(f"startingOffsets: iceberg: {namespace}.{task.topic} partition {task.partition} holds "
                             f"rows without the record's value bytes ({KAFKA_COLUMN}.{KAFKA_VALUE} null, from offset "
                             f"{first}): written before the writer kept them (docs/iceberg.md), their typed columns "
                             "do not give them back")
        if task.dead_letters is not None:
            dead = _rows(catalog.load_table((namespace, task.topic + DLQ_SUFFIX)), task, task.dead_letters)
            rows = pa.concat_tables([rows, dead.filter(pc.invert(pc.is_in(dead["offset"], rows["offset"])))])
    rows = rows.sort_by("offset")
    schema = RECORD_SCHEMA_WITH_HEADERS if include_headers else RECORD_SCHEMA
    count = rows.num_rows
    arrays = [rows["key"].cast(pa.binary()), rows["value"].cast(pa.binary()),
              pa.repeat(pa.scalar(task.topic, pa.string()), count), rows["partition"], rows["offset"],
              rows["timestamp"], pa.repeat(pa.scalar(0, pa.int32()), count)]
    if include_headers:
        arrays.append(rows["headers"].cast(schema.field("headers").type))
    for batch in pa.Table.from_arrays(arrays, schema=schema).to_batches(max_chunksize=65536):
        yield batch


def _rows(table, task: SnapshotPartition, snapshot_id: int, prefix: str = "") -> pa.Table:
    """The task's partition's rows below its end in one snapshot of a table, RECORD_FIELDS each (those of the
    struct `prefix` names, in a schema mode's table), of one Arrow schema whatever the table."""
    from pyiceberg.expressions import And, EqualTo, LessThan

    from odradek.iceberg.table import KEY_VALUE_ARROW

    scanned = table.scan(row_filter=And(EqualTo(f"{prefix}partition", task.partition),
                                        LessThan(f"{prefix}offset", task.end)),
                         selected_fields=tuple(prefix + name for name in RECORD_FIELDS),
                         snapshot_id=snapshot_id).to_arrow()
    if prefix:
        scanned = scanned.flatten()
        scanned = scanned.rename_columns([name.removeprefix(prefix) for name in scanned.column_names])
    return pa.Table.from_arrays([scanned[name].cast(KEY_VALUE_ARROW.field(name).type) for name in RECORD_FIELDS],
                                names=list(RECORD_FIELDS))
