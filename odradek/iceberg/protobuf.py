"""Protobuf values as typed Iceberg columns (the schema modes, as avro.py for Avro): one message of a .proto schema
from the schema registry (compiled by odradek.registry.schemas with protoc, its references resolved) as Iceberg
fields, and a value parsed with protobuf's message class of it. Which message: the message indexes of Confluent's
framing after the schema id (a zigzag varint count, then each index, a path through nested messages; count 0: the
first message), read by odradek.registry.framing; in value_schema_latest (no frame) the first message. Plain code;
what cannot be translated raises Untranslatable.

Types: bool, int32/sint32/sfixed32 (int), int64/sint64/sfixed64, uint32, fixed32, uint64, fixed64 (long; a uint64
past 2^63 does not fit its column), float, double, string, bytes (binary), enum (string: the value's name, its
number if it has none), message (struct), google.protobuf.Timestamp (timestamptz), repeated (list), map (map).
A recursive message has no column type. Every column is optional, as for Avro; a field proto3 gives no presence
(a plain scalar) holds its default when unset, one with presence (a message, `optional`, a oneof member) null.
"""

from __future__ import annotations

import datetime
import importlib
import io
import itertools

from google.protobuf import descriptor_pool, message
from google.protobuf.descriptor import FieldDescriptor as F
from google.protobuf.message_factory import GetMessageClass
from pyiceberg.types import (BinaryType, BooleanType, DoubleType, FloatType, IcebergType, IntegerType, ListType,
                             LongType, MapType, NestedField, StringType, StructType, TimestamptzType)

from odradek.iceberg.columns import Translation, Untranslatable, table_schema
from odradek.registry import framing

TIMESTAMP = "google.protobuf.Timestamp"
_SCALARS = {F.TYPE_BOOL: BooleanType(), F.TYPE_INT32: IntegerType(), F.TYPE_SINT32: IntegerType(),
            F.TYPE_SFIXED32: IntegerType(), F.TYPE_INT64: LongType(), F.TYPE_SINT64: LongType(),
            F.TYPE_SFIXED64: LongType(), F.TYPE_UINT32: LongType(), F.TYPE_FIXED32: LongType(),
            F.TYPE_UINT64: LongType(), F.TYPE_FIXED64: LongType(), F.TYPE_FLOAT: FloatType(),
            F.TYPE_DOUBLE: DoubleType(), F.TYPE_STRING: StringType(), F.TYPE_BYTES: BinaryType(),
            F.TYPE_ENUM: StringType()}


def message_indexes(payload: bytes) -> tuple[tuple[int, ...], bytes]:
    """(message indexes, the message's bytes) of what follows the schema id in Confluent's Protobuf framing."""
    stream = io.BytesIO(payload)
    try:
        indexes = tuple(framing.message_indexes(stream))
    except framing.Undecodable as exc:
        raise Untranslatable(f"has bad message indexes: {exc}") from None
    return indexes, stream.read()


def value_schema(parsed, indexes: tuple[int, ...], name: str) -> Translation:
    """The table schema of the message at `indexes` of this schema (odradek.registry.schemas' ParsedSchema) and
    the decoder of its values."""
    pool = descriptor_pool.DescriptorPool()
    added = set()
    try:
        for proto in [*parsed.files.values(), parsed.parsed]:
            for dependency in proto.dependency:  # the well-known types a serializer does not register as references
                if dependency not in added and dependency not in parsed.files and dependency.startswith("google/"):
                    pool.AddSerializedFile(_well_known(dependency).serialized_pb)
                    added.add(dependency)
            pool.Add(proto)
        messages = pool.FindFileByName(parsed.parsed.name).message_types_by_name
    except (TypeError, KeyError) as exc:  # a reference that conflicts with another file, or is missing
        raise Untranslatable(f"the schema's files do not load: {exc}") from None
    file_messages = [messages[item.name] for item in parsed.parsed.message_type]
    try:
        descriptor = file_messages[indexes[0]]
        for index in indexes[1:]:
            descriptor = descriptor.nested_types[index]
    except IndexError:
        raise Untranslatable(f"the schema has no message at indexes {list(indexes)}") from None
    ids = itertools.count(1)
    fields = [_field(ids, field, (descriptor.full_name,)) for field in descriptor.fields]
    message_class = GetMessageClass(descriptor)

    def decode(payload: bytes) -> dict:
        value = message_class()
        try:
            value.ParseFromString(payload)
            return _row(value)
        except (message.DecodeError, ValueError, OverflowError) as exc:  # bad bytes; a Timestamp out of range
            raise Untranslatable(f"does not parse as {descriptor.full_name}: {exc}") from None

    return Translation(table_schema(ids, fields), decode, name)


def _well_known(name: str):
    """The descriptor of a google/protobuf/*.proto file, from the module protobuf generated of it."""
    try:
        return importlib.import_module(name.removesuffix(".proto").replace("/", ".") + "_pb2").DESCRIPTOR
    except ImportError:
        raise Untranslatable(f"the schema imports {name}, which protobuf does not ship") from None


def _is_map(field) -> bool:
    return field.type == F.TYPE_MESSAGE and field.message_type.GetOptions().map_entry


def _field(ids, field, path: tuple[str, ...]) -> NestedField:
    field_id = next(ids)
    if _is_map(field):
        key_id, value_id = next(ids), next(ids)
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        field_type = MapType(key_id, _type(ids, key, path), value_id, _type(ids, value, path), value_required=False)
    elif field.is_repeated:
        element_id = next(ids)
        field_type = ListType(element_id, _type(ids, field, path), element_required=False)
    else:
        field_type = _type(ids, field, path)
    return NestedField(field_id, field.name, field_type, required=False)


def _type(ids, field, path: tuple[str, ...]) -> IcebergType:
    if field.type in _SCALARS:
        return _SCALARS[field.type]
    if field.type == F.TYPE_MESSAGE:
        nested = field.message_type
        if nested.full_name == TIMESTAMP:
            return TimestamptzType()
        if nested.full_name in path:
            raise Untranslatable(f"field {field.name}: the message {nested.full_name} is recursive: no column type")
        return StructType(*(_field(ids, sub, (*path, nested.full_name)) for sub in nested.fields))
    raise Untranslatable(f"field {field.name}: a group has no column type")


def _row(value) -> dict:
    row = {}
    for field in value.DESCRIPTOR.fields:
        got = getattr(value, field.name)
        if _is_map(field):
            value_field = field.message_type.fields_by_name["value"]
            row[field.name] = [(key, _scalar(value_field, item)) for key, item in got.items()]
        elif field.is_repeated:
            row[field.name] = [_scalar(field, item) for item in got]
        elif field.has_presence and not value.HasField(field.name):
            row[field.name] = None
        else:
            row[field.name] = _scalar(field, got)
    return row


def _scalar(field, got):
    if field.type == F.TYPE_ENUM:
        named = field.enum_type.values_by_number.get(got)
        return named.name if named is not None else str(got)
    if field.type == F.TYPE_MESSAGE:
        if field.message_type.full_name == TIMESTAMP:
            return got.ToDatetime(tzinfo=datetime.timezone.utc)
        return _row(got)
    return got
