"""confluent-kafka's Avro, JSON Schema and Protobuf serializers and deserializers end to end: records produced to a
real broker framed with ids our registry gave, read back and decoded with the schemas it returns; an evolution the
subject's level refuses stops the producer's serializer."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.error import SchemaRegistryError
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from odradek.registry.schemas import parse


def round_trip(bootstrap: str, topic: str, serializer, deserializer, values: list) -> list:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, serializer(value, SerializationContext(topic, MessageField.VALUE)))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic])
    got = []
    try:
        while len(got) < len(values):
            message = consumer.poll(10)
            assert message is not None, "records did not come back"
            assert message.error() is None
            assert message.value()[0] == 0  # Confluent's framing: magic byte, then the 4-byte schema id
            got.append(deserializer(message.value(), SerializationContext(topic, MessageField.VALUE)))
    finally:
        consumer.close()
    return got


def test_avro_round_trip_and_refused_evolution(broker, client, topic_name):
    schema = json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
    values = [{"id": 1, "item": "tea"}, {"id": 2, "item": "cake"}]
    got = round_trip(broker.bootstrap_servers, topic_name, AvroSerializer(client, schema),
                     AvroDeserializer(client), values)
    assert got == values
    assert client.get_latest_version(f"{topic_name}-value").version == 1
    evolved = json.dumps({"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "item", "type": "string"}, {"name": "qty", "type": "int"}]})
    with pytest.raises(SchemaRegistryError) as refused:
        AvroSerializer(client, evolved)({"id": 3, "item": "x", "qty": 1},
                                        SerializationContext(topic_name, MessageField.VALUE))
    assert refused.value.http_status_code == 409


def test_json_schema_round_trip(broker, client, topic_name):
    schema = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Reading",
                         "type": "object", "properties": {"sensor": {"type": "string"}, "value": {"type": "number"}},
                         "required": ["sensor"]})
    values = [{"sensor": "s1", "value": 1.5}, {"sensor": "s2", "value": -3}]
    got = round_trip(broker.bootstrap_servers, topic_name, JSONSerializer(schema, client),
                     JSONDeserializer(schema, schema_registry_client=client), values)
    assert got == values


def test_protobuf_round_trip(broker, client, topic_name):
    proto = descriptor_pb2.FileDescriptorProto()
    proto.CopyFrom(parse("PROTOBUF", 'syntax = "proto3";\npackage shop;\nimport "google/protobuf/timestamp.proto";\n'
                              "message Basket {\n  string owner = 1;\n  repeated string items = 2;\n"
                              "  google.protobuf.Timestamp at = 3;\n}\n").parsed)
    proto.name = f"basket_{uuid.uuid4().hex[:6]}.proto"
    pool = descriptor_pool.Default()
    pool.Add(proto)
    basket = GetMessageClass(pool.FindMessageTypeByName("shop.Basket"))
    values = [basket(owner="ann", items=["a", "b"]), basket(owner="bob")]
    values[0].at.FromSeconds(1_700_000_000)
    got = round_trip(broker.bootstrap_servers, topic_name,
                     ProtobufSerializer(basket, client, {"use.deprecated.format": False}),
                     ProtobufDeserializer(basket, {"use.deprecated.format": False}, client), values)
    assert got == values
    registered = client.get_latest_version(f"{topic_name}-value")  # stored as .proto text, as Confluent does
    assert registered.schema.schema_type == "PROTOBUF" and registered.version == 1
    assert "message Basket {\n  string owner = 1;\n  repeated string items = 2;\n" \
        "  .google.protobuf.Timestamp at = 3;\n}" in registered.schema.schema_str
