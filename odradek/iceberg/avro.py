"""Avro values as typed Iceberg columns (odradek.iceberg.mode value_schema_id_prefix and value_schema_latest): an
Avro record schema from the schema registry as Iceberg fields, and a value framed by the registry's wire format
(magic byte 0, the schema id as a big-endian int32, the Avro binary) decoded into a row of them. Plain code over
fastavro and pyiceberg; what cannot be translated raises Untranslatable with the reason the dead-letter table keeps.

Types: boolean, int, long, float, double, string, bytes, fixed (binary), enum (string), record (struct), array
(list), map (map of string), a union of null and one type (that type, optional), and the logical types date,
timestamp-millis and timestamp-micros (timestamptz), time-millis and time-micros (time), uuid (string) and decimal
(decimal). Other unions have no column type: such a schema is untranslatable.
"""

from __future__ import annotations

import io
import json
import itertools
import struct
from typing import Any

import fastavro
from pyiceberg.schema import Schema
from pyiceberg.types import (BinaryType, BooleanType, DateType, DecimalType, DoubleType, FloatType, IcebergType,
                             IntegerType, ListType, LongType, MapType, NestedField, StringType, StructType,
                             TimestamptzType, TimeType)

from odradek.iceberg.table import KAFKA_COLUMN, KAFKA_STRUCT

MAGIC = 0
_PRIMITIVES = {"boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
               "double": DoubleType(), "string": StringType(), "bytes": BinaryType(), "enum": StringType(),
               "fixed": BinaryType()}
_LOGICAL = {"date": DateType(), "timestamp-millis": TimestamptzType(), "timestamp-micros": TimestamptzType(),
            "time-millis": TimeType(), "time-micros": TimeType(), "uuid": StringType()}


class Untranslatable(ValueError):
    """A value (or its schema) that has no row in the table: the reason goes to the dead-letter table."""


def framed_id(value: bytes | None) -> tuple[int, bytes]:
    """(schema id, Avro payload) of a value in the registry's wire format."""
    if value is None:
        raise Untranslatable("null value (a tombstone): no schema id")
    if len(value) < 5 or value[0] != MAGIC:
        raise Untranslatable("the value does not start with magic byte 0 and a schema id")
    return struct.unpack_from(">i", value, 1)[0], value[5:]


def value_schema(avro_text: str) -> tuple[Schema, Any]:
    """The table schema of values of this Avro record schema (its fields, then the `kafka` struct) and fastavro's
    parsed schema to decode them with."""
    try:
        parsed = fastavro.parse_schema(json.loads(avro_text))
    except Exception as exc:
        raise Untranslatable(f"the schema does not parse: {exc}") from None
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise Untranslatable("the schema is not an Avro record")
    ids = itertools.count(1)
    fields = [_field(ids, field["name"], field["type"]) for field in parsed["fields"]]
    if any(field.name == KAFKA_COLUMN for field in fields):
        raise Untranslatable(f"the schema has a field named {KAFKA_COLUMN}, the table's column of Kafka's fields")
    kafka = NestedField(next(ids), KAFKA_COLUMN, _renumber(ids, KAFKA_STRUCT), required=True)
    return Schema(*fields, kafka), parsed


def decode(parsed: Any, payload: bytes) -> dict:
    try:
        return fastavro.schemaless_reader(io.BytesIO(payload), parsed, parsed)
    except Exception as exc:
        raise Untranslatable(f"the value does not decode with its schema: {exc!r}") from None


def _field(ids, name: str, avro: Any) -> NestedField:
    """Every column of a value is optional: a later schema version may drop it, and rows of an earlier one that
    lacks a field added later hold null there."""
    field_id = next(ids)
    if isinstance(avro, list):
        branches = [branch for branch in avro if branch != "null"]
        if len(branches) != 1:
            raise Untranslatable(f"field {name}: a union of {avro} has no column type")
        avro = branches[0]
    return NestedField(field_id, name, _type(ids, name, avro), required=False)


def _type(ids, name: str, avro: Any) -> IcebergType:
    if isinstance(avro, str):
        if avro in _PRIMITIVES:
            return _PRIMITIVES[avro]
        raise Untranslatable(f"field {name}: type {avro} has no column type")
    kind, logical = avro.get("type"), avro.get("logicalType")
    if logical == "decimal":
        return DecimalType(avro["precision"], avro.get("scale", 0))
    if logical in _LOGICAL:
        return _LOGICAL[logical]
    if kind == "record":
        return StructType(*(_field(ids, field["name"], field["type"]) for field in avro["fields"]))
    if kind == "array":
        element_id = next(ids)
        element = _field(ids, "element", avro["items"])
        return ListType(element_id, element.field_type, element_required=False)
    if kind == "map":
        key_id, value_id = next(ids), next(ids)
        value = _field(ids, "value", avro["values"])
        return MapType(key_id, StringType(), value_id, value.field_type, value_required=False)
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    raise Untranslatable(f"field {name}: type {kind} has no column type")


def _renumber(ids, struct_type: StructType) -> StructType:
    """KAFKA_STRUCT with field ids after the value's (a schema's ids must be unique; the table assigns its own)."""
    def again(field_type):
        if isinstance(field_type, StructType):
            return StructType(*(NestedField(next(ids), f.name, again(f.field_type), required=f.required)
                                for f in field_type.fields))
        if isinstance(field_type, ListType):
            return ListType(next(ids), again(field_type.element_type), element_required=False)
        return field_type
    return again(struct_type)
