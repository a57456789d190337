"""The schema modes against a real broker and a schema registry beside it (odradek.registry, in this process):
Avro values framed by a schema id become typed columns, a compatible new version adds a column (the older rows
hold null in it), records that cannot be translated go to `<topic>~dlq` with the reason while the topic's other
records keep flowing, and value_schema_latest decodes unframed values with the subject's latest version."""

from __future__ import annotations

import io
import json

import fastavro
import httpx
import pytest
from google.protobuf import descriptor_pool, timestamp_pb2
from google.protobuf.message_factory import GetMessageClass
from pyiceberg.types import ListType, StructType
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.embedded import BrokerProcess
from odradek.registry import schemas as registry_schemas
from tests.http_services import registry  # noqa: F401 (a fixture: the registry beside the module's broker)

from .conftest import alter, create_topic, produce, rows, table_of, wait_committed, wait_spec

V1 = {"type": "record", "name": "Order", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": ["null", "string"], "default": None},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}]}
V2 = {**V1, "fields": [*V1["fields"], {"name": "qty", "type": ["null", "int"], "default": None}]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("iceberg-schemas") / "data",
                            settings={"iceberg.commit.interval.ms": 100})
    process.start()
    yield process
    process.stop()


def serializer(registry, schema: dict) -> AvroSerializer:
    return AvroSerializer(SchemaRegistryClient({"url": registry.url}), json.dumps(schema))


def framed(serialize: AvroSerializer, topic: str, value: dict) -> bytes:
    return serialize(value, SerializationContext(topic, MessageField.VALUE))


def test_framed_values_become_columns_and_evolve(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    first = [framed(serializer(registry, V1), topic_name, {"id": i, "item": f"i{i}", "tags": ["a"], "at": 1000 * i})
             for i in range(3)]
    produce(broker, topic_name, [(0, b"k", value, None) for value in first])
    wait_committed(broker.data_dir, topic_name, {0: 3})
    second = [framed(serializer(registry, V2), topic_name, {"id": 10, "item": None, "tags": [], "at": 5, "qty": 7})]
    produce(broker, topic_name, [(0, None, value, [("h", b"1")]) for value in second]
            + [(0, None, b"not framed", None), (0, None, b"\0\0\0\x7f\xff{}", None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 6})

    written = rows(table)
    assert [(row["id"], row["item"], row["tags"], row["qty"]) for row in written] == \
        [(0, "i0", ["a"], None), (1, "i1", ["a"], None), (2, "i2", ["a"], None), (10, None, [], 7)]
    assert [row["kafka"]["offset"] for row in written] == [0, 1, 2, 3]
    assert written[0]["kafka"]["key"] == b"k" and written[3]["kafka"]["headers"] == [{"key": "h", "value": b"1"}]
    assert [row["kafka"]["value"] for row in written] == first + second  # the value's bytes, frame and all
    assert written[1]["at"].timestamp() == 1.0
    assert [field.name for field in table.schema().fields] == ["kafka", "id", "item", "tags", "at", "qty"]

    dead = rows(table_of(broker.data_dir, topic_name + "~dlq"))
    assert [(row["offset"], row["value"]) for row in dead] == [(4, b"not framed"), (5, b"\0\0\0\x7f\xff{}")]
    assert "magic byte 0" in dead[0]["reason"] and "schema id 32767 is not in the schema registry" in dead[1]["reason"]


def test_an_incompatible_version_goes_to_the_dead_letters(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    changed = {**V1, "fields": [{"name": "id", "type": "string"}]}
    httpx.put(f"{registry.url}/config/{topic_name}-value", json={"compatibility": "NONE"}).raise_for_status()
    values = [framed(serializer(registry, V1), topic_name, {"id": 1, "tags": [], "at": 0}),
              framed(serializer(registry, changed), topic_name, {"id": "one"}),
              framed(serializer(registry, V1), topic_name, {"id": 2, "tags": [], "at": 0})]
    produce(broker, topic_name, [(0, None, value, None) for value in values])
    table = wait_committed(broker.data_dir, topic_name, {0: 3})
    assert [row["id"] for row in rows(table)] == [1, 2]
    [dead] = rows(table_of(broker.data_dir, topic_name + "~dlq"))
    assert dead["offset"] == 1 and "does not evolve the table" in dead["reason"]


def test_latest_schema_decodes_plain_avro(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_latest"})
    client = SchemaRegistryClient({"url": registry.url})
    client.register_schema(f"{topic_name}-value", Schema(json.dumps(V2), "AVRO"))
    parsed = fastavro.parse_schema(V2)

    def plain(value: dict) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, value)
        return out.getvalue()

    produce(broker, topic_name, [(0, None, plain({"id": i, "item": None, "tags": [], "at": 0, "qty": i}), None)
                                 for i in range(3)] + [(0, None, None, None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 4})
    assert [(row["id"], row["qty"]) for row in rows(table)] == [(0, 0), (1, 1), (2, 2)]
    [dead] = rows(table_of(broker.data_dir, topic_name + "~dlq"))
    assert dead["offset"] == 3 and "tombstone" in dead["reason"]


# ---- JSON Schema and Protobuf values (odradek/iceberg/json_schema.py, protobuf.py) ----

ORDER_JSON = {"type": "object", "properties": {
    "id": {"type": "integer"}, "item": {"type": ["string", "null"]}, "price": {"type": "number"},
    "paid": {"type": "boolean"}, "to": {"type": "object", "properties": {"city": {"type": "string"}}},
    "tags": {"type": "array", "items": {"type": "string"}}}, "required": ["id"]}
ORDER_PROTO = """syntax = "proto3";
import "google/protobuf/timestamp.proto";
message Order {
  int64 id = 1;
  string item = 2;
  repeated string tags = 3;
  Kind kind = 4;
  google.protobuf.Timestamp at = 5;
  Address to = 6;
  %s
  message Address { string city = 1; }
  enum Kind { PICKUP = 0; DELIVERY = 1; }
}
"""


def json_serializer(registry, schema: dict) -> JSONSerializer:
    return JSONSerializer(json.dumps(schema), SchemaRegistryClient({"url": registry.url}))


def order_class(extra_field: str):
    """The message class of ORDER_PROTO with one more field, compiled by protoc as the registry compiles it."""
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(registry_schemas.parse("PROTOBUF", ORDER_PROTO % extra_field).parsed)
    return GetMessageClass(pool.FindMessageTypeByName("Order"))


def columns(table) -> dict:
    """The value's columns of a table and their types, structs as dicts and lists as lists of their element's."""
    def shape(field_type):
        if isinstance(field_type, StructType):
            return {field.name: shape(field.field_type) for field in field_type.fields}
        if isinstance(field_type, ListType):
            return [shape(field_type.element_type)]
        return str(field_type)
    return {name: kind for name, kind in shape(table.schema().as_struct()).items() if name != "kafka"}


def test_json_schema_values_become_columns_and_evolve(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    httpx.put(f"{registry.url}/config/{topic_name}-value", json={"compatibility": "NONE"}).raise_for_status()
    v2 = {**ORDER_JSON, "properties": {**ORDER_JSON["properties"], "qty": {"type": "integer"}}}
    first = framed(json_serializer(registry, ORDER_JSON), topic_name,
                   {"id": 1, "item": None, "price": 2.5, "paid": True, "to": {"city": "Oslo", "zip": "0150"},
                    "tags": ["a", "b"], "note": "not a column"})
    second = framed(json_serializer(registry, v2), topic_name, {"id": 2, "item": "pen", "qty": 3})
    invalid = first[:5] + b'{"item": "no id"}'  # framed by the first schema's id, not valid for it
    produce(broker, topic_name, [(0, b"k", first, None), (0, None, second, None), (0, None, invalid, None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 3})

    assert [{key: value for key, value in row.items() if key != "kafka"} for row in rows(table)] == [
        {"id": 1, "item": None, "price": 2.5, "paid": True, "to": {"city": "Oslo"}, "tags": ["a", "b"], "qty": None},
        {"id": 2, "item": "pen", "price": None, "paid": None, "to": None, "tags": None, "qty": 3}]
    assert columns(table) == {"id": "long", "item": "string", "price": "double", "paid": "boolean",
                              "to": {"city": "string"}, "tags": ["string"], "qty": "long"}
    [dead] = rows(table_of(broker.data_dir, topic_name + "~dlq"))
    assert dead["offset"] == 2 and dead["value"] == invalid
    assert "not valid for its JSON schema" in dead["reason"] and "'id' is a required property" in dead["reason"]


def test_protobuf_values_become_columns_and_evolve(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    httpx.put(f"{registry.url}/config/{topic_name}-value", json={"compatibility": "NONE"}).raise_for_status()
    client = SchemaRegistryClient({"url": registry.url})
    values = []
    # the first version, a compatible second (a field added), an incompatible third (qty's type changed)
    for extra, fields in (("optional int32 qty = 7;", {"qty": 4}),
                          ("optional int32 qty = 7;\n  string note = 8;", {"note": "late"}),
                          ("string qty = 7;", {"qty": "four"})):
        message_class = order_class(extra)
        message = message_class(id=2 ** 40, item="pen", tags=["a"], kind=1, to={"city": "Oslo"}, **fields)
        message.at.FromMilliseconds(1_700_000_000_000)
        values.append(framed(ProtobufSerializer(message_class, client, {"use.deprecated.format": False}),
                             topic_name, message))
    produce(broker, topic_name, [(0, None, value, None) for value in values])
    table = wait_committed(broker.data_dir, topic_name, {0: 3})

    written = rows(table)
    assert [(row["id"], row["item"], row["tags"], row["kind"], row["to"], row["qty"], row["note"])
            for row in written] == [(2 ** 40, "pen", ["a"], "DELIVERY", {"city": "Oslo"}, 4, None),
                                    (2 ** 40, "pen", ["a"], "DELIVERY", {"city": "Oslo"}, None, "late")]
    assert written[0]["at"].timestamp() == 1_700_000_000
    assert columns(table) == {"id": "long", "item": "string", "tags": ["string"], "kind": "string",
                              "at": "timestamptz", "to": {"city": "string"}, "qty": "int", "note": "string"}
    [dead] = rows(table_of(broker.data_dir, topic_name + "~dlq"))
    assert dead["offset"] == 2 and "does not evolve the table" in dead["reason"]


def test_protobuf_message_indexes_pick_the_message(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    pool = descriptor_pool.DescriptorPool()
    pool.Add(registry_schemas.parse("PROTOBUF", 'syntax = "proto3";\nmessage Order { int64 id = 1; }\n'
                                    'message Refund { string reason = 1; map<string, int32> lines = 2; }\n').parsed)
    refund_class = GetMessageClass(pool.FindMessageTypeByName("Refund"))
    serialize = ProtobufSerializer(refund_class, SchemaRegistryClient({"url": registry.url}),
                                   {"use.deprecated.format": False})
    value = framed(serialize, topic_name, refund_class(reason="late", lines={"pen": 2}))
    assert value[5:7] == b"\x02\x02"  # the message indexes: one, 1 (zigzag)
    produce(broker, topic_name, [(0, None, value, None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 1})
    assert [(row["reason"], row["lines"]) for row in rows(table)] == [("late", [("pen", 2)])]
    assert "id" not in columns(table)


def test_latest_schema_decodes_plain_json(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_latest"})
    SchemaRegistryClient({"url": registry.url}).register_schema(f"{topic_name}-value",
                                                                Schema(json.dumps(ORDER_JSON), "JSON"))
    produce(broker, topic_name, [(0, None, json.dumps({"id": 7, "tags": ["x"]}).encode(), None),
                                 (0, None, b'{"id": "seven"}', None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 2})
    assert [(row["id"], row["tags"]) for row in rows(table)] == [(7, ["x"])]
    [dead] = rows(table_of(broker.data_dir, topic_name + "~dlq"))
    assert dead["offset"] == 1 and "'seven' is not of type 'integer'" in dead["reason"]


# ---- keys as typed columns (kafka.key_fields) and schema contexts ----

KEY_V1 = {"type": "record", "name": "OrderKey", "fields": [{"name": "shop", "type": "string"},
                                                           {"name": "n", "type": "long"}]}
KEY_V2 = {**KEY_V1, "fields": [*KEY_V1["fields"], {"name": "region", "type": ["null", "string"], "default": None}]}


def framed_key(registry, schema: dict, topic: str, key: dict) -> bytes:
    return serializer(registry, schema)(key, SerializationContext(topic, MessageField.KEY))


def key_columns(table) -> dict:
    [kafka] = [field for field in table.schema().fields if field.name == "kafka"]
    [key_fields] = [field for field in kafka.field_type.fields if field.name == "key_fields"]
    return {field.name: str(field.field_type) for field in key_fields.field_type.fields}


def test_framed_keys_become_key_fields_and_evolve(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    value = framed(serializer(registry, V1), topic_name, {"id": 1, "item": None, "tags": [], "at": 0})
    first = [framed_key(registry, KEY_V1, topic_name, {"shop": "oslo", "n": i}) for i in range(2)]
    produce(broker, topic_name, [(0, key, value, None) for key in first])
    table = wait_committed(broker.data_dir, topic_name, {0: 2})
    assert key_columns(table) == {"shop": "string", "n": "long"}

    evolved = framed_key(registry, KEY_V2, topic_name, {"shop": "bergen", "n": 2, "region": "west"})
    unknown = b"\0\0\0\x7f\xfe" + first[0][5:]
    produce(broker, topic_name, [(0, evolved, value, None), (0, None, value, None), (0, b"plain", value, None),
                                 (0, unknown, value, None), (0, first[0][:5] + b"\xff", value, None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 7})

    written = rows(table)
    assert [(row["kafka"]["offset"], row["kafka"]["key_fields"]) for row in written] == [
        (0, {"shop": "oslo", "n": 0, "region": None}), (1, {"shop": "oslo", "n": 1, "region": None}),
        (2, {"shop": "bergen", "n": 2, "region": "west"}), (3, None)]
    assert written[2]["kafka"]["key"] == evolved and written[0]["id"] == 1  # the key's bytes stay beside
    assert key_columns(table) == {"shop": "string", "n": "long", "region": "string"}
    dead = rows(table_of(broker.data_dir, topic_name + "~dlq"))
    assert [(row["offset"], row["key"]) for row in dead] == [(4, b"plain"), (5, unknown), (6, first[0][:5] + b"\xff")]
    assert "the key does not start with magic byte 0" in dead[0]["reason"]
    assert "the key's schema id 32766 is not in the schema registry" in dead[1]["reason"]
    assert dead[2]["reason"].startswith("the key does not decode with its schema")
    assert sorted([row["kafka"]["offset"] for row in written] + [row["offset"] for row in dead]) == list(range(7))


def test_keys_stay_bytes_without_a_key_subject(broker, registry, topic_name):
    """A raw key that looks framed (a big-endian long starts with byte 0) is not taken for one: the topic has no
    <topic>-key subject."""
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    value = framed(serializer(registry, V1), topic_name, {"id": 1, "item": None, "tags": [], "at": 0})
    long_key = (2 ** 40).to_bytes(8, "big")
    produce(broker, topic_name, [(0, long_key, value, None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 1})
    [row] = rows(table)
    assert row["kafka"]["key"] == long_key and "key_fields" not in row["kafka"]


def test_latest_schema_types_json_keys(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_latest"})
    client = SchemaRegistryClient({"url": registry.url})
    client.register_schema(f"{topic_name}-value", Schema(json.dumps(ORDER_JSON), "JSON"))
    key_schema = {"type": "object", "properties": {"user": {"type": "string"}, "since": {"type": "integer"}},
                  "required": ["user"]}
    client.register_schema(f"{topic_name}-key", Schema(json.dumps(key_schema), "JSON"))
    produce(broker, topic_name, [(0, b'{"user": "ann", "since": 2020}', b'{"id": 1}', None),
                                 (0, None, b'{"id": 2}', None),
                                 (0, b"ann", b'{"id": 3}', None), (0, b'{"since": 1}', b'{"id": 4}', None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 4})
    assert [(row["id"], row["kafka"]["key_fields"]) for row in rows(table)] == [
        (1, {"user": "ann", "since": 2020}), (2, None)]
    dead = rows(table_of(broker.data_dir, topic_name + "~dlq"))
    assert [row["offset"] for row in dead] == [2, 3]
    assert dead[0]["reason"].startswith("the key is not JSON")
    assert "the key is not valid for its JSON schema" in dead[1]["reason"] and "'user'" in dead[1]["reason"]


def test_framed_id_resolves_in_the_subjects_context(broker, registry, topic_name):
    """An id the default context lacks is looked up where `:.ctx:<topic>-value` has it, as a deserializer's
    GET /schemas/ids/{id}?subject=<topic>-value finds it."""
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    subject = f":.ctx{topic_name.replace('-', '')}:{topic_name}-value"
    httpx.put(f"{registry.url}/mode/{subject}", json={"mode": "IMPORT"}).raise_for_status()
    schema_id = 2 ** 30 + 7
    httpx.post(f"{registry.url}/subjects/{subject}/versions",
               json={"schema": json.dumps(V2), "id": schema_id, "version": 1}).raise_for_status()
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(V2), {"id": 5, "item": "cup", "tags": [], "at": 0,
                                                                "qty": 9})
    produce(broker, topic_name, [(0, None, b"\0" + schema_id.to_bytes(4, "big") + out.getvalue(), None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 1})
    assert [(row["id"], row["item"], row["qty"]) for row in rows(table)] == [(5, "cup", 9)]


def test_a_spec_change_evolves_the_table_and_its_dead_letters(broker, registry, topic_name):
    """In a schema mode the spec's columns are the `kafka` struct's: both tables take the new spec."""
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    value = framed(serializer(registry, V1), topic_name, {"id": 1, "item": None, "tags": [], "at": 0})
    produce(broker, topic_name, [(0, None, value, None), (0, None, b"not framed", None)])
    wait_committed(broker.data_dir, topic_name, {0: 2})
    alter(broker, topic_name, **{"odradek.iceberg.partition.spec": "identity(partition), truncate(100, offset)"})
    wait_spec(broker, topic_name, ["partition", "offset_trunc_100"])
    produce(broker, topic_name, [(0, None, value, None), (0, None, b"not framed", None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 4})
    dlq = wait_spec(broker, topic_name + "~dlq", ["partition", "offset_trunc_100"])

    for written in (table, dlq):
        spec_ids = sorted(task.file.spec_id for task in written.scan().plan_files())
        assert spec_ids == [0, 1], (written.name(), spec_ids)
        assert [field.name for field in written.specs()[0].fields] == ["timestamp_hour"]
    assert [row["kafka"]["offset"] for row in rows(table)] == [0, 2]
    assert [row["offset"] for row in rows(dlq)] == [1, 3]


def test_protobuf_keys_become_key_fields(broker, registry, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    pool = descriptor_pool.DescriptorPool()
    pool.Add(registry_schemas.parse("PROTOBUF", 'syntax = "proto3";\nmessage Other { bool x = 1; }\n'
                                    'message ShopKey { string shop = 1; int32 till = 2; }\n').parsed)
    key_class = GetMessageClass(pool.FindMessageTypeByName("ShopKey"))
    serialize = ProtobufSerializer(key_class, SchemaRegistryClient({"url": registry.url}),
                                   {"use.deprecated.format": False})
    key = serialize(key_class(shop="oslo", till=3), SerializationContext(topic_name, MessageField.KEY))
    value = framed(serializer(registry, V1), topic_name, {"id": 1, "item": None, "tags": [], "at": 0})
    produce(broker, topic_name, [(0, key, value, None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 1})
    [row] = rows(table)
    assert row["kafka"]["key_fields"] == {"shop": "oslo", "till": 3} and row["id"] == 1
    assert key_columns(table) == {"shop": "string", "till": "int"}
