"""The registry beside a broker in its process (`odradek serve --set schema.registry.port=PORT`): it says where it
serves in one line after the broker's ready line, and serves there, its `_schemas` read through the broker's own
listener, and the console beside them shows its schemas (`odradek schema-registry`, the command, is run by
test_store)."""

from __future__ import annotations

import json

import httpx
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from odradek.embedded import BrokerProcess
from tests.http_services import line_of
from tests.security.conftest import free_port


def test_schema_registry_port_serves_the_registry_beside_the_broker(tmp_path):
    port, console_port = free_port(), free_port()
    broker = BrokerProcess(tmp_path / "data", settings={"schema.registry.port": port, "console.port": console_port})
    broker.start()
    try:
        assert line_of(broker.process.stdout).strip() == f"odradek: console on http://127.0.0.1:{console_port}/"
        assert line_of(broker.process.stdout).strip() == f"odradek: schema registry on http://127.0.0.1:{port}"
        client = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
        schema = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "int"}]})
        assert client.register_schema("beside-value", Schema(schema, "AVRO")) == 1
        assert client.get_subjects() == ["beside-value"]
        page = httpx.get(f"http://127.0.0.1:{console_port}/schemas", timeout=30)  # the console's Schemas page
        assert 'data-subject="beside-value"' in page.text
    finally:
        broker.stop()
