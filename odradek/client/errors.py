"""ClientError: any failure reported by librdkafka or a broker, as one exception with one readable line; and
LIBRDKAFKA_LOGGER, where every client of this layer sends librdkafka's own log lines (instead of raw stderr), so
applications decide what to show with ordinary logging settings.

Kept free of confluent-kafka imports so the CLI's top level can catch ClientError without loading the client library.
"""

from __future__ import annotations

import logging

LIBRDKAFKA_LOGGER = logging.getLogger("odradek.client.librdkafka")


class ClientError(Exception):
    """`name` is librdkafka's error name (e.g. TOPIC_ALREADY_EXISTS, _TRANSPORT); str() is one line for humans."""

    def __init__(self, message: str, name: str = "", retriable: bool = False):
        super().__init__(message)
        self.name = name
        self.retriable = retriable

    @classmethod
    def of(cls, error) -> "ClientError":
        """From a confluent_kafka.KafkaError (or a KafkaException carrying one)."""
        if isinstance(error, Exception) and error.args and hasattr(error.args[0], "code"):
            error = error.args[0]
        if not hasattr(error, "code"):
            return cls(str(error))
        return cls(f"{error.name()}: {error.str()}", error.name(), error.retriable())
