"""Confluent Schema Registry's REST API as clients see it, against a registry on a real broker: registering and
reading back, evolution accepted and refused per compatibility level (Avro, JSON Schema, Protobuf), references,
modes, soft then permanent deletes, config, contexts and the error codes of bad requests (never a 500)."""

from __future__ import annotations

import json

import pytest
from confluent_kafka.schema_registry import Schema, SchemaReference
from confluent_kafka.schema_registry.error import SchemaRegistryError

CT = "application/vnd.schemaregistry.v1+json"


def avro(*fields: dict, name: str = "User") -> str:
    return json.dumps({"type": "record", "name": name, "namespace": "t", "fields": list(fields)})


A = {"name": "a", "type": "string"}


def post(http, path: str, body) -> tuple[int, dict]:
    answer = http.post(path, content=json.dumps(body) if not isinstance(body, bytes) else body,
                       headers={"Content-Type": CT})
    return answer.status_code, answer.json()


def test_register_read_back_and_same_schema_same_id(client, http, subject):
    first = client.register_schema(subject, Schema(avro(A), "AVRO"))
    again = client.register_schema(subject + "-other", Schema(avro(A), "AVRO"))
    assert again == first  # one schema, one id, in any subject
    latest = client.get_latest_version(subject)
    assert (latest.version, latest.schema_id, json.loads(latest.schema.schema_str)) == (1, first, json.loads(avro(A)))
    assert http.get(f"/schemas/ids/{first}").headers["content-type"] == CT
    assert json.loads(client.get_schema(first).schema_str) == json.loads(avro(A))
    assert sorted(http.get(f"/schemas/ids/{first}/subjects").json()) == sorted([subject, subject + "-other"])
    assert subject in client.get_subjects()
    assert set(http.get("/schemas/types").json()) == {"AVRO", "JSON", "PROTOBUF"}
    assert client.lookup_schema(subject, Schema(avro(A), "AVRO")).version == 1
    status, body = post(http, f"/subjects/{subject}", {"schema": avro({"name": "zz", "type": "int"})})
    assert (status, body["error_code"]) == (404, 40403)


def test_avro_evolution_accepted_and_refused_with_confluents_message(client, http, subject):
    client.register_schema(subject, Schema(avro(A), "AVRO"))
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(avro(A, {"name": "b", "type": "int"}), "AVRO"))
    assert refused.value.http_status_code == 409 and refused.value.error_code == 409
    assert refused.value.error_message.startswith(
        f'Schema being registered is incompatible with an earlier schema for subject "{subject}", details: '
        "[{errorType:'READER_FIELD_MISSING_DEFAULT_VALUE', description:'The field 'b' at path '/fields/1' in the "
        "new schema has no default value and is missing in the old schema', additionalInfo:'b'}")
    assert "{oldSchemaVersion: 1}" in refused.value.error_message
    assert client.register_schema(subject, Schema(avro(A, {"name": "b", "type": "int", "default": 0}), "AVRO")) > 0
    status, body = post(http, f"/compatibility/subjects/{subject}/versions/latest?verbose=true",
                        {"schema": avro({"name": "a", "type": "int"})})
    assert status == 200 and body["is_compatible"] is False
    assert "TYPE_MISMATCH" in body["messages"][0]
    http.put(f"/config/{subject}", json={"compatibility": "FULL_TRANSITIVE"})
    assert client.get_compatibility(subject) == "FULL_TRANSITIVE"
    assert not client.test_compatibility(subject, Schema(avro({"name": "b", "type": "int", "default": 0}), "AVRO"))
    assert client.test_compatibility(subject, Schema(avro(A), "AVRO"))


