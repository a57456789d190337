"""A topic's Iceberg table: its catalog, its schema and partition spec, records to Arrow rows, and the Kafka offsets
each snapshot covers. Plain code over pyiceberg and pyarrow, no threads and no broker: the writer
(odradek/iceberg/writer.py) and `odradek iceberg describe` both build on it.

The offsets a table holds are in its snapshots' summaries, so the table itself says where writing resumes: each
commit carries `odradek.offsets`, a JSON object of every partition ever written to the next offset to write
({"0": 1200, "1": 998}), the previous commit's map with the partitions this one wrote updated. A snapshot made by
someone else (a compaction, an expiry) may lack it: the nearest ancestor that has it counts (docs/iceberg.md).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import NamespaceAlreadyExistsError, NoSuchTableError, TableAlreadyExistsError
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.table import Table
from pyiceberg.transforms import (BucketTransform, DayTransform, HourTransform, IdentityTransform, MonthTransform,
                                  TruncateTransform, YearTransform)
from pyiceberg.types import (BinaryType, IntegerType, ListType, LongType, NestedField, StringType, StructType,
                             TimestamptzType)

from odradek.config import parse_iceberg_partition_spec
from odradek.records.arrow import RecordColumns

log = logging.getLogger("odradek.iceberg")
OFFSETS_PROPERTY = "odradek.offsets"  # snapshot summary: {"<partition>": next offset} as JSON
TOPIC_PROPERTY = "odradek.topic"  # table property: the topic the table is written from
# pyiceberg retries a commit that lost a race by rebuilding its snapshot on the winner's, with the summary computed
# before: the offsets it records would drop the winner's. A commit that loses must fail, so that the round starts
# again from the table.
NO_RETRIES = {"commit.retry.num-retries": "0"}

KEY_VALUE_SCHEMA = Schema(
    NestedField(1, "key", BinaryType(), required=False),
    NestedField(2, "value", BinaryType(), required=False),
    NestedField(3, "headers", ListType(7, StructType(
        NestedField(8, "key", StringType(), required=False),
        NestedField(9, "value", BinaryType(), required=False)), element_required=False), required=False),
    NestedField(4, "timestamp", TimestamptzType(), required=True),
    NestedField(5, "partition", IntegerType(), required=True),
    NestedField(6, "offset", LongType(), required=True),
)
KEY_VALUE_ARROW = KEY_VALUE_SCHEMA.as_arrow()
# the schema modes' tables: the value's fields, then Kafka's in one struct column (a value may have a field `offset`):
# the record's key, headers, timestamp, partition, offset and, last, its value's bytes as the log has them (a table
# written before the writer kept them lacks `value`, or holds null in it: docs/iceberg.md, format notes)
KAFKA_COLUMN = "kafka"
KAFKA_VALUE = "value"  # kafka.value: never null in a row the writer keeps it for (a null value is a dead letter)
KAFKA_STRUCT = StructType(*(field for field in KEY_VALUE_SCHEMA.fields if field.name != KAFKA_VALUE),
                          KEY_VALUE_SCHEMA.find_field(KAFKA_VALUE))
KEY_FIELDS = "key_fields"  # kafka.key_fields: a key of a registry schema as its columns (schema_sink.py)
DLQ_SUFFIX = "~dlq"  # `<topic>~dlq`: the records a schema mode could not translate, as key_value rows and a reason
DLQ_SCHEMA = Schema(*KEY_VALUE_SCHEMA.fields, NestedField(10, "reason", StringType(), required=True))

_TRANSFORMS = {"year": YearTransform, "month": MonthTransform, "day": DayTransform, "hour": HourTransform,
               "identity": IdentityTransform}
_MAX_TIMESTAMP_MS = 2**63 // 1000 - 1  # Iceberg's timestamps are microseconds in an int64


def open_catalog(config: Mapping[str, Any], log_dir: Path) -> Catalog:
    """The catalog of iceberg.catalog.uri (a REST catalog for http(s)://, else a SQL catalog: SQLite in
    <log dir>/iceberg/catalog.db by default) with iceberg.warehouse (default <log dir>/iceberg/warehouse)."""
    uri = config["iceberg.catalog.uri"]
    warehouse = config["iceberg.warehouse"] or str(log_dir / "iceberg" / "warehouse")
    if "://" not in warehouse:
        Path(warehouse).mkdir(parents=True, exist_ok=True)
        warehouse = Path(warehouse).resolve().as_uri()
    if uri.startswith(("http://", "https://")):
        from pyiceberg.catalog.rest import RestCatalog

        return RestCatalog("odradek", uri=uri, warehouse=warehouse)
    from pyiceberg.catalog.sql import SqlCatalog

    if not uri:
        (log_dir / "iceberg").mkdir(parents=True, exist_ok=True)
        uri = f"sqlite:///{log_dir / 'iceberg' / 'catalog.db'}"
    return SqlCatalog("odradek", uri=uri, warehouse=warehouse)


def broker_catalog(admin, catalog_uri: str | None = None, warehouse: str | None = None,
                   namespace: str | None = None) -> tuple[dict[str, str], Path]:
    """The catalog settings of a running broker, asked by DescribeConfigs through `admin` (odradek.client.Admin),
    under those given here, and its data dir (what open_catalog resolves the defaults against)."""
    from confluent_kafka.admin import ConfigResource

    broker = admin.describe_cluster().brokers[0].node_id
    values = {entry.name: entry.value or "" for entry in admin.config_values(ConfigResource.Type.BROKER, str(broker))}
    config = {key: values.get(key, "") for key in ("iceberg.catalog.uri", "iceberg.warehouse", "iceberg.namespace")}
    config["iceberg.namespace"] = config["iceberg.namespace"] or "odradek"
    for key, given in (("iceberg.catalog.uri", catalog_uri), ("iceberg.warehouse", warehouse),
                       ("iceberg.namespace", namespace)):
        if given is not None:
            config[key] = given
    return config, Path(values.get("log.dirs", "").split(",")[0]).resolve()


def partition_spec(text: str, schema: Schema = KEY_VALUE_SCHEMA) -> PartitionSpec:
    """odradek.iceberg.partition.spec (checked by odradek.config) as an Iceberg partition spec of `schema`: in a
    schema mode's table the columns of the spec are those in the `kafka` struct (`value` is none)."""
    fields = []
    for number, (transform, width, column) in enumerate(parse_iceberg_partition_spec(text)):
        in_struct = KAFKA_COLUMN in {field.name for field in schema.fields}
        source = schema.find_field(f"{KAFKA_COLUMN}.{column}" if in_struct else column)  # ValueError: no column
        if transform == "bucket":
            made, name = BucketTransform(width), f"{column}_bucket_{width}"
        elif transform == "truncate":
            made, name = TruncateTransform(width), f"{column}_trunc_{width}"
        else:
            made, name = _TRANSFORMS[transform](), column if transform == "identity" else f"{column}_{transform}"
        fields.append(PartitionField(source.field_id, 1000 + number, made, name))
    return PartitionSpec(*fields)


