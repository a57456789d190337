"""The registry's fixtures: the shared broker of the module (tests/conftest.py) with a schema registry served beside
it in this process (tests/http_services.py), a registry client and an HTTP client on it, and a subject name per
test so that tests do not see each other's schemas."""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient

from tests.http_services import http_client, registry  # noqa: F401 (registry: the module's registry, a fixture)


@pytest.fixture(scope="module")
def http(registry):
    with http_client(registry) as client:
        yield client


@pytest.fixture
def client(registry):
    return SchemaRegistryClient({"url": registry.url})


@pytest.fixture
def subject(request) -> str:
    return f"{request.node.name[:30].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:6]}"
