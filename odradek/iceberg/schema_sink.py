"""The schema modes' rows: odradek.iceberg.mode value_schema_id_prefix (each value framed by the schema registry's
wire format names its schema) and value_schema_latest (each value, unframed, is of the latest version of the
subject `<topic>-value`), their values as typed columns beside a `kafka` struct of the record's key, headers,
timestamp, partition and offset. The schema's type picks the translation: Avro (odradek/iceberg/avro.py), JSON
Schema (json_schema.py), Protobuf (protobuf.py, one translation per message of the schema a value names).

Keys, once the registry has the subject `<topic>-key`, are typed the same way (framed in value_schema_id_prefix, of
the subject's latest version in value_schema_latest) into the struct `kafka.key_fields`, beside their bytes in
`kafka.key`; without that subject a key is its bytes alone (a raw key that starts with byte 0, a big-endian long,
is not taken for a framed one).

A framed id is looked up as Confluent's deserializers look it up (GET /schemas/ids/{id}?subject=<topic>-value or
-key, odradek.registry.state.State.context_of_id): in the default context, or else in the first context whose
`:.ctx:<topic>-value` (or -key) has it; value_schema_latest reads the default context's subjects.

The table starts with the `kafka` column alone and each schema version its records use adds its fields (Iceberg's
union by name: a compatible new version adds columns, an older one's rows hold null in them). A record that cannot
be translated (no schema id, an id the registry does not have, a value or key that does not decode or validate, a
schema that has no column types or does not evolve the table) goes to the dead-letter table `<topic>~dlq`,
key_value rows with the reason, and never holds the topic up.

The `kafka` struct keeps the value's bytes too (kafka.value), as the log had them, frame and all: the typed columns
cannot give them back (JSON text, Protobuf's field order, a value's properties beyond its schema), and a read that
starts from the table (format("odradek") with startingOffsets=iceberg) yields them. A table written before the writer
kept them gains the field at the first round with rows (every translation's schema has the whole `kafka` struct, and
the table takes it by union); its older rows hold null there.

Each table keeps its own offsets in its snapshot summaries (odradek.offsets). The writer reads from the main
table's; the dead-letter table is committed first and takes only records at or past its own offsets, so a round cut
between the two commits, read again, adds to each table only what it lacks.
"""

from __future__ import annotations

import dataclasses

import pyarrow as pa
from pyiceberg.exceptions import CommitFailedException, NoSuchTableError
from pyiceberg.schema import Schema
from pyiceberg.types import NestedField

from odradek.iceberg import avro, json_schema, protobuf
from odradek.iceberg import table as tables
from odradek.iceberg.columns import Translation, Untranslatable, framed_id, key_schema
from odradek.registry import service
from odradek.registry.state import State, Version, qualifier
from odradek.registry.store import DEFAULT_TOPIC as SCHEMAS_TOPIC

__all__ = ["SCHEMAS_TOPIC", "SchemaSink", "State", "Translations"]

KAFKA_ONLY = Schema(NestedField(100, tables.KAFKA_COLUMN, tables.KAFKA_STRUCT, required=True))  # ids 1-9 inside
VALUE, KEY = "value", "key"
Known = tuple[str, int, tuple[int, ...] | None]  # (context, schema id, Protobuf message indexes) of a translation


@dataclasses.dataclass
class Translations:
    """What the writer keeps between rounds (an id never changes its schema): each schema's translation, or why it
    has none, and the context each (subject, framed id) resolved to."""

    parsed: dict[Known, Translation | Untranslatable] = dataclasses.field(default_factory=dict)
    contexts: dict[tuple[str, int], str] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class _Row:
    index: int  # the partition
    value_known: Known
    key_known: Known | None  # None: the key is its bytes alone
    row: dict  # its `kafka` holds the value's bytes, for a dead letter too