def load_or_create(catalog: Catalog, namespace: str, topic: str, spec_text: str,
                   schema: Schema = KEY_VALUE_SCHEMA, name: str | None = None, create: bool = True) -> Table:
    """The table `<namespace>.<name>` (default: the topic's name), created (with its namespace) on first use with
    `schema` and the topic's spec (with `create` False: NoSuchTableError), with pyiceberg's commit retries off (see
    NO_RETRIES) and its partition spec the topic's (evolve_spec)."""
    identifier = (namespace, name or topic)
    try:
        table = catalog.load_table(identifier)
    except NoSuchTableError:
        if not create:
            raise
        try:
            catalog.create_namespace(namespace)
        except NamespaceAlreadyExistsError:
            pass
        try:
            spec = partition_spec(spec_text, schema)
        except ValueError as exc:  # a column the table lacks: odradek.config refuses such a spec, but be safe
            log.error("%s.%s: partition spec %r refused (%s): the table is created unpartitioned", namespace,
                      identifier[1], spec_text, exc)
            spec = PartitionSpec()
        try:
            return catalog.create_table(identifier, schema, partition_spec=spec,
                                        properties={TOPIC_PROPERTY: topic, **NO_RETRIES})
        except TableAlreadyExistsError:  # another broker made it meanwhile
            table = catalog.load_table(identifier)
    if any(table.properties.get(key) != value for key, value in NO_RETRIES.items()):
        with table.transaction() as transaction:
            transaction.set_properties(NO_RETRIES)
    evolve_spec(table, spec_text)
    return table


