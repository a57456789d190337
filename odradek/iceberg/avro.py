"""Avro values as typed Iceberg columns (odradek.iceberg.mode value_schema_id_prefix and value_schema_latest): an
Avro record schema from the schema registry as Iceberg fields, and a value framed by the registry's wire format
(magic byte 0, the schema id as a big-endian int32, the Avro binary) decoded into a row of them. Plain code over
fastavro and pyiceberg (columns.py has the shared rules: ids, optional columns, the `kafka` struct); what cannot be
translated raises Untranslatable with the reason the dead-letter table keeps.

Types: boolean, int, long, float, double, string, bytes, fixed (binary), enum (string), record (struct), array
(list), map (map of string), a union of null and one type (that type, optional), and the logical types date,
timestamp-millis and timestamp-micros (timestamptz), time-millis and time-micros (time), uuid (string) and decimal
(decimal). Other unions have no column type: such a schema is untranslatable.
"""

from __future__ import annotations

import functools
import io
import itertools
import json
from typing import Any

import fastavro
from pyiceberg.types import (BinaryType, BooleanType, DateType, DecimalType, DoubleType, FloatType, IcebergType,
                             IntegerType, ListType, LongType, MapType, NestedField, StringType, StructType,
                             TimestamptzType, TimeType)

from odradek.iceberg.columns import Translation, Untranslatable, table_schema

_PRIMITIVES = {"boolean": BooleanType(), "int": IntegerType(), "long": LongType(), "float": FloatType(),
               "double": DoubleType(), "string": StringType(), "bytes": BinaryType(), "enum": StringType(),
               "fixed": BinaryType()}
_LOGICAL = {"date": DateType(), "timestamp-millis": TimestamptzType(), "timestamp-micros": TimestamptzType(),
            "time-millis": TimeType(), "time-micros": TimeType(), "uuid": StringType()}


def value_schema(avro_text: str, name: str) -> Translation:
    """The table schema of values of this Avro record schema and their decoder (fastavro's, of its parsed schema)."""
    try:
        parsed = fastavro.parse_schema(json.loads(avro_text))
    except Exception as exc:
        raise Untranslatable(f"the schema does not parse: {exc}") from None
    if not isinstance(parsed, dict) or parsed.get("type") != "record":
        raise Untranslatable("the schema is not an Avro record")
    ids = itertools.count(1)
    fields = [_field(ids, field["name"], field["type"]) for field in parsed["fields"]]
    return Translation(table_schema(ids, fields), functools.partial(decode, parsed), name)


def decode(parsed: Any, payload: bytes) -> dict:
    try:
        return fastavro.schemaless_reader(io.BytesIO(payload), parsed, parsed)
    except Exception as exc:
        raise Untranslatable(f"does not decode with its schema: {exc!r}") from None


def _field(ids, name: str, avro: Any) -> NestedField:
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
