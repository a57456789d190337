"""The compatibility rules per format, on parsed schemas (no broker): what BACKWARD and FORWARD accept and refuse,
with the error types Confluent names; and a base64 Protobuf descriptor stored as .proto text that compiles back to
the same descriptor."""

from __future__ import annotations

import base64
import json

import pytest

from odradek.registry.compatibility import check
from odradek.registry.schemas import InvalidSchema, parse, proto_text


def record(*fields, name="R", **extra) -> str:
    return json.dumps({"type": "record", "name": name, "fields": list(fields), **extra})


def errors(level: str, new: str, old: str, schema_type: str = "AVRO") -> list[str]:
    found = check(level, parse(schema_type, new), [(1, parse(schema_type, old))])
    return [entry.split("'")[1] for entry in found if entry.startswith("{errorType:")]


@pytest.mark.parametrize("old, new, backward, forward", [
    (record({"name": "a", "type": "int"}), record({"name": "a", "type": "long"}), [], ["TYPE_MISMATCH"]),
    (record({"name": "a", "type": "string"}), record({"name": "a", "type": "bytes"}), [], []),
    (record({"name": "a", "type": "int"}), record(), [], ["READER_FIELD_MISSING_DEFAULT_VALUE"]),
    (record({"name": "a", "type": "int"}), record({"name": "a", "type": ["null", "int"]}), [],
     ["TYPE_MISMATCH"]),  # the old reader cannot read the new writer's null branch
    (record({"name": "a", "type": ["null", "int", "string"]}), record({"name": "a", "type": ["null", "int"]}),
     ["MISSING_UNION_BRANCH"], []),
    (record({"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}),
     record({"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"]}}), ["MISSING_ENUM_SYMBOLS"], []),
    (record({"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A", "B"]}}),
     record({"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["A"], "default": "A"}}), [], []),
    (record({"name": "f", "type": {"type": "fixed", "name": "F", "size": 4}}),
     record({"name": "f", "type": {"type": "fixed", "name": "F", "size": 8}}), ["FIXED_SIZE_MISMATCH"],
     ["FIXED_SIZE_MISMATCH"]),
    (record(name="Old"), record(name="New"), ["NAME_MISMATCH"], ["NAME_MISMATCH"]),
    (record(name="Old"), record(name="New", aliases=["Old"]), [], ["NAME_MISMATCH"]),
    (record({"name": "a", "type": "int"}), record({"name": "b", "type": "int", "aliases": ["a"]}), [],
     ["READER_FIELD_MISSING_DEFAULT_VALUE"]),
    (record({"name": "next", "type": ["null", "R"]}), record({"name": "next", "type": ["null", "R"]}), [], []),
])
def test_avro(old, new, backward, forward):
    assert errors("BACKWARD", new, old) == backward
    assert errors("FORWARD", new, old) == forward


def obj(properties: dict, **extra) -> str:
    return json.dumps({"type": "object", "properties": properties, **extra})


@pytest.mark.parametrize("old, new, backward", [
    (obj({"a": {"type": "integer"}}), obj({"a": {"type": "number"}}), []),
    (obj({"a": {"type": "number"}}), obj({"a": {"type": "integer"}}), ["TYPE_CHANGED"]),
    (obj({"a": {"type": "string"}}), obj({"a": {"type": ["string", "null"]}}), []),
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}, "b": {"type": "string"}}),
     ["PROPERTY_ADDED_TO_OPEN_CONTENT_MODEL"]),
    (obj({"a": {"type": "string"}}, additionalProperties=False), obj({}, additionalProperties=False),
     ["PROPERTY_REMOVED_FROM_CLOSED_CONTENT_MODEL"]),
    (obj({"a": {"type": "string"}}), obj({}), []),
    (obj({"a": {"type": "string"}}), obj({"a": {"type": "string"}}, required=["a"]), ["REQUIRED_ATTRIBUTE_ADDED"]),
    (obj({"a": {"type": "string", "maxLength": 5}}), obj({"a": {"type": "string", "maxLength": 9}}), []),
    (obj({"a": {"type": "string", "maxLength": 9}}), obj({"a": {"type": "string", "maxLength": 5}}),
     ["MAX_LENGTH_DECREASED"]),
    (obj({"a": {"enum": ["x", "y"]}}), obj({"a": {"enum": ["x"]}}), ["ENUM_ARRAY_NARROWED"]),
    (obj({"a": {"enum": ["x"]}}), obj({"a": {"enum": ["x", "y"]}}), []),
    (obj({}), obj({}, additionalProperties=False), ["ADDITIONAL_PROPERTIES_REMOVED"]),
    (obj({"a": {"type": "array", "items": {"type": "integer"}}}),
     obj({"a": {"type": "array", "items": {"type": "string"}}}), ["TYPE_CHANGED"]),
    (obj({"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}), obj({"a": {"oneOf": [{"type": "string"}]}}),
     ["SUM_TYPE_NARROWED"]),
])
def test_json_schema(old, new, backward):
    assert errors("BACKWARD", new, old, "JSON") == backward


