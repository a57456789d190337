"""Who is in the cluster: the live brokers, their addresses, and which one is the controller.

The broker and its request handlers ask one object these questions and never learn where the answer comes from.
A single-node broker answers them itself (`LocalMembership`: this broker, its own controller); a broker started with
zookeeper.connect asks ZooKeeper (odradek.cluster.zookeeper.ZooKeeperMembership, imported only in that mode, so
kazoo is never loaded by a single-node broker). Both have the same shape: `connect()` before the topic catalogue is
loaded (it decides the cluster id), `register(endpoint)` once the listener is bound, `live_brokers()`,
`shutting_down()` (live brokers in controlled shutdown), `in_session` (whether its view of the cluster can be
trusted now), `controller_id` and `close()`.
"""

from __future__ import annotations

import dataclasses

from odradek.config import Listener


@dataclasses.dataclass(frozen=True)
class BrokerEndpoint:
    """A live broker as clients see it: id, its legacy host and port (its PLAINTEXT listener's if it has one, else
    its first), rack (None when unset), and the advertised address of every listener it has, by name (Kafka's
    registered endpoints with their listener_security_protocol_map; other brokers reach it at the inter-broker
    listener's, odradek.cluster.peer)."""

    node_id: int
    host: str
    port: int
    rack: str | None = None
    listeners: tuple[Listener, ...] = ()

    @classmethod
    def of(cls, node_id: int, rack: str | None, listeners: tuple[Listener, ...]) -> "BrokerEndpoint":
        """A broker with these advertised listeners; its own address is its first PLAINTEXT one's, else its first's
        (as Kafka's registration keeps a PLAINTEXT endpoint as the legacy host and port)."""
        first = next((entry for entry in listeners if entry.security_protocol == "PLAINTEXT"), listeners[0])
        return cls(node_id, first.host, first.port, rack, listeners)

    def address(self, listener_name: str) -> tuple[str, int] | None:
        """Where a client that came in on the named listener reaches this broker; None if it has no such listener
        (Kafka leaves such a broker out of that client's Metadata)."""
        return next(((entry.host, entry.port) for entry in self.listeners if entry.name == listener_name), None)


@dataclasses.dataclass(frozen=True)
class ClusterInfo:
    """The cluster as `odradek brokers list` shows it, whether asked of a broker or read from ZooKeeper."""

    cluster_id: str | None
    controller_id: int  # -1: none elected
    brokers: list[BrokerEndpoint]


class ClusterMembershipError(Exception):
    """This broker may not join the cluster (its id is taken, or its data belongs to another cluster)."""


class LocalMembership:
    """A cluster of one: this broker is the only live broker and its own controller."""

    in_session = True  # nothing outside can move its partitions

    def __init__(self, node_id: int):
        self.node_id = node_id
        self.controller_id = node_id
        self._brokers: tuple[BrokerEndpoint, ...] = ()

    def connect(self) -> str | None:
        """No cluster id comes from outside: the catalogue makes one and keeps it in meta.properties."""
        return None

    def register(self, endpoint: BrokerEndpoint) -> None:
        self._brokers = (endpoint,)

    def live_brokers(self) -> tuple[BrokerEndpoint, ...]:
        return self._brokers

    def shutting_down(self) -> frozenset[int]:
        return frozenset()

    def close(self) -> None:
        self._brokers = ()
