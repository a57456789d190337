"""What the schema modes' three formats (avro.py, json_schema.py, protobuf.py) share: the table schema of a value's
columns beside the `kafka` struct, the schema registry's frame around a value, and Untranslatable, the reason a
record goes to the dead-letter table. Plain code over pyiceberg.

A format module gives `value_schema(...) -> Translation`: the table schema of its values and the function that
decodes a payload into a row of it (a dict of the value's columns; schema_sink adds `kafka`). A key of a schema is
the same translation, its columns the struct `kafka.key_fields` (key_schema). Every column is
optional: a later schema version may drop it, and rows of an earlier one that lacks a field added later hold null
there. Field ids are numbered depth first from 1 in the schema's order (a struct's fields after it, a list's
element and a map's key and value after it), then the `kafka` struct's; the table assigns its own on union.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Callable, Iterator

from pyiceberg.schema import Schema
from pyiceberg.types import ListType, NestedField, StructType

from odradek.iceberg.table import KAFKA_COLUMN, KAFKA_STRUCT, KEY_FIELDS

MAGIC = 0


class Untranslatable(ValueError):
    """A value (or its schema) that has no row in the table: the reason goes to the dead-letter table."""


@dataclasses.dataclass
class Translation:
    schema: Schema  # the value's columns, then `kafka`
    # a payload (after the frame) to a row; Untranslatable if it does not decode, its reason a predicate the sink
    # completes with its subject ("the value " + "does not decode with its schema: ...")
    decode: Callable[[bytes], dict]
    name: str  # how the reasons name it: "schema 7", "schema 7 message 0.1"


def framed_id(data: bytes | None, what: str = "value") -> tuple[int, bytes]:
    """(schema id, what follows it) of a value (or key) in the registry's wire format."""
    if data is None:
        raise Untranslatable(f"null {what} (a tombstone): no schema id")
    if len(data) < 5 or data[0] != MAGIC:
        raise Untranslatable(f"the {what} does not start with magic byte 0 and a schema id")
    return struct.unpack_from(">i", data, 1)[0], data[5:]


def table_schema(ids: Iterator[int], fields: list[NestedField]) -> Schema:
    """The value's fields (numbered from `ids`), then the `kafka` struct numbered after them."""
    if any(field.name == KAFKA_COLUMN for field in fields):
        raise Untranslatable(f"the schema has a field named {KAFKA_COLUMN}, the table's column of Kafka's fields")
    return Schema(*fields, NestedField(next(ids), KAFKA_COLUMN, _renumber(ids, KAFKA_STRUCT), required=True))


def key_schema(translation: Translation) -> Schema:
    """The table schema of keys of a translation's schema: its columns as the struct `kafka.key_fields`, beside
    the key's bytes in `kafka.key` (the table's union by name adds it to the `kafka` struct)."""
    fields = [field for field in translation.schema.fields if field.name != KAFKA_COLUMN]
    top = translation.schema.highest_field_id
    return Schema(NestedField(top + 1, KAFKA_COLUMN, StructType(
        NestedField(top + 2, KEY_FIELDS, StructType(*fields), required=False)), required=True))


def _renumber(ids, struct_type: StructType) -> StructType:
    """KAFKA_STRUCT with field ids after the value's (a schema's ids must be unique)."""
    def again(field_type):
        if isinstance(field_type, StructType):
            return StructType(*(NestedField(next(ids), f.name, again(f.field_type), required=f.required)
                                for f in field_type.fields))
        if isinstance(field_type, ListType):
            return ListType(next(ids), again(field_type.element_type), element_required=False)
        return field_type
    return again(struct_type)
