"""Odradek: a distributed commit log in Python that speaks the Kafka wire protocol."""

__version__ = "0.1.0"
