"""The REST proxy's fixtures: one proxy per module (odradek.restproxy.RestProxy in a thread, port 0) in front of
the module's broker (tests/conftest.py), and an httpx client on it."""

from __future__ import annotations

import httpx
import pytest

from odradek.restproxy import ProxySettings, RestProxy

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"


def start_proxy(bootstrap_servers: str, **settings) -> RestProxy:
    proxy = RestProxy(ProxySettings(bootstrap_servers, **settings), port=0)
    proxy.start_thread()
    return proxy


@pytest.fixture(scope="module")
def rest_proxy(broker):
    proxy = start_proxy(broker.bootstrap_servers)
    yield proxy
    proxy.stop()


@pytest.fixture(scope="module")
def http(rest_proxy):
    with httpx.Client(base_url=rest_proxy.url, timeout=30) as client:
        yield client
