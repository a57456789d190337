"""The schema embedded formats through odradek's schema registry (served beside the module's broker): v2 records
produced in Avro, JSON Schema and Protobuf (the schema given, registered under <topic>-value, or named by id), read
back by a consumer instance of the same format and by confluent-kafka's own deserializer; v3 records with a schema,
by id and by the subject's latest; data that does not fit and schemas that do not parse get Confluent's codes."""

from __future__ import annotations

import json

import confluent_kafka
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.client import Admin
from tests.http_services import http_client, registry, served  # noqa: F401 (registry: a fixture)
from tests.restproxy.conftest import V2, proxy_on

pytestmark = pytest.mark.timeout(120)
AVRO = "application/vnd.kafka.avro.v2+json"
JSONSCHEMA = "application/vnd.kafka.jsonschema.v2+json"
PROTOBUF = "application/vnd.kafka.protobuf.v2+json"
USER = json.dumps({"type": "record", "name": "User", "fields": [{"name": "name", "type": "string"},
                                                                 {"name": "age", "type": "int"}]})
ORDER = 'syntax = "proto3"; package shop; message Order { string id = 1; int64 cents = 2; repeated string tags = 3; }'
POINT = json.dumps({"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]})


@pytest.fixture(scope="module")
def http(broker, registry):
    with served(proxy_on(broker.bootstrap_servers, schema_registry_url=registry.url)) as proxy, \
            http_client(proxy) as client:
        yield client


def read(http, group: str, topic: str, fmt: str, count: int) -> list:
    http.post(f"/consumers/{group}", headers={"Content-Type": V2}, json={"name": "r", "format": fmt,
                                                                         "auto.offset.reset": "earliest"})
    base = f"/consumers/{group}/instances/r"
    http.post(f"{base}/assignments", headers={"Content-Type": V2}, json={"partitions": [{"topic": topic,
                                                                                         "partition": 0}]})
    found = []
    for _ in range(20):
        answer = http.get(f"{base}/records", headers={"Accept": f"application/vnd.kafka.{fmt}.v2+json"})
        assert answer.status_code == 200, answer.text
        found += answer.json()
        if len(found) >= count:
            break
    http.delete(base)
    return found


def test_avro_records_are_registered_produced_and_read_back(http, broker, registry, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 1)
    answer = http.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO}, json={
        "value_schema": USER, "records": [{"value": {"name": "ada", "age": 36}}]})
    assert answer.status_code == 200, answer.text
    schema_id = answer.json()["value_schema_id"]
    client = SchemaRegistryClient({"url": registry.url})
    assert client.get_latest_version(f"{topic_name}-value").schema_id == schema_id
    answer = http.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO}, json={
        "value_schema_id": schema_id, "records": [{"value": {"name": "bob", "age": 7}}]})
    assert answer.json()["offsets"][0]["offset"] == 1
    assert [r["value"] for r in read(http, f"g-{topic_name}", topic_name, "avro", 2)] == [
        {"name": "ada", "age": 36}, {"name": "bob", "age": 7}]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "native"})
    consumer.assign([confluent_kafka.TopicPartition(topic_name, 0, 0)])
    message = consumer.poll(10)
    consumer.close()
    decoded = AvroDeserializer(client)(message.value(), SerializationContext(topic_name, MessageField.VALUE))
    assert decoded == {"name": "ada", "age": 36}
    cases = [
        (http.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO}, json={
            "value_schema": USER, "records": [{"value": {"name": "x"}}]}), 422, 42203),
        (http.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO}, json={
            "value_schema": "{not a schema", "records": [{"value": 1}]}), 422, 42205),
        (http.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO}, json={
            "records": [{"value": {"name": "x", "age": 1}}]}), 422, 42202),
        (http.post(f"/topics/{topic_name}", headers={"Content-Type": AVRO}, json={
            "value_schema_id": 99999, "records": [{"value": 1}]}), 408, 40801),
        (http.post(f"/topics/{topic_name}", headers={"Content-Type": PROTOBUF},
                   json={"value_schema": "syntax = \"proto3\";", "records": [{"value": {}}]}), 422, 42205),
    ]
    for answer, status, code in cases:
        assert (answer.status_code, answer.json()["error_code"]) == (status, code), answer.text


def test_json_schema_records_through_v2_and_v3(http, broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 1)
    answer = http.post(f"/topics/{topic_name}", headers={"Content-Type": JSONSCHEMA}, json={
        "value_schema": POINT, "records": [{"value": {"x": 1.5}}]})
    assert answer.status_code == 200, answer.text
    schema_id = answer.json()["value_schema_id"]
    cluster = http.get("/v3/clusters").json()["data"][0]["metadata"]["self"]
    path = f"{cluster}/topics/{topic_name}/records"
    by_id = http.post(path, json={"value": {"type": "JSONSCHEMA", "schema_id": schema_id, "data": {"x": 2}}})
    assert by_id.status_code == 200, by_id.text
    assert by_id.json()["value"] == {"type": "JSONSCHEMA", "size": by_id.json()["value"]["size"],
                                     "subject": f"{topic_name}-value", "schema_id": schema_id}
    latest = http.post(path, json={"value": {"type": "JSONSCHEMA", "data": {"x": 3}}})
    assert latest.json()["value"]["schema_id"] == schema_id
    unfit = http.post(path, json={"value": {"type": "JSONSCHEMA", "data": {"y": 1}}})
    assert (unfit.status_code, unfit.json()["error_code"]) == (422, 42203)
    assert [r["value"] for r in read(http, f"g-{topic_name}", topic_name, "jsonschema", 3)] == [
        {"x": 1.5}, {"x": 2}, {"x": 3}]


def test_protobuf_records_through_v2_and_v3(http, broker, registry, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 1)
    answer = http.post(f"/topics/{topic_name}", headers={"Content-Type": PROTOBUF}, json={
        "value_schema": ORDER, "records": [{"value": {"id": "o-1", "cents": "1250", "tags": ["a", "b"]}}]})
    assert answer.status_code == 200, answer.text
    schema_id = answer.json()["value_schema_id"]
    assert SchemaRegistryClient({"url": registry.url}).get_schema(schema_id).schema_type == "PROTOBUF"
    cluster = http.get("/v3/clusters").json()["data"][0]["metadata"]["self"]
    by_id = http.post(f"{cluster}/topics/{topic_name}/records", json={
        "value": {"type": "PROTOBUF", "schema_id": schema_id, "data": {"id": "o-2"}}})
    assert by_id.status_code == 200, by_id.text
    unfit = http.post(f"/topics/{topic_name}", headers={"Content-Type": PROTOBUF}, json={
        "value_schema_id": schema_id, "records": [{"value": {"no_such_field": 1}}]})
    assert (unfit.status_code, unfit.json()["error_code"]) == (422, 42203)
    assert [r["value"] for r in read(http, f"g-{topic_name}", topic_name, "protobuf", 2)] == [
        {"id": "o-1", "cents": "1250", "tags": ["a", "b"]}, {"id": "o-2"}]
