"""ClientError: any failure reported by librdkafka or a broker, as one exception with one readable line.

Kept free of confluent-kafka imports so the CLI's top level can catch it without loading the client library.
"""

from __future__ import annotations


class ClientError(Exception):
    """`name` is librdkafka's error name (e.g. TOPIC_ALREADY_EXISTS, _TRANSPORT); str() is one line for humans."""

    def __init__(self, message: str, name: str = "", retriable: bool = False):
        super().__init__(message)
        self.name = name
        self.retriable = retriable

    @classmethod
    def of(cls, error) -> "ClientError":
        """From a confluent_kafka.KafkaError (or a KafkaException carrying one)."""
        error = error.args[0] if error.args and hasattr(error.args[0], "code") else error
        if not hasattr(error, "code"):
            return cls(str(error))
        return cls(f"{error.name()}: {error.str()}", error.name(), error.retriable())
