"""The HTTP services (odradek.http_server) beside a test broker, served in a thread of the test's process on a free
port (port 0): any of them for a with block (`served`), the schema registry of a module (the `registry` fixture,
shared by tests/registry, tests/restproxy and tests/iceberg), an HTTP client on a service, and the line a served
process prints to say where it serves."""

from __future__ import annotations

import contextlib
import threading

import httpx
import pytest

from odradek.http_server import HttpService
from odradek.registry import SchemaRegistry, SchemaRegistrySettings


@contextlib.contextmanager
def served(service: HttpService):
    """The service served in its thread for the with block, then stopped (its thread ended)."""
    service.start_thread()
    try:
        yield service
    finally:
        service.stop()


@pytest.fixture(scope="module")
def registry(broker):
    """A schema registry beside the module's broker (its _schemas topic)."""
    with served(SchemaRegistry(SchemaRegistrySettings(broker.bootstrap_servers, port=0))) as running:
        yield running


def http_client(service: HttpService) -> httpx.Client:
    return httpx.Client(base_url=service.url, timeout=30)


def line_of(stream, timeout: float = 30) -> str:
    """The next line of a process's output, failing the test if none comes within the timeout."""
    read: list[str] = []
    reader = threading.Thread(target=lambda: read.append(stream.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    assert read, "no line within the timeout"
    return read[0]
