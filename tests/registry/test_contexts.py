"""Schema contexts as Confluent has them: each context (a subject named `:.ctx:name`) its own id space, ids looked up
in the context the `subject` parameter names, the `/contexts/{ctx}/...` aliases, the context's own config, all
surviving a restart (the `_schemas` records carry the qualified subject), and confluent-kafka's Avro serde with a
qualified subject name."""

from __future__ import annotations

import json
import uuid

import httpx
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.registry import SchemaRegistry, SchemaRegistrySettings
from tests.http_services import served
from tests.registry.test_store import records


def avro(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "string"}]})


def context() -> str:
    return f".c{uuid.uuid4().hex[:8]}"


def register(http, subject: str, schema: str, prefix: str = "") -> int:
    answer = http.post(f"{prefix}/subjects/{subject}/versions", json={"schema": schema})
    assert answer.status_code == 200, answer.text
    return answer.json()["id"]


def schema_of(answer: httpx.Response) -> dict:
    assert answer.status_code == 200, answer.text
    return json.loads(answer.json()["schema"])


def test_each_context_has_its_own_ids(http, subject):
    one, two = context(), context()
    assert register(http, f":{one}:{subject}", avro("A")) == 1
    assert register(http, f":{one}:{subject}-b", avro("B")) == 2
    assert register(http, f":{one}:{subject}-a", avro("A")) == 1  # the same schema in the context: its id
    assert register(http, f":{two}:{subject}", avro("B")) == 1  # the same text in another context: its own id
    default = avro(f"D{uuid.uuid4().hex[:6]}")
    default_id = register(http, subject, default)  # ids of the default context go on as they were

    assert schema_of(http.get("/schemas/ids/1", params={"subject": f":{one}:{subject}"})) == json.loads(avro("A"))
    assert schema_of(http.get("/schemas/ids/1", params={"subject": f":{two}:x"})) == json.loads(avro("B"))
    assert schema_of(http.get(f"/contexts/{one}/schemas/ids/2")) == json.loads(avro("B"))
    assert http.get(f"/contexts/{two}/schemas/ids/2").json()["error_code"] == 40403
    assert http.get(f"/contexts/{one}/schemas/ids/2", params={"fetchMaxId": "true"}).json()["maxId"] == 2
    # an unqualified subject the id is not in the default context for: the context whose subject of that name has it
    assert schema_of(http.get("/schemas/ids/2", params={"subject": f"{subject}-b"})) == json.loads(avro("B"))
    assert schema_of(http.get(f"/schemas/ids/{default_id}")) == json.loads(default)
    assert schema_of(http.get(f"/schemas/ids/{default_id}", params={"subject": subject})) == json.loads(default)

    assert http.get(f"/contexts/{one}/schemas/ids/1/subjects").json() == [f":{one}:{subject}", f":{one}:{subject}-a"]
    assert http.get("/schemas/ids/1/versions", params={"subject": f":{two}:"}).json() == [
        {"subject": f":{two}:{subject}", "version": 1}]
    assert {one, two} <= set(http.get("/contexts").json())