def evolve_spec(table: Table, spec_text: str) -> None:
    """Make the table's partition spec the topic's, if the topic's odradek.iceberg.partition.spec changed: Iceberg's
    spec evolution (a metadata commit, no snapshot) removes the fields the new spec lacks and adds its new ones
    (a field that was in an earlier spec comes back with its id), so data files written from then on are partitioned
    by the new spec and those written before keep theirs. A field is its column and transform: a change of the
    fields' order alone changes nothing. A spec the table cannot take is logged and the table keeps its own."""
    try:
        wanted = partition_spec(spec_text, table.schema())
    except ValueError as exc:
        log.error("%s: partition spec %r refused (%s): the table keeps its spec %s", table.name(), spec_text, exc,
                  table.spec())
        return
    have = {(field.source_id, repr(field.transform)): field for field in table.spec().fields}
    want = {(field.source_id, repr(field.transform)): field for field in wanted.fields}
    if have.keys() == want.keys():
        return
    try:
        with table.update_spec() as update:
            for key in have.keys() - want.keys():
                update.remove_field(have[key].name)
            for key, field in want.items():
                if key not in have:
                    update.add_field(table.schema().find_column_name(field.source_id), field.transform, field.name)
    except ValueError as exc:  # pyiceberg's own checks (a name a removed field of an earlier spec holds...)
        log.error("%s: partition spec %r refused (%s): the table keeps its spec %s", table.name(), spec_text, exc,
                  table.spec())
        return
    log.info("%s: partition spec now %s (spec id %d), from odradek.iceberg.partition.spec %r", table.name(),
             table.spec(), table.spec().spec_id, spec_text)


def committed_offsets(table: Table) -> dict[int, int]:
    """{partition: next offset to write} of the table's current snapshot (or its nearest ancestor that says)."""
    snapshot = table.current_snapshot()
    while snapshot is not None:
        recorded = snapshot.summary.additional_properties.get(OFFSETS_PROPERTY) if snapshot.summary else None
        if recorded is not None:
            return {int(partition): int(offset) for partition, offset in json.loads(recorded).items()}
        snapshot = table.snapshot_by_id(snapshot.parent_snapshot_id) if snapshot.parent_snapshot_id else None
    return {}


def offsets_summary(offsets: Mapping[int, int]) -> dict[str, str]:
    return {OFFSETS_PROPERTY: json.dumps({str(partition): offset for partition, offset in sorted(offsets.items())})}


def key_value_rows(columns: RecordColumns, partition: int) -> pa.Table:
    """One partition's records (odradek.records.arrow columns, headers included) as rows of the key_value table."""
    count = len(columns.offsets)
    micros = np.clip(columns.timestamps, -_MAX_TIMESTAMP_MS, _MAX_TIMESTAMP_MS) * 1000
    return pa.Table.from_arrays([
        columns.keys, columns.values, columns.headers.cast(KEY_VALUE_ARROW.field("headers").type),
        pa.array(micros, pa.timestamp("us", tz="UTC")),
        pa.array(np.full(count, partition, np.int32)),
        pa.array(columns.offsets, pa.int64()),
    ], schema=KEY_VALUE_ARROW)
