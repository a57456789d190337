"""The console's Schemas pages over the registry's REST API: the subjects with their latest version, a subject's
versions with the diff between two of them, and a compatibility test of a pasted schema, refused with the
registry's reason."""

from __future__ import annotations

import json

import httpx
import pytest
from confluent_kafka.schema_registry import Schema

from odradek.console import Console, ConsoleSettings


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
