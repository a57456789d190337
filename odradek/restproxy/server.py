"""Serving the REST proxy as every HTTP service is served (odradek.http_server: 127.0.0.1 by default; port 0 picks
a free one, known before serving), in the foreground (`odradek rest-proxy`) or in a daemon thread beside a broker
(`rest.proxy.port`), over TLS when given a PEM certificate chain and key.
"""

from __future__ import annotations

import logging

from odradek.http_server import DEFAULT_HOST, HttpService
from odradek.restproxy.app import Proxy, ProxySettings, create_app

log = logging.getLogger("odradek.restproxy")
DEFAULT_PORT = 8082  # Confluent's REST Proxy's


class RestProxy(HttpService):
    """The proxy's server (odradek.http_server), over TLS when given ssl_certfile and ssl_keyfile; its clients are
    closed once it has served."""

    def __init__(self, settings: ProxySettings, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 ssl_certfile: str | None = None, ssl_keyfile: str | None = None):
        self.proxy = Proxy(settings)
        super().__init__(create_app(self.proxy), host, port, "rest proxy", log, ssl_certfile=ssl_certfile,
                         ssl_keyfile=ssl_keyfile)

    def _closed(self) -> None:
        self.proxy.close()
