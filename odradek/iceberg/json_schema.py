"""JSON Schema values as typed Iceberg columns (the schema modes, as avro.py for Avro): an object schema from the
schema registry (parsed by odradek.registry.schemas, its references resolved) as Iceberg fields, and a value (UTF-8
JSON after the registry's frame) decoded with json, validated by the schema (jsonschema, the schema's draft or
draft 7) and projected onto the columns. Plain code; what cannot be translated raises Untranslatable.

Types (`type`, or `type: [T, "null"]`, which is T): string, integer (long), number (double), boolean, object with
`properties` (struct), object with a schema as `additionalProperties` and no `properties` (map of string), array
with `items` (list). As for Avro, every column is optional whatever `required` says: `required` decides which
values are valid (a value that lacks a required property, or holds null in one whose type does not allow it, fails
validation and goes to the dead-letter table), not the column's nullability, so that a later version may make a
property optional or drop it. Other types (none, several non-null, a `$ref`, `oneOf`...) have no column type:
such a schema is untranslatable. Properties a value has beyond the schema's are not columns.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import jsonschema
import jsonschema.validators
from pyiceberg.types import (BooleanType, DoubleType, IcebergType, ListType, LongType, MapType, NestedField,
                             StringType, StructType)

from odradek.iceberg.columns import Translation, Untranslatable, table_schema

_PRIMITIVES = {"string": StringType(), "integer": LongType(), "number": DoubleType(), "boolean": BooleanType()}


def value_schema(parsed, name: str) -> Translation:
    """The table schema of values of this JSON Schema (odradek.registry.schemas' ParsedSchema) and their decoder."""
    document = parsed.parsed
    kind = _kind("the schema", document)
    if kind != "object" or "properties" not in document:
        raise Untranslatable("the schema is not an object schema with properties")
    ids = itertools.count(1)
    fields = [_field(ids, key, sub) for key, sub in document["properties"].items()]
    validator = jsonschema.validators.validator_for(document, default=jsonschema.Draft7Validator)(
        document, registry=parsed.named["registry"])

    def decode(payload: bytes) -> dict:
        try:
            value = json.loads(payload)
        except ValueError as exc:
            raise Untranslatable(f"is not JSON: {exc}") from None
        try:
            error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        except Exception as exc:  # noqa: BLE001 - the schema cannot validate (a $ref it cannot resolve...)
            raise Untranslatable(f"cannot be validated by its JSON schema: {exc}") from None
        if error is not None:
            where = "/".join(str(part) for part in error.absolute_path)
            raise Untranslatable(f"is not valid for its JSON schema{' at ' + where if where else ''}: "
                                 f"{error.message}")
        if not isinstance(value, dict):
            raise Untranslatable("is not a JSON object")
        return _project(document, value)

    return Translation(table_schema(ids, fields), decode, name)


def _kind(name: str, schema: Any) -> str:
    """The one non-null type of a (sub)schema."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    kinds = [kind] if isinstance(kind, str) else [k for k in kind if k != "null"] if isinstance(kind, list) else []
    if len(kinds) != 1:
        raise Untranslatable(f"{name}: {json.dumps(schema)[:200]} has no column type (one type, or one and null)")
    return kinds[0]


def _field(ids, name: str, schema: Any) -> NestedField:
    field_id = next(ids)
    return NestedField(field_id, name, _type(ids, name, schema), required=False)


def _type(ids, name: str, schema: Any) -> IcebergType:
    kind = _kind(f"field {name}", schema)
    if kind in _PRIMITIVES:
        return _PRIMITIVES[kind]
    if kind == "object" and "properties" in schema:
        return StructType(*(_field(ids, key, sub) for key, sub in schema["properties"].items()))
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        key_id, value_id = next(ids), next(ids)
        return MapType(key_id, StringType(), value_id, _type(ids, f"{name}.value", schema["additionalProperties"]),
                       value_required=False)
    if kind == "array" and isinstance(schema.get("items"), dict):
        element_id = next(ids)
        return ListType(element_id, _type(ids, f"{name}.element", schema["items"]), element_required=False)
    raise Untranslatable(f"field {name}: {json.dumps(schema)[:200]} has no column type")


def _project(schema: dict, value: Any) -> Any:
    """A valid value shaped as its columns: an object's declared properties only (absent ones null)."""
    if value is None:
        return None
    kind = _kind("", schema)
    if kind == "object" and "properties" in schema:
        return {key: _project(sub, value.get(key)) for key, sub in schema["properties"].items()}
    if kind == "object":
        return {key: _project(schema["additionalProperties"], item) for key, item in value.items()}
    if kind == "array":
        return [_project(schema["items"], item) for item in value]
    if kind == "integer":
        return int(value)  # JSON Schema's integer may be written 1.0
    if kind == "number":
        return float(value)
    return value
