"""The values the client layer hands back: a consumed Message and the RecordMetadata of a delivered send."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

Decoder = Callable[[bytes | None], Any]


def identity(data: bytes | None) -> bytes | None:
    return data


@dataclasses.dataclass(frozen=True, slots=True)
class Message:
    topic: str
    partition: int
    offset: int
    key: Any
    value: Any
    headers: list[tuple[str, bytes | None]]
    timestamp_ms: int | None

    @classmethod
    def of(cls, raw, key_decoder: Decoder = identity, value_decoder: Decoder = identity) -> "Message":
        """From a confluent_kafka.Message that carries no error."""
        timestamp_type, timestamp = raw.timestamp()
        return cls(raw.topic(), raw.partition(), raw.offset(), key_decoder(raw.key()), value_decoder(raw.value()),
                   list(raw.headers() or ()), timestamp if timestamp_type else None)


@dataclasses.dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int
    timestamp_ms: int | None
