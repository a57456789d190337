"""Odradek: a distributed commit log in Python that speaks the Kafka wire protocol.

Importing the package stays cheap: `odradek.Broker` (the embedded broker) and `odradek.Cluster` (brokers on a
ZooKeeper) are loaded on first use.
"""

__version__ = "0.1.0"
__all__ = ["Broker", "Cluster"]


def __getattr__(name: str):
    if name in __all__:
        import odradek.embedded

        return getattr(odradek.embedded, name)
    raise AttributeError(f"module 'odradek' has no attribute {name!r}")
