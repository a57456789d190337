"""The REST proxy's fixtures: one proxy per module (odradek.restproxy.RestProxy in a thread, port 0, served by
tests/http_services.py) in front of the module's broker (tests/conftest.py), and an httpx client on it."""

from __future__ import annotations

import pytest

from odradek.restproxy import ProxySettings, RestProxy
from tests.http_services import http_client, served

V2 = "application/vnd.kafka.v2+json"
BINARY = "application/vnd.kafka.binary.v2+json"
JSON = "application/vnd.kafka.json.v2+json"


def proxy_on(bootstrap_servers: str, **settings) -> RestProxy:
    """A proxy on a free port in front of the cluster, to serve with tests.http_services.served."""
    return RestProxy(ProxySettings(bootstrap_servers, **settings), port=0)


@pytest.fixture(scope="module")
def rest_proxy(broker):
    with served(proxy_on(broker.bootstrap_servers)) as proxy:
        yield proxy


@pytest.fixture(scope="module")
def http(rest_proxy):
    with http_client(rest_proxy) as client:
        yield client
