"""The schema modes' rows: odradek.iceberg.mode value_schema_id_prefix (each value framed by the schema registry's
wire format names its schema) and value_schema_latest (each value, unframed, is of the latest version of the
subject `<topic>-value`), their values as typed columns beside a `kafka` struct of the record's key, headers,
timestamp, partition and offset. The schema's type picks the translation: Avro (odradek/iceberg/avro.py), JSON
Schema (json_schema.py), Protobuf (protobuf.py, one translation per message of the schema a value names).

The table starts with the `kafka` column alone and each schema version its records use adds its fields (Iceberg's
union by name: a compatible new version adds columns, an older one's rows hold null in them). A record that cannot
be translated (no schema id, an id the registry does not have, a value that does not decode or validate, a schema
that has no column types or does not evolve the table) goes to the dead-letter table `<topic>~dlq`, key_value rows
with the reason, and never holds the topic up.

Each table keeps its own offsets in its snapshot summaries (odradek.offsets). The writer reads from the main
table's; the dead-letter table is committed first and takes only records at or past its own offsets, so a round cut
between the two commits, read again, adds to each table only what it lacks.
"""

from __future__ import annotations

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField

from odradek.iceberg import avro, json_schema, protobuf
from odradek.iceberg import table as tables
from odradek.iceberg.columns import Translation, Untranslatable, framed_id
from odradek.registry.service import Registry, RegistryError
from odradek.registry.state import State
from odradek.registry.store import DEFAULT_TOPIC as SCHEMAS_TOPIC

__all__ = ["SCHEMAS_TOPIC", "SchemaSink", "State"]

KAFKA_ONLY = Schema(NestedField(100, tables.KAFKA_COLUMN, tables.KAFKA_STRUCT, required=True))  # ids 1-9 inside