def test_json_schema_evolution(client, subject):
    old = {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": False}
    client.register_schema(subject, Schema(json.dumps(old), "JSON"))
    narrowed = dict(old, properties={"a": {"type": "string", "maxLength": 3}})
    assert not client.test_compatibility(subject, Schema(json.dumps(narrowed), "JSON"))
    added = dict(old, properties={"a": {"type": "string"}, "b": {"type": "integer"}})
    assert client.test_compatibility(subject, Schema(json.dumps(added), "JSON"))  # closed model: optional is fine
    with pytest.raises(SchemaRegistryError) as refused:
        client.register_schema(subject, Schema(json.dumps(dict(added, required=["b"])), "JSON"))
    assert refused.value.http_status_code == 409
    assert "REQUIRED_PROPERTY_ADDED_TO_UNOPEN_CONTENT_MODEL" in refused.value.error_message
    assert client.register_schema(subject, Schema(json.dumps(added), "JSON")) > 0


def test_protobuf_text_evolution_and_serialized_format(client, http, subject):
    v1 = 'syntax = "proto3";\npackage t;\nmessage M {\n  string a = 1;\n  int32 b = 2;\n}\n'
    schema_id = client.register_schema(subject, Schema(v1, "PROTOBUF"))
    assert client.test_compatibility(subject, Schema(v1.replace("int32 b", "int64 b"), "PROTOBUF"))
    assert not client.test_compatibility(subject, Schema(v1.replace("int32 b", "string b"), "PROTOBUF"))
    assert not client.test_compatibility(subject, Schema(v1.replace("package t", "package u"), "PROTOBUF"))
    serialized = http.get(f"/schemas/ids/{schema_id}", params={"format": "serialized"}).json()
    from base64 import b64decode

    from google.protobuf import descriptor_pb2
    descriptor = descriptor_pb2.FileDescriptorProto.FromString(b64decode(serialized["schema"]))
    assert [f.name for f in descriptor.message_type[0].field] == ["a", "b"]
    status, body = post(http, f"/subjects/{subject}/versions", {"schema": "message {", "schemaType": "PROTOBUF"})
    assert (status, body["error_code"]) == (422, 42201) and "Invalid PROTOBUF schema" in body["message"]


def test_references_and_referenced_by(client, http, subject):
    address = avro({"name": "street", "type": "string"}, name="Address")
    client.register_schema(subject + "-address", Schema(address, "AVRO"))
    person = avro({"name": "home", "type": "t.Address"}, name="Person")
    refs = [SchemaReference("t.Address", subject + "-address", 1)]
    person_id = client.register_schema(subject, Schema(person, "AVRO", refs))
    assert client.get_latest_version(subject).schema.references[0].subject == subject + "-address"
    assert http.get(f"/subjects/{subject}-address/versions/1/referencedby").json() == [person_id]
    status, body = post(http, f"/subjects/{subject}-x/versions", {"schema": person})  # no reference: unknown type
    assert (status, body["error_code"]) == (422, 42201)
    answer = http.delete(f"/subjects/{subject}-address/versions/1")
    assert (answer.status_code, answer.json()["error_code"]) == (422, 42206)


def test_soft_then_permanent_deletes(client, http, subject):
    client.register_schema(subject, Schema(avro(A), "AVRO"))
    second = client.register_schema(subject, Schema(avro(A, {"name": "b", "type": "int", "default": 1}), "AVRO"))
    answer = http.delete(f"/subjects/{subject}?permanent=true")
    assert (answer.status_code, answer.json()["error_code"]) == (404, 40405)
    assert client.delete_version(subject, 2) == 2
    assert client.get_versions(subject) == [1]
    answer = http.delete(f"/subjects/{subject}/versions/2")
    assert (answer.status_code, answer.json()["error_code"]) == (404, 40406)
    assert http.get(f"/subjects/{subject}/versions/2?deleted=true").json()["id"] == second
    assert client.delete_subject(subject) == [1, 2]
    assert subject not in client.get_subjects()
    assert subject in http.get("/subjects?deleted=true").json()
    answer = http.delete(f"/subjects/{subject}")
    assert (answer.status_code, answer.json()["error_code"]) == (404, 40404)
    assert http.get(f"/schemas/ids/{second}").status_code == 200  # a soft-deleted schema is still readable by id
    assert client.delete_subject(subject, permanent=True) == [1, 2]
    assert subject not in http.get("/subjects?deleted=true").json()
    answer = http.get(f"/subjects/{subject}/versions")
    assert answer.json() == {"error_code": 40401, "message": f"Subject '{subject}' not found."}
    # registered again: versions go on from 1, the same schema keeps its id
    assert client.register_schema(subject, Schema(avro(A, {"name": "b", "type": "int", "default": 1}), "AVRO")) \
        == second


def test_modes(client, http, subject):
    client.register_schema(subject, Schema(avro(A), "AVRO"))
    assert client.update_mode(subject, "READONLY") == "READONLY"
    status, body = post(http, f"/subjects/{subject}/versions", {"schema": avro(A, {"name": "c", "type": "int",
                                                                                      "default": 0})})
    assert (status, body["error_code"]) == (422, 42205)
    assert client.get_mode(subject) == "READONLY" and http.get("/mode").json() == {"mode": "READWRITE"}
    answer = http.put(f"/mode/{subject}", json={"mode": "IMPORT"})
    assert answer.json()["error_code"] == 42205  # schemas exist: IMPORT needs force
    assert http.put(f"/mode/{subject}?force=true", json={"mode": "IMPORT"}).json() == {"mode": "IMPORT"}
    status, body = post(http, f"/subjects/{subject}/versions", {"schema": avro({"name": "x", "type": "int"}),
                                                                 "id": 90000, "version": 7})
    assert status == 200 and body["id"] == 90000  # imported with its id and version, unchecked
    assert http.get(f"/subjects/{subject}/versions/7").json()["id"] == 90000
    assert http.put("/mode", json={"mode": "SOMETIMES"}).json()["error_code"] == 42204
    assert client.delete_mode(subject) == "IMPORT"


def test_config_levels_and_errors(client, http, subject):
    answer = http.get(f"/config/{subject}")
    assert (answer.status_code, answer.json()["error_code"]) == (404, 40408)
    assert http.get(f"/config/{subject}?defaultToGlobal=true").json()["compatibilityLevel"] == "BACKWARD"
    answer = http.put(f"/config/{subject}", json={"compatibility": "SIDEWAYS"})
    assert (answer.status_code, answer.json()["error_code"]) == (422, 42203)
    assert http.put(f"/config/{subject}", json={"compatibility": "none"}).json() == {"compatibility": "NONE"}
    client.register_schema(subject, Schema(avro(A), "AVRO"))
    assert client.register_schema(subject, Schema(avro({"name": "a", "type": "int"}), "AVRO")) > 0  # NONE: any
    assert http.delete(f"/config/{subject}").json()["compatibilityLevel"] == "NONE"
    assert http.get(f"/config/{subject}").status_code == 404


@pytest.mark.parametrize("body, status, code", [
    (b"{not json", 400, 400),
    (b"[1, 2]", 422, 422),
    ({}, 422, 42201),
    ({"schema": "{\"type\": \"recrd\"}"}, 422, 42201),
    ({"schema": avro(A), "schemaType": "XML"}, 422, 42201),
    ({"schema": avro(A), "references": "nope"}, 422, 42201),
    ({"schema": avro(A), "references": [{"name": "x"}]}, 422, 42201),
    ({"schema": 5}, 422, 42201),
    ({"schema": "{", "schemaType": "JSON"}, 422, 42201),
    ({"schema": json.dumps({"type": "object", "minLength": "x"}), "schemaType": "JSON"}, 422, 42201),
])
def test_malformed_bodies_are_refused_with_confluents_codes(http, subject, body, status, code):
    got, answer = post(http, f"/subjects/{subject}/versions", body)
    assert (got, answer["error_code"]) == (status, code), answer
    assert isinstance(answer["message"], str)


def test_bad_paths_and_versions(http, subject):
    for path, status, code in [(f"/subjects/{subject}/versions/0", 422, 42202),
                               (f"/subjects/{subject}/versions/abc", 422, 42202),
                               ("/schemas/ids/999999", 404, 40403), ("/schemas/ids/x", 404, 40403),
                               ("/nothing/here", 404, 404)]:
        answer = http.get(path)
        assert (answer.status_code, answer.json()["error_code"]) == (status, code), path
    assert http.post("/schemas/types").status_code == 405


def test_contexts_metadata_and_rule_set(client, http, subject):
    contextual = f":.tenant:{subject}"
    body = {"schema": avro(A), "metadata": {"properties": {"owner": "team-a"}},
            "ruleSet": {"domainRules": [{"name": "r", "kind": "CONDITION", "mode": "WRITE", "type": "CEL",
                                         "expr": "true"}]}}
    status, registered = post(http, f"/subjects/{contextual}/versions", body)
    assert status == 200
    got = http.get(f"/subjects/{contextual}/versions/latest").json()
    assert got["metadata"] == body["metadata"] and got["ruleSet"] == body["ruleSet"]
    assert ".tenant" in http.get("/contexts").json()
    assert http.get(f"/subjects/{contextual}/metadata", params={"key": "owner", "value": "team-a"}).json()["id"] \
        == registered["id"]
    ident = http.get("/v1/metadata/id").json()
    assert ident["scope"]["clusters"]["kafka-cluster"]
    assert http.get(f"/schemas/guids/{registered['guid']}").json()["schema"] == got["schema"]


def test_normalize_finds_the_same_schema(client, http, subject):
    spaced = '{"type": "record", "name": "N", "fields": [{"name": "a", "type": "string"}]}'
    reordered = '{"fields": [{"type": "string", "name": "a"}], "name": "N", "type": "record"}'
    first = post(http, f"/subjects/{subject}/versions?normalize=true", {"schema": spaced})[1]["id"]
    again = post(http, f"/subjects/{subject}/versions?normalize=true", {"schema": reordered})[1]
    assert again["id"] == first and again["version"] == 1
