"""Serving the console: uvicorn on a socket bound here (127.0.0.1 by default; port 0 picks a free one and the
bound port is known before serving), either in the foreground (`odradek console`) or in a daemon thread beside a
broker (`odradek serve --set console.port=...`).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
import socket
import threading
from collections.abc import Mapping

import uvicorn

from odradek.console.app import create_app
from odradek.console.cluster import DEFAULT_READ_GROUP, ClusterView
from odradek.console.rates import LAG_GROUPS, LagHistory, LagSampler, MetricsSampler
from odradek.console.schemas import SchemaView

log = logging.getLogger("odradek.console")
DEFAULT_HOST = "127.0.0.1"


@dataclasses.dataclass
class ConsoleSettings:
    bootstrap_servers: str
    host: str = DEFAULT_HOST
    port: int = 8080
    client_config: Mapping[str, str] = dataclasses.field(default_factory=dict)  # security.protocol, sasl.*, ssl.*
    zookeeper: str | None = None  # cluster mode: the ZooKeeper page reads it
    metrics_urls: list[str] = dataclasses.field(default_factory=list)  # the brokers' /metrics, for rates
    metrics_interval: float = 5.0
    lag_interval: float = 5.0  # how often the groups' lag is read for their charts
    timeout: float = 15.0
    read_group: str = DEFAULT_READ_GROUP  # the group.id records are read with (assign only; READ on it with ACLs)
    schema_registry_url: str | None = None  # the Schemas pages' registry (Confluent's REST API)


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


class Console:
    """The console's server; `start()` binds and returns the URL, `serve()` blocks, `start_thread()` serves in a
    daemon thread (beside a broker, until its process ends)."""

    def __init__(self, settings: ConsoleSettings):
        self.settings = settings
        self.view = ClusterView(settings.bootstrap_servers, settings.client_config, settings.zookeeper,
                                settings.timeout, settings.read_group)
        self.sampler = MetricsSampler(settings.metrics_urls, settings.metrics_interval)
        self.lag_sampler = LagSampler(lambda: [(row.group_id, row.lag) for row in
                                               self.view.group_rows(self.view.admin.list_groups()[:LAG_GROUPS])],
                                      LagHistory(), settings.lag_interval)
        schemas = SchemaView(settings.schema_registry_url) if settings.schema_registry_url else None
        app = create_app(self.view, self.sampler, loopback_only=_loopback(settings.host),
                         lag_history=self.lag_sampler.history, schemas=schemas)
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
        self._socket: socket.socket | None = None
        self.url = ""

    def start(self) -> str:
        family = socket.AF_INET6 if ":" in self.settings.host else socket.AF_INET
        self._socket = socket.socket(family, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind((self.settings.host, self.settings.port))
        self._socket.listen(128)  # connections wait in the backlog until uvicorn serves: the URL works from now
        port = self._socket.getsockname()[1]
        host = f"[{self.settings.host}]" if family == socket.AF_INET6 else self.settings.host
        self.url = f"http://{host}:{port}/"
        self.sampler.start()
        self.lag_sampler.start()
        return self.url

    def serve(self) -> None:
        """Serve until stop() (or Ctrl-C in the foreground)."""
        try:
            self._server.run(sockets=[self._socket])
        finally:
            self.sampler.stop()
            self.lag_sampler.stop()
            self.view.close()

    def stop(self) -> None:
        """Ends serve() (and the thread of start_thread)."""
        self._server.should_exit = True

    def start_thread(self) -> str:
        url = self.start()
        threading.Thread(target=self.serve, name="odradek-console", daemon=True).start()
        log.info("console on %s", url)
        return url
