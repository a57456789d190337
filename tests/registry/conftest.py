"""The registry's fixtures: the shared broker of the module (tests/conftest.py) with a schema registry served beside
it in this process (odradek.registry, port 0), a registry client and an HTTP client on it, and a subject name per
test so that tests do not see each other's schemas."""

from __future__ import annotations

import uuid

import httpx
import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from odradek.registry import SchemaRegistry, SchemaRegistrySettings


@pytest.fixture(scope="module")
def registry(broker):
    running = SchemaRegistry(SchemaRegistrySettings(broker.bootstrap_servers, port=0))
    running.start_thread()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def http(registry):
    with httpx.Client(base_url=registry.url, timeout=30) as client:
        yield client


@pytest.fixture
def client(registry):
    return SchemaRegistryClient({"url": registry.url})


@pytest.fixture
def subject(request) -> str:
    return f"{request.node.name[:30].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:6]}"
