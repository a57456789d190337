"""Serving an HTTP service (an ASGI app) with uvicorn, as the console, the schema registry and the REST proxy are
served: on a socket bound here (127.0.0.1 by default, IPv6 for a host with a colon; port 0 picks a free one), so
that the URL is known before serving, either in the foreground (`start()` then `serve()`, the service's command) or
in a daemon thread beside a broker (`start_thread()`), over TLS when given a PEM certificate chain and key.

A service subclasses HttpService with its app and says what it starts before serving (`_starting`: the console's
samplers, the registry's catching up with its topic) and what it closes once served (`_closed`: their clients).
"""

from __future__ import annotations

import logging
import socket
import threading

import uvicorn

from odradek.config import host_port

DEFAULT_HOST = "127.0.0.1"


class HttpService:
    """`start()` listens, starts what the service needs and returns the URL; `serve()` blocks until `stop()` (or
    Ctrl-C in the foreground); `start_thread()` listens, returns the URL at once and starts and serves in a daemon
    thread, the requests waiting in the backlog meanwhile."""

    def __init__(self, app, host: str, port: int, name: str, log: logging.Logger, *, root: str = "/",
                 ssl_certfile: str | None = None, ssl_keyfile: str | None = None):
        """`name` is said in the log ("console on URL") and names the thread; `root` ends the URL."""
        self.host, self.port = host, port
        self.name, self._log, self._root = name, log, root
        self.scheme = "https" if ssl_certfile else "http"
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off",
                                                     ssl_certfile=ssl_certfile, ssl_keyfile=ssl_keyfile))
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def _starting(self) -> None:
        """What the service starts before it serves, once listening (in the thread of start_thread)."""

    def _closed(self) -> None:
        """What the service closes once it has served."""

    def _listen(self) -> None:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((self.host, self.port))
        self._socket.listen(128)  # connections wait in the backlog until uvicorn serves: the URL works from now
        self.url = f"{self.scheme}://{host_port(self.host, self._socket.getsockname()[1])}{self._root}"

    def start(self) -> str:
        self._listen()
        self._starting()
        return self.url

    def serve(self) -> None:
        """Serve until stop() (or Ctrl-C in the foreground)."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self._closed()

    def stop(self) -> None:
        """Ends serve(); with start_thread, returns once its thread has ended (what the service started, closed)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)

    def start_thread(self) -> str:
        """Beside a broker, whose event loop answers the service's own Kafka requests, nothing may wait for the
        cluster before the broker's loop runs on: what the service starts is started in its thread."""
        self._listen()
        self._thread = threading.Thread(target=self._start_and_serve, name=f"odradek-{self.name.replace(' ', '-')}",
                                        daemon=True)
        self._thread.start()
        self._log.info("%s on %s", self.name, self.url)
        return self.url

    def _start_and_serve(self) -> None:
        try:
            self._starting()
        except Exception as exc:  # noqa: BLE001 - the thread's end: say why, refuse the waiting requests
            self._log.error("%s on %s cannot start: %s", self.name, self.url, exc)
            self._socket.close()
            return
        self.serve()
