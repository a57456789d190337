"""The console's Schemas pages over the registry's REST API: the subjects with their latest version, a subject's
versions with the diff between two of them, and a compatibility test of a pasted schema, refused with the
registry's reason; and messages decoded with their writer's schema (Avro, JSON Schema, Protobuf)."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest
from confluent_kafka.schema_registry import Schema
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from odradek.console import Console, ConsoleSettings
from odradek.registry.schemas import parse


def avro(*fields: dict) -> str:
    return json.dumps({"type": "record", "name": "Shipment", "fields": list(fields)})


@pytest.fixture(scope="module")
def console(broker, registry):
    served = Console(ConsoleSettings(broker.bootstrap_servers, port=0, schema_registry_url=registry.url))
    url = served.start_thread()
    with httpx.Client(base_url=url, timeout=30) as http:
        yield http
    served.stop()


def test_subjects_versions_diff_and_compatibility(console, client, subject):
    first = {"name": "id", "type": "long"}
    client.register_schema(subject, Schema(avro(first), "AVRO"))
    client.register_schema(subject, Schema(avro(first, {"name": "weight", "type": "double", "default": 0.0}),
                                           "AVRO"))
    listing = console.get("/schemas")
    assert listing.status_code == 200 and f'data-subject="{subject}"' in listing.text
    assert '<a href="/schemas">Schemas</a>' in listing.text
    page = console.get(f"/schemas/{subject}")
    assert page.status_code == 200 and 'data-version="2"' in page.text
    assert 'class="added">+    {' in page.text and '&#34;weight&#34;' in page.text  # the diff of 1 -> 2
    assert 'id="compatibility">BACKWARD<' in page.text
    same = console.get(f"/schemas/{subject}", params={"from": 2, "to": 2})
    assert "(the same schema)" in same.text
    refused = console.post(f"/schemas/{subject}/check",
                           data={"schema_type": "AVRO", "schema": avro(first, {"name": "to", "type": "string"})})
    assert "Not compatible" in refused.text and "READER_FIELD_MISSING_DEFAULT_VALUE" in refused.text
    accepted = console.post(f"/schemas/{subject}/check", data={"schema_type": "AVRO", "schema": avro(first)})
    assert 'id="verdict" class="notice">Compatible.' in accepted.text
    missing = console.get("/schemas/no-such-subject")
    assert missing.status_code == 404 and "Subject &#39;no-such-subject&#39; not found." in missing.text


def test_messages_decoded_with_their_writers_schema(console, broker, client, topic_name):
    from confluent_kafka import Producer
    from confluent_kafka.schema_registry.avro import AvroSerializer
    from confluent_kafka.schema_registry.json_schema import JSONSerializer
    from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
    from confluent_kafka.serialization import MessageField, SerializationContext

    context = SerializationContext(topic_name, MessageField.VALUE)
    avro_value = AvroSerializer(client, avro({"name": "id", "type": "long"}, {"name": "to", "type": "string"}))(
        {"id": 7, "to": "Zürich"}, context)
    json_schema = json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}})
    json_value = JSONSerializer(json_schema, client, conf={"auto.register.schemas": True,
                                                           "subject.name.strategy": lambda ctx, name: "json-x"})(
        {"n": 3}, context)
    proto = descriptor_pb2.FileDescriptorProto()
    proto.CopyFrom(parse("PROTOBUF", 'syntax = "proto3";\npackage ship;\nmessage Leg {\n  string port = 1;\n'
                                     '  message Stop { int32 hours = 1; }\n  repeated Stop stops = 2;\n}\n').parsed)
    proto.name = f"leg_{uuid.uuid4().hex[:6]}.proto"
    descriptor_pool.Default().Add(proto)
    leg = GetMessageClass(descriptor_pool.Default().FindMessageTypeByName("ship.Leg"))
    proto_value = ProtobufSerializer(leg, client, {"use.deprecated.format": False,
                                                   "subject.name.strategy": lambda ctx, name: "proto-x"})(
        leg(port="Basel", stops=[leg.Stop(hours=5)]), context)
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    for value in (avro_value, json_value, proto_value, b"\x00\x00\x0f\x42\x3fnot registered", b"plain text"):
        producer.produce(topic_name, value, partition=0)
    assert producer.flush(30) == 0
    page = console.get(f"/topics/{topic_name}/messages", params={"format": "schema", "order": "oldest"})
    assert page.status_code == 200 and '<option selected>schema</option>' in page.text
    assert "&#34;id&#34;: 7,\n  &#34;to&#34;: &#34;Zürich&#34;" in page.text  # Avro, decoded with its schema
    assert "&#34;n&#34;: 3" in page.text  # JSON Schema's framed JSON
    assert "&#34;port&#34;: &#34;Basel&#34;,\n  &#34;stops&#34;: [\n    {\n      &#34;hours&#34;: 5" in page.text
    assert "not registered" in page.text and "plain text" in page.text  # shown as text: no schema to decode with
    assert "\\u0000" not in page.text