class SchemaSink:
    def __init__(self, catalog, namespace: str, topic: str, spec: str, mode: str, registry: State,
                 parsed: dict[int | tuple, Translation | Untranslatable]):
        self.topic, self.mode, self.registry, self.parsed = topic, mode, registry, parsed
        self.catalog, self.namespace, self.spec = catalog, namespace, spec
        self.table = tables.load_or_create(catalog, namespace, topic, spec, KAFKA_ONLY)
        self.committed = tables.committed_offsets(self.table)
        try:
            self.dlq = catalog.load_table((namespace, topic + tables.DLQ_SUFFIX))
            self.dlq_committed = tables.committed_offsets(self.dlq)
        except NoSuchTableError:
            self.dlq, self.dlq_committed = None, {}
        self._rows: list[tuple[int, int | tuple, dict, bytes]] = []  # (partition, translation key, row, the value)
        self._dead: list[tuple[int, dict]] = []  # (partition, dead-letter row)

    def add(self, index: int, columns) -> None:
        keys, values = columns.keys.to_pylist(), columns.values.to_pylist()
        headers = columns.headers.to_pylist()
        for key, value, header, timestamp, offset in zip(keys, values, headers, columns.timestamps.tolist(),
                                                         columns.offsets.tolist()):
            kafka = {"key": key, "headers": header, "timestamp": timestamp * 1000, "partition": index,
                     "offset": offset}
            try:
                key, payload = self._translation_of(value)
                row = self.parsed[key].decode(payload)
                row[tables.KAFKA_COLUMN] = kafka
                self._rows.append((index, key, row, value))
            except Untranslatable as exc:
                self._bury(index, kafka, value, str(exc))

    def commit(self, offsets: dict[int, int]) -> int:
        """Evolve the table to every schema this round's rows use, commit the dead letters, then the rows."""
        for key in dict.fromkeys(entry[1] for entry in self._rows):
            refusal = self._evolve(self.parsed[key].schema)
            if refusal is not None:
                for index, _, row, value in [entry for entry in self._rows if entry[1] == key]:
                    self._bury(index, row[tables.KAFKA_COLUMN], value,
                               f"{self.parsed[key].name} does not evolve the table: {refusal}")
                self._rows = [entry for entry in self._rows if entry[1] != key]
        arrow_schema = self.table.schema().as_arrow()
        try:
            rows = pa.Table.from_pylist([entry[2] for entry in self._rows], schema=arrow_schema)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            rows = self._convertible(arrow_schema)
        if self._dead:
            if self.dlq is None:
                self.dlq = tables.load_or_create(self.catalog, self.namespace, self.topic, self.spec,
                                                 tables.DLQ_SCHEMA, self.topic + tables.DLQ_SUFFIX)
                self.dlq_committed = tables.committed_offsets(self.dlq)
            dead = pa.Table.from_pylist([row for index, row in self._dead
                                         if row["offset"] >= self.dlq_committed.get(index, 0)],
                                        schema=self.dlq.schema().as_arrow())  # the table's field ids
            self.dlq.append(dead, snapshot_properties=tables.offsets_summary({**self.dlq_committed, **offsets}))
        self.table.append(rows, snapshot_properties=tables.offsets_summary(offsets))
        return rows.num_rows

    def _translation_of(self, value: bytes | None) -> tuple[int | tuple, bytes]:
        """(key in self.parsed of the value's translation, its payload): a schema id, for Protobuf with the message
        indexes."""
        if self.mode == "value_schema_id_prefix":
            schema_id, payload = framed_id(value)
            version = self.registry.ids.get(schema_id)
            if version is None:
                raise Untranslatable(f"schema id {schema_id} is not in the schema registry")
            indexes = None
            if version.schema_type == "PROTOBUF":
                indexes, payload = protobuf.message_indexes(payload)
        else:
            subject = f"{self.topic}-value"
            live = self.registry.live(subject)
            if not live:
                raise Untranslatable(f"the schema registry has no subject {subject}")
            if value is None:
                raise Untranslatable("null value (a tombstone)")
            version, payload = live[-1], value
            schema_id, indexes = version.id, (0,) if version.schema_type == "PROTOBUF" else None
        key = schema_id if indexes is None else (schema_id, indexes)
        if key not in self.parsed:
            try:
                self.parsed[key] = self._translate(version, indexes)
            except Untranslatable as exc:
                self.parsed[key] = exc
        known = self.parsed[key]
        if isinstance(known, Untranslatable):
            raise known
        return key, payload

    def _translate(self, version, indexes: tuple[int, ...] | None) -> Translation:
        name = f"schema {version.id}"
        if version.schema_type == "AVRO":
            return avro.value_schema(version.schema, name)
        try:  # references resolved and parsed as the registry does (protoc compiles a .proto schema); Registry's
            # parse reads only the state it is given, not a store
            parsed = Registry(None).parse(self.registry, version.schema_type, version.schema, version.references)
        except RegistryError as exc:
            raise Untranslatable(f"{name} does not parse: {exc.message}") from None
        if version.schema_type == "JSON":
            return json_schema.value_schema(parsed, name)
        return protobuf.value_schema(parsed, indexes, f"{name} message {'.'.join(map(str, indexes))}")

    def _evolve(self, schema: Schema) -> str | None:
        """Add the schema's new columns to the table (a commit of its metadata); the reason if it cannot."""
        try:
            update = self.table.update_schema().union_by_name(schema)
            if update._apply().fields == self.table.schema().fields:
                return None
            update.commit()
        except CommitFailedException:
            raise
        except Exception as exc:  # an incompatible change of a column's type: pyiceberg's ValidationError
            return str(exc)
        return None

    def _convertible(self, arrow_schema: pa.Schema) -> pa.Table:
        """The rows Arrow takes one by one, the others to the dead letters (a decoded value out of its column's
        range or type)."""
        kept = []
        for index, _, row, value in self._rows:
            try:
                pa.Table.from_pylist([row], schema=arrow_schema)
                kept.append(row)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                self._bury(index, row[tables.KAFKA_COLUMN], value, f"the value does not fit its columns: {exc}")
        return pa.Table.from_pylist(kept, schema=arrow_schema)

    def _bury(self, index: int, kafka: dict, value: bytes | None, reason: str) -> None:
        self._dead.append((index, {**kafka, "value": value, "reason": reason}))