class SchemaSink:
    def __init__(self, catalog, namespace: str, topic: str, spec: str, mode: str, registry: State,
                 known: Translations):
        self.topic, self.mode, self.registry, self.known = topic, mode, registry, known
        self.catalog, self.namespace, self.spec = catalog, namespace, spec
        self.table = tables.load_or_create(catalog, namespace, topic, spec, KAFKA_ONLY)
        self.committed = tables.committed_offsets(self.table)
        try:
            self.dlq = tables.load_or_create(catalog, namespace, topic, spec, tables.DLQ_SCHEMA,
                                             topic + tables.DLQ_SUFFIX, create=False)
            self.dlq_committed = tables.committed_offsets(self.dlq)
        except NoSuchTableError:
            self.dlq, self.dlq_committed = None, {}
        self._rows: list[_Row] = []
        self._dead: list[tuple[int, dict]] = []  # (partition, dead-letter row)
        self._unknown: set[tuple[str, int]] = set()  # (subject, framed id) not registered when this round looked

    def add(self, index: int, columns) -> None:
        keys, values = columns.keys.to_pylist(), columns.values.to_pylist()
        headers = columns.headers.to_pylist()
        latest = {what: self._latest(what) for what in (VALUE, KEY)} if self.mode == "value_schema_latest" else {}
        typed_keys = latest[KEY] is not None if latest else self._has_subject(f"{self.topic}-{KEY}")
        for key, value, header, timestamp, offset in zip(keys, values, headers, columns.timestamps.tolist(),
                                                         columns.offsets.tolist()):
            kafka = {"key": key, "headers": header, "timestamp": timestamp * 1000, "partition": index,
                     "offset": offset, tables.KAFKA_VALUE: value}
            try:
                value_known, row = self._decode(value, VALUE, latest.get(VALUE))
                key_known = None
                if typed_keys and key is not None:
                    key_known, kafka[tables.KEY_FIELDS] = self._decode(key, KEY, latest.get(KEY))
                row[tables.KAFKA_COLUMN] = kafka
                self._rows.append(_Row(index, value_known, key_known, row))
            except Untranslatable as exc:
                self._bury(index, kafka, str(exc))

    def commit(self, offsets: dict[int, int]) -> int:
        """Evolve the table to every schema this round's rows use, commit the dead letters, then the rows."""
        uses = dict.fromkeys([(VALUE, entry.value_known) for entry in self._rows]
                             + [(KEY, entry.key_known) for entry in self._rows if entry.key_known is not None])
        for what, known in uses:
            translation = self.known.parsed[known]
            refusal = self._evolve(translation.schema if what == VALUE else key_schema(translation))
            if refusal is not None:
                used = [entry for entry in self._rows
                        if (entry.value_known if what == VALUE else entry.key_known) == known]
                for entry in used:
                    self._bury(entry.index, entry.row[tables.KAFKA_COLUMN],
                               f"the {what}'s {translation.name} does not evolve the table: {refusal}")
                self._rows = [entry for entry in self._rows if entry not in used]
        arrow_schema = self.table.schema().as_arrow()
        try:
            rows = pa.Table.from_pylist([entry.row for entry in self._rows], schema=arrow_schema)
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

    def _latest(self, what: str) -> Version | None:
        live = self.registry.live(f"{self.topic}-{what}")
        return live[-1] if live else None

    def _has_subject(self, subject: str) -> bool:
        """Whether the subject has a live version in any context (`:.ctx:<subject>`, or the default's)."""
        return any(self.registry.live(qualifier(context) + subject) for context in self.registry.contexts())

    def _decode(self, data: bytes | None, what: str, latest: Version | None) -> tuple[Known, dict]:
        """(its translation's key in self.known.parsed, the decoded columns) of a value or key."""
        subject = f"{self.topic}-{what}"
        if self.mode == "value_schema_id_prefix":
            schema_id, payload = framed_id(data, what)
            context, version = self._by_id(subject, schema_id)
            if version is None:
                raise Untranslatable(f"the {what}'s schema id {schema_id} is not in the schema registry")
            indexes = None
            if version.schema_type == "PROTOBUF":
                try:
                    indexes, payload = protobuf.message_indexes(payload)
                except Untranslatable as exc:
                    raise Untranslatable(f"the {what} {exc}") from None
        else:
            if latest is None:
                raise Untranslatable(f"the schema registry has no subject {subject}")
            if data is None:
                raise Untranslatable(f"null {what} (a tombstone)")
            context, version, payload = ".", latest, data
            indexes = (0,) if version.schema_type == "PROTOBUF" else None
        known = (context, version.id, indexes)
        if known not in self.known.parsed:
            try:
                self.known.parsed[known] = self._translate(version, indexes)
            except Untranslatable as exc:
                self.known.parsed[known] = exc
        translation = self.known.parsed[known]
        if isinstance(translation, Untranslatable):
            raise translation if what == VALUE else Untranslatable(f"the key's {translation}")
        try:
            return known, translation.decode(payload)
        except Untranslatable as exc:
            raise Untranslatable(f"the {what} {exc}") from None

    def _by_id(self, subject: str, schema_id: int) -> tuple[str, Version | None]:
        """The context a framed id resolves in for the subject, and its schema there (None: not registered)."""
        context = self.known.contexts.get((subject, schema_id))
        if context is None:
            if (subject, schema_id) in self._unknown:  # the registry does not change during a round
                return ".", None
            context = self.registry.context_of_id(schema_id, subject)  # a look through every version
            if schema_id not in self.registry.ids_in(context):
                self._unknown.add((subject, schema_id))
                return context, None
            self.known.contexts[(subject, schema_id)] = context  # an id, once registered, keeps its schema
        return context, self.registry.ids_in(context)[schema_id]

    def _translate(self, version: Version, indexes: tuple[int, ...] | None) -> Translation:
        name = f"schema {version.id}"
        if version.schema_type == "AVRO":
            return avro.value_schema(version.schema, name)
        try:  # references resolved and parsed as the registry does (protoc compiles a .proto schema)
            parsed = service.parse(self.registry, version.schema_type, version.schema, version.references)
        except service.RegistryError as exc:
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
        """The rows Arrow takes one by one, the others to the dead letters (a decoded value or key out of its
        column's range or type)."""
        kept = []
        for entry in self._rows:
            try:
                pa.Table.from_pylist([entry.row], schema=arrow_schema)
                kept.append(entry.row)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError) as exc:
                self._bury(entry.index, entry.row[tables.KAFKA_COLUMN],
                           f"the record does not fit its columns: {exc}")
        return pa.Table.from_pylist(kept, schema=arrow_schema)

    def _bury(self, index: int, kafka: dict, reason: str) -> None:
        """A dead letter: a key_value row (the record's own fields, its value's bytes among them) and the reason."""
        kafka = {name: got for name, got in kafka.items() if name != tables.KEY_FIELDS}
        self._dead.append((index, {**kafka, "reason": reason}))