PROTO = 'syntax = "proto3";\npackage p;\nmessage M {\n  string a = 1;\n  int32 b = 2;\n  oneof o { string c = 3; }\n}\n'


@pytest.mark.parametrize("new, backward", [
    (PROTO.replace("int32 b", "int64 b"), []),
    (PROTO.replace("int32 b", "sint32 b"), ["FIELD_SCALAR_KIND_CHANGED"]),
    (PROTO.replace("string a = 1;", ""), []),  # removing a field is fine in Protobuf
    (PROTO.replace("string a", "bytes a"), []),
    (PROTO.replace("  oneof o { string c = 3; }\n", ""), ["ONEOF_FIELD_REMOVED"]),
    (PROTO.replace("string a = 1;", "M a = 1;"), ["FIELD_KIND_CHANGED"]),
    (PROTO.replace("message M", "message N"), ["MESSAGE_REMOVED"]),
    (PROTO.replace("package p", "package q"), ["PACKAGE_CHANGED", "MESSAGE_REMOVED"]),
])
def test_protobuf(new, backward):
    assert errors("BACKWARD", new, PROTO, "PROTOBUF") == backward


def test_transitive_levels_check_every_version():
    v1, v2 = record({"name": "a", "type": "int"}), record({"name": "a", "type": "int"}, {"name": "b", "type": "int",
                                                                                          "default": 0})
    v3 = record({"name": "b", "type": "int", "default": 0})  # drops a: FORWARD-incompatible with v1 and v2 alike
    previous = [(1, parse("AVRO", v1)), (2, parse("AVRO", v2))]
    assert check("BACKWARD", parse("AVRO", v3), previous) == []
    refused = check("FORWARD_TRANSITIVE", parse("AVRO", v3), previous)
    assert "{oldSchemaVersion: 2}" in refused and "{compatibility: 'FORWARD_TRANSITIVE'}" in refused


def test_base64_protobuf_is_stored_as_proto_text_that_compiles_back():
    text = ('syntax = "proto3";\npackage shop;\nimport "google/protobuf/timestamp.proto";\noption java_package = "a.b";'
            "\nmessage Basket {\n  map<string, int64> counts = 1;\n  optional int32 n = 2;\n"
            "  oneof pay { string card = 3; int64 cash = 4; }\n  enum Kind { A = 0; B = 1; }\n  Kind kind = 5;\n"
            "  message Inner { bytes b = 1; }\n  repeated Inner inner = 6;\n  google.protobuf.Timestamp at = 7;\n"
            "  reserved 20 to 30;\n  reserved \"old\";\n}\nservice S { rpc Get (Basket) returns (stream Basket); }\n")
    descriptor = parse("PROTOBUF", text).parsed
    stored = parse("PROTOBUF", base64.b64encode(descriptor.SerializeToString()).decode())
    assert stored.text == proto_text(descriptor) and "map<string, int64> counts = 1;" in stored.text
    assert parse("PROTOBUF", stored.text).parsed == descriptor
    with pytest.raises(InvalidSchema, match="Invalid PROTOBUF schema"):
        parse("PROTOBUF", text.replace("int64 cash", "int65 cash"))
