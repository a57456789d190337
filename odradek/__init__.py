"""Odradek: a distributed commit log in Python that speaks the Kafka wire protocol.

Importing the package stays cheap: `odradek.Broker` (the embedded broker) is loaded on first use.
"""

__version__ = "0.1.0"
__all__ = ["Broker"]


def __getattr__(name: str):
    if name == "Broker":
        from odradek.embedded import Broker

        return Broker
    raise AttributeError(f"module 'odradek' has no attribute {name!r}")
