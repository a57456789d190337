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
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.embedded import BrokerProcess
from odradek.registry import SchemaRegistry, SchemaRegistrySettings

from .conftest import create_topic, produce, rows, table_of, wait_committed

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


@pytest.fixture(scope="module")
def registry(broker):
    running = SchemaRegistry(SchemaRegistrySettings(broker.bootstrap_servers, port=0))
    running.start_thread()
    yield running
    running.stop()


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
