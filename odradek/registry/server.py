"""Serving the schema registry: uvicorn on a socket bound here (127.0.0.1 by default; port 0 picks a free one and
the bound port is known before serving), in the foreground (`odradek schema-registry`) or in a daemon thread beside
a broker (`odradek serve --set schema.registry.port=...`), as the console is served (odradek.console.server).
`start()` also starts the store: `_schemas` is created if missing and read to its end before the URL is given;
`start_thread()` gives the URL at once and catches up in its thread before it serves.
"""

from __future__ import annotations

import dataclasses
import logging
import socket
import threading
from collections.abc import Mapping

import uvicorn

from odradek.registry.app import create_app
from odradek.registry.auth import Access
from odradek.registry.service import Registry
from odradek.registry.store import DEFAULT_GROUP, DEFAULT_TOPIC, KafkaStore

log = logging.getLogger("odradek.registry")
DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8081  # Confluent Schema Registry's


@dataclasses.dataclass
class SchemaRegistrySettings:
    bootstrap_servers: str
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    client_config: Mapping[str, str] = dataclasses.field(default_factory=dict)  # security.protocol, sasl.*, ssl.*
    topic: str = DEFAULT_TOPIC
    group_id: str = DEFAULT_GROUP  # the registries of one cluster that share `topic` and its writes
    timeout: float = 30.0


class SchemaRegistry:
    """`start()` binds, catches up with the topic and returns the URL, `serve()` blocks, `start_thread()` serves in
    a daemon thread."""

    def __init__(self, settings: SchemaRegistrySettings):
        self.settings = settings
        self.store = KafkaStore(settings.bootstrap_servers, settings.client_config, topic=settings.topic,
                                group_id=settings.group_id, timeout=settings.timeout)
        access = Access(settings.bootstrap_servers, settings.client_config, settings.timeout)
        app = create_app(Registry(self.store), cluster_id=lambda: self.store.cluster_id, access=access)
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        self._socket: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self.url = ""

    def _bind(self) -> None:
        family = socket.AF_INET6 if ":" in self.settings.host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((self.settings.host, self.settings.port))
        port = self._socket.getsockname()[1]
        host = f"[{self.settings.host}]" if family == socket.AF_INET6 else self.settings.host
        self.url = f"http://{host}:{port}"

    def start(self) -> str:
        """Binds, reads the topic to its end, listens: the URL is served from now on."""
        self._bind()
        self.store.start()
        self._socket.listen(128)
        return self.url

    def serve(self) -> None:
        """Serve until stop() (or Ctrl-C in the foreground)."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self.store.stop()

    def stop(self) -> None:
        """Ends serve(); with start_thread, returns once its thread has ended (the store's reader closed)."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(30)

    def start_thread(self) -> str:
        """Binds and listens at once, then catches up with the topic and serves in a daemon thread: requests wait in
        the backlog meanwhile. Beside a broker, whose event loop answers the store's own requests, nothing may
        wait for the cluster before the broker's loop runs on."""
        self._bind()
        self._socket.listen(128)
        self._thread = threading.Thread(target=self._catch_up_and_serve, name="odradek-schema-registry",
                                        daemon=True)
        self._thread.start()
        log.info("schema registry on %s", self.url)
        return self.url

    def _catch_up_and_serve(self) -> None:
        try:
            self.store.start()
        except Exception as exc:  # noqa: BLE001 - the thread's end: say why, refuse the waiting requests
            log.error("schema registry on %s cannot start: %s", self.url, exc)
            self._socket.close()
            return
        self.serve()
