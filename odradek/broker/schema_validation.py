"""Broker-side schema validation, as Confluent Server's topic configs `confluent.key.schema.validation` and
`confluent.value.schema.validation` ask for it (docs/schema-registry.md): every key (value) of a produced batch
must be framed as Confluent's serializers frame it (magic byte 0, a 4-byte schema id), by an id registered for the
key's (value's) subject, and its payload must decode with that schema; otherwise the partition's batch is refused
with INVALID_RECORD and `record_errors` naming each record at fault, as Kafka refuses a batch with bad records.
A null key or value (a keyless record, a tombstone) carries no schema and passes.

The subject is the one `confluent.{key,value}.subject.name.strategy` names: TopicNameStrategy `<topic>-key` /
`<topic>-value`, RecordNameStrategy the record's full name, TopicRecordNameStrategy `<topic>-<record name>` (the
record name is the framed schema's: Avro's full name, JSON Schema's title, the Protobuf message its indexes name).

The schemas come from above: the broker sits below the schema registry in the layers and reads no `_schemas` of
its own, so whoever runs a registry beside a broker installs it as the broker's SchemaSource (`install`; `odradek
serve` with `schema.registry.port` installs the registry it starts, odradek.registry.validation). A topic with
validation on, on a broker with no source, refuses every batch (INVALID_RECORD): it cannot check them; while the
source is not ready (the registry beside a broker that just started has not read `_schemas` to its end), batches
are refused with REQUEST_TIMED_OUT, which producers retry.

Only a partition whose topic has validation on pays anything (LogConfig.schema_validation, read once per
partition); its batches, already through records.validation, are decoded again (records.batch.decode_batch) and
each framed key or value is decoded with its writer's schema.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Sequence
from typing import Protocol

from odradek.config import SUBJECT_NAME_STRATEGIES, LogConfig
from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import BatchHeader, decode_batch
from odradek.records.validation import MAX_RECORD_ERRORS, RecordsRefused

TOPIC_NAME, RECORD_NAME = SUBJECT_NAME_STRATEGIES[:2]  # and TopicRecordNameStrategy
MAGIC = 0


class SchemaSource(Protocol):
    """The registry's schemas, as the broker needs them (called on the broker's event loop: no waiting on I/O)."""

    def ready(self) -> bool:
        """Whether the schemas are all known (a registry that has read `_schemas` to its end)."""

    def registered(self, subject: str) -> frozenset[int]:
        """The ids of the subject's live (not deleted) versions."""

    def record_name(self, schema_id: int, payload: bytes) -> str | None:
        """The full name of the record a payload (after the id) written with the schema holds (None: no such schema,
        or it names none)."""

    def decoder(self, schema_id: int) -> Callable[[bytes], object] | None:
        """A strict decoder of the payloads written with the schema (raising ValueError for one that does not
        decode); None if there is no such schema."""


_sources: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # broker -> its SchemaSource


def install(broker, source: SchemaSource) -> None:
    """Validate the broker's produced records against `source`."""
    _sources[broker] = source


def check(broker, topic: str, config: LogConfig, records, headers: Sequence[BatchHeader]) -> None:
    """Refuse (RecordsRefused, INVALID_RECORD) the batches if a key or value fails the topic's validation."""
    source = _sources.get(broker)
    if source is None:
        raise KafkaError(ErrorCode.INVALID_RECORD, f"Topic {topic} validates records by schema but this broker "
                                                   "has no schema registry to validate them with")
    if not source.ready():  # retriable: the producer tries again, as it does while a leader is elected
        raise KafkaError(ErrorCode.REQUEST_TIMED_OUT, f"Topic {topic} validates records by schema and the schema "
                                                      "registry has not read its schemas yet")
    sides = [(name, strategy) for name, on, strategy in (
        ("key", config.confluent_key_schema_validation, config.confluent_key_subject_name_strategy),
        ("value", config.confluent_value_schema_validation, config.confluent_value_subject_name_strategy)) if on]
    registered: dict[str, frozenset[int]] = {}  # per subject, looked up once per partition
    errors: list[tuple[int, str]] = []
    position = 0
    view = memoryview(records)
    for header in headers:
        _, decoded = decode_batch(view[position:position + header.size])
        position += header.size
        for index, record in enumerate(decoded):
            for side, strategy in sides:
                problem = _problem(source, topic, side, strategy, record.key if side == "key" else record.value,
                                   registered)
                if problem is not None:
                    errors.append((index, problem))
                    break
    if errors:
        shown = "; ".join(f"record {index}: {text}" for index, text in errors[:3])
        raise RecordsRefused(ErrorCode.INVALID_RECORD, f"Schema validation of topic {topic} refused {len(errors)} "
                                                       f"of the batch's records: {shown}", errors[:MAX_RECORD_ERRORS])


def subject_of(topic: str, side: str, strategy: str, record_name: str | None) -> str | None:
    """The subject a strategy names (None: a record-name strategy and a schema naming no record)."""
    if strategy == TOPIC_NAME:
        return f"{topic}-{side}"
    if record_name is None:
        return None
    return record_name if strategy == RECORD_NAME else f"{topic}-{record_name}"


def _problem(source: SchemaSource, topic: str, side: str, strategy: str, data: bytes | None,
             registered: dict[str, frozenset[int]]) -> str | None:
    """Why a key or value fails its validation, None if it passes."""
    if data is None:
        return None
    if len(data) < 5 or data[0] != MAGIC:
        return f"Record's {side} is not framed by a schema id"
    schema_id = int.from_bytes(data[1:5], "big")
    subject = subject_of(topic, side, strategy,
                         None if strategy == TOPIC_NAME else source.record_name(schema_id, data[5:]))
    if subject is None:
        return f"Schema id {schema_id} of the record's {side} names no record for {strategy.rsplit('.', 1)[-1]}"
    ids = registered.get(subject)
    if ids is None:
        ids = registered[subject] = source.registered(subject)
    if schema_id not in ids:
        return f"Schema id {schema_id} is not registered for subject {subject}"
    decoder = source.decoder(schema_id)
    if decoder is None:
        return f"Schema id {schema_id} cannot decode records here"
    try:
        decoder(data[5:])
    except Exception as exc:  # noqa: BLE001 - each format's library raises its own kinds for bad bytes
        return f"Record's {side} does not decode with schema id {schema_id}: {exc}"
    return None
