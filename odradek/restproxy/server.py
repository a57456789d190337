"""Serving the REST proxy: uvicorn on a socket bound here (127.0.0.1 by default; port 0 picks a free one, known
before serving), in the foreground (`odradek rest-proxy`) or in a daemon thread beside a broker
(`rest.proxy.port`), over TLS when given a PEM certificate chain and key.
"""

from __future__ import annotations

import logging
import socket
import threading

import uvicorn

from odradek.restproxy.app import Proxy, ProxySettings, create_app

log = logging.getLogger("odradek.restproxy")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8082  # Confluent's REST Proxy's


class RestProxy:
    """`start()` binds and returns the URL, `serve()` blocks until `stop()`, `start_thread()` serves in a daemon
    thread."""

    def __init__(self, settings: ProxySettings, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT,
                 ssl_certfile: str | None = None, ssl_keyfile: str | None = None):
        self.host, self.port = host, port
        self.proxy = Proxy(settings)
        self.scheme = "https" if ssl_certfile else "http"
        self._server = uvicorn.Server(uvicorn.Config(create_app(self.proxy), log_level="warning", access_log=False,
                                                     lifespan="off", ssl_certfile=ssl_certfile,
                                                     ssl_keyfile=ssl_keyfile))
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def start(self) -> str:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((self.host, self.port))
        self._socket.listen(128)  # connections wait in the backlog until uvicorn serves: the URL works from now
        host = f"[{self.host}]" if family == socket.AF_INET6 else self.host
        self.url = f"{self.scheme}://{host}:{self._socket.getsockname()[1]}/"
        return self.url

    def serve(self) -> None:
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self.proxy.close()

    def stop(self) -> None:
        """Ends serve(); with start_thread, waits for its clients to close."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)

    def start_thread(self) -> str:
        url = self.start()
        self._thread = threading.Thread(target=self.serve, name="odradek-rest-proxy", daemon=True)
        self._thread.start()
        log.info("rest proxy on %s", url)
        return url