def test_context_paths_qualify_the_subject(http, subject):
    ctx = context()
    base = f"/contexts/{ctx}"
    assert register(http, subject, avro("A"), base) == 1
    assert register(http, "other", avro("B"), base) == 2
    assert http.get(f"{base}/subjects").json() == [f":{ctx}:other", f":{ctx}:{subject}"]
    assert http.get(f"{base}/subjects", params={"subjectPrefix": "oth"}).json() == [f":{ctx}:other"]
    assert http.get(f"/subjects/:{ctx}:{subject}/versions").json() == [1]
    assert http.get(f"{base}/subjects/{subject}/versions").json() == [1]
    latest = http.get(f"{base}/subjects/{subject}/versions/latest").json()
    assert (latest["subject"], latest["id"]) == (f":{ctx}:{subject}", 1)
    assert json.loads(http.get(f"{base}/subjects/{subject}/versions/1/schema").text) == json.loads(avro("A"))
    assert http.get(f"/subjects/{subject}/versions").json()["error_code"] == 40401  # not in the default context
    assert [v["subject"] for v in http.get(f"{base}/schemas").json()] == [f":{ctx}:other", f":{ctx}:{subject}"]
    assert http.post(f"{base}/compatibility/subjects/{subject}/versions/latest",
                     json={"schema": json.dumps({"type": "int"})}).json() == {"is_compatible": False}

    # the context's own config: between the subject's and the global one
    assert http.put(f"{base}/config", json={"compatibility": "NONE"}).json() == {"compatibility": "NONE"}
    assert http.get(f"/config/:{ctx}:").json()["compatibilityLevel"] == "NONE"
    assert register(http, subject, json.dumps({"type": "int"}), base) == 3  # BACKWARD would refuse it
    assert http.put(f"{base}/config/{subject}", json={"compatibility": "FULL"}).status_code == 200
    assert http.get(f"/config/:{ctx}:{subject}").json()["compatibilityLevel"] == "FULL"
    assert http.get("/config").json()["compatibilityLevel"] != "NONE"

    assert http.put(f"{base}/mode/{subject}", json={"mode": "READONLY"}).json() == {"mode": "READONLY"}
    assert http.get(f"/mode/:{ctx}:{subject}").json() == {"mode": "READONLY"}
    assert http.post(f"{base}/subjects/{subject}/versions", json={"schema": avro("C")}).json()["error_code"] == 42205
    assert http.delete(f"{base}/mode/{subject}").json() == {"mode": "READONLY"}
    assert http.get(f"{base}/mode", params={"defaultToGlobal": "true"}).json() == {"mode": "READWRITE"}


def test_a_restart_keeps_each_contexts_ids(broker):
    topic = f"_schemas_{uuid.uuid4().hex[:6]}"
    settings = SchemaRegistrySettings(broker.bootstrap_servers, port=0, topic=topic, group_id=topic)
    with served(SchemaRegistry(settings)) as first, httpx.Client(base_url=first.url, timeout=30) as http:
        assert [register(http, "s", avro("A")), register(http, ":.x:s", avro("B")),
                register(http, ":.x:t", avro("C"))] == [1, 1, 2]
    assert ({"keytype": "SCHEMA", "subject": ":.x:s", "version": 1, "magic": 1},
            {"subject": ":.x:s", "version": 1, "id": 1, "schema": avro("B").replace(" ", ""), "deleted": False}) \
        in records(broker.bootstrap_servers, topic)

    with served(SchemaRegistry(settings)) as again, httpx.Client(base_url=again.url, timeout=30) as http:
        assert schema_of(http.get("/schemas/ids/1")) == json.loads(avro("A"))
        assert schema_of(http.get("/contexts/.x/schemas/ids/1")) == json.loads(avro("B"))
        assert http.get("/contexts/.x/subjects").json() == [":.x:s", ":.x:t"]
        assert http.get("/contexts").json() == [".", ".x"]
        assert register(http, ":.x:u", avro("D")) == 3 and register(http, "u", avro("D")) == 2


def test_avro_serde_with_a_qualified_subject(broker, client, http, topic_name):
    ctx = context()
    register(http, f"{topic_name}-other", avro(f"Other{uuid.uuid4().hex[:6]}"))  # the default context has id 1 too
    schema = json.dumps({"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}]})
    strategy = {"subject.name.strategy": lambda ctx_, record: f":{ctx}:{ctx_.topic}-value"}
    serializer, deserializer = AvroSerializer(client, schema, conf=strategy), AvroDeserializer(client, conf=strategy)
    field = SerializationContext(topic_name, MessageField.VALUE)

    producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
    producer.produce(topic_name, serializer({"id": 7}, field))
    assert producer.flush(30) == 0
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": uuid.uuid4().hex,
                         "auto.offset.reset": "earliest"})
    consumer.subscribe([topic_name])
    try:
        message = consumer.poll(30)
        assert message is not None and message.error() is None
    finally:
        consumer.close()
    assert int.from_bytes(message.value()[1:5], "big") == 1  # the context's first id
    assert deserializer(message.value(), field) == {"id": 7}
    assert http.get(f"/contexts/{ctx}/subjects").json() == [f":{ctx}:{topic_name}-value"]
