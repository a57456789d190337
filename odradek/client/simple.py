"""SimpleConsumer: read one partition from any offset, and find offsets by time, with no group involved; and the
seeds' low-level calls to one broker: `fetch(FetchRequest)`, `multifetch` and `get_offsets_before`.

Reading one partition is a thin wrapper over a confluent-kafka Consumer used only through `assign` (no group join,
no commits): `fetch(offset)` assigns the partition at the asked offset and returns what arrives first, up to
`max_messages`. The seeds' calls "closely match the network requests sent to the server", which librdkafka cannot
be made to send, so they speak Kafka directly over one odradek.client.connection to the consumer's broker: one
Fetch request for any number of (topic, partition, offset, max_bytes), answered per request with its messages or its
Kafka error, and ListOffsets v0 with max_num_offsets for the segment offsets before a time. That connection is
secured as the consumer's `config` says (its security.protocol, sasl.* and ssl.* settings, read by
odradek.security.client), so the seeds' calls reach a SASL_SSL listener as the Consumer does; a login or TLS
handshake the broker refuses is a ClientError _AUTHENTICATION, not retried, and settings that connection cannot use
(GSSAPI, a PKCS12 keystore) a ClientError _INVALID_ARG naming the setting.
With `zk_connect` instead of `bootstrap_servers` the partition's leader is found through ZooKeeper (its state
znode and /brokers/ids) and the consumer connects to it (`leader` says which broker that is).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import confluent_kafka

from odradek.client.errors import LIBRDKAFKA_LOGGER, ClientError
from odradek.client.messages import Decoder, Message, identity
from odradek.config import host_port
from odradek.errors import ErrorCode, KafkaError, error_name
from odradek.protocol import api
from odradek.client.connection import AuthenticationFailed, Connection, Unreachable, UnsupportedApi, server_address
from odradek.records.batch import whole_batches
from odradek.security.client import client_security

OFFSET_TIMEOUT_S = 10.0
LATEST_TIME, EARLIEST_TIME = -1, -2  # getOffsetsBefore's special times
# Fetch v4+ carries record batches (magic 2), v12 is the last naming topics; ListOffsets v0 is the one with
# max_num_offsets and old-style offsets.
VERSIONS = {"Fetch": (4, 12), "ListOffsets": (0, 0)}
FETCH_MAX_BYTES = 1 << 20  # Kafka's old fetch.size default, per partition
FETCH_MAX_WAIT_MS = 100


@dataclasses.dataclass(frozen=True)
class FetchRequest:
    """One partition's part of a Fetch: its records from `offset`, up to `max_bytes` of them."""
    topic: str
    partition: int
    offset: int
    max_bytes: int = FETCH_MAX_BYTES


@dataclasses.dataclass(frozen=True)
class FetchedMessages:
    """The answer to one FetchRequest: its messages, or the Kafka error the broker gave for that partition."""
    request: FetchRequest
    messages: list[Message]
    error: ClientError | None
    high_watermark: int


class SimpleConsumer:
    def __init__(self, bootstrap_servers: str | None, topic: str, partition: int = 0, *,
                 key_decoder: Decoder = identity, value_decoder: Decoder = identity, zk_connect: str | None = None,
                 config: dict[str, Any] | None = None):
        self.leader = None
        if zk_connect is not None:
            from odradek.client import zookeeper  # kazoo is loaded only by ZooKeeper users

            client = zookeeper.connect(zk_connect)
            try:
                self.leader = zookeeper.ZooKeeperClusterView(client).leader(topic, partition)
            finally:
                client.stop()
                client.close()
            if self.leader is None:
                raise ClientError(f"partition {topic}-{partition} has no live leader in ZooKeeper",
                                  "LEADER_NOT_AVAILABLE", retriable=True)
            bootstrap_servers = host_port(self.leader.host, self.leader.port)
        self.topic = topic
        self.partition = partition
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self._consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap_servers, "group.id": "odradek-simple-consumer",
            "enable.auto.commit": False, "enable.partition.eof": False, "logger": LIBRDKAFKA_LOGGER, **(config or {})})

        self._bootstrap_servers = bootstrap_servers
        self._config = dict(config or {})
        self._connection: Connection | None = None

    def _partition(self, offset: int) -> confluent_kafka.TopicPartition:
        return confluent_kafka.TopicPartition(self.topic, self.partition, offset)

    def fetch(self, offset: int | FetchRequest, max_messages: int = 500, timeout: float = 1.0) -> list[Message]:
        """Messages from `offset` on: waits up to `timeout` for the first, then takes what is already buffered.

        Given a FetchRequest instead, the messages one Fetch request to the broker answers for it (ClientError for
        its Kafka error); `max_messages` and `timeout` do not apply."""
        if isinstance(offset, FetchRequest):
            [answer] = self.multifetch([offset])
            if answer.error is not None:
                raise answer.error
            return answer.messages
        self._consumer.assign([self._partition(offset)])
        try:
            first = self._consumer.consume(1, timeout)
            raw = first + (self._consumer.consume(max_messages - 1, 0) if first and max_messages > 1 else [])
        finally:
            self._consumer.unassign()
        messages = []
        for item in raw:
            if item.error() is not None:
                raise ClientError.of(item.error())
            messages.append(Message.of(item, self.key_decoder, self.value_decoder))
        return messages

    def earliest_offset(self) -> int:
        return self._consumer.get_watermark_offsets(self._partition(0), OFFSET_TIMEOUT_S)[0]

    def latest_offset(self) -> int:
        """The offset the next record will get (the high watermark)."""
        return self._consumer.get_watermark_offsets(self._partition(0), OFFSET_TIMEOUT_S)[1]

    def offset_for_time(self, timestamp_ms: int) -> int:
        """The first offset whose record is at or after `timestamp_ms`: every record before it is older (the
        latest offset when none is that recent)."""
        try:
            [found] = self._consumer.offsets_for_times([self._partition(timestamp_ms)], OFFSET_TIMEOUT_S)
        except confluent_kafka.KafkaException as exc:
            raise ClientError.of(exc) from None
        if found.error is not None:
            raise ClientError.of(found.error)
        return found.offset if found.offset >= 0 else self.latest_offset()

    def multifetch(self, requests: list[FetchRequest]) -> list[FetchedMessages]:
        """One Fetch request to the broker for every request; the answers in the requests' order. A partition the
        broker cannot serve has its error alone, the others their messages. A Fetch names each partition once, so
        one partition asked twice differently is a ValueError."""
        if not requests:
            return []
        by_partition: dict[tuple[str, int], FetchRequest] = {}
        for request in requests:
            if by_partition.setdefault((request.topic, request.partition), request) != request:
                raise ValueError(f"{request.topic}-{request.partition} is asked for twice, differently")
        fetch = api("Fetch").request
        topics: dict[str, list] = {}
        for request in by_partition.values():
            topics.setdefault(request.topic, []).append(fetch.FetchPartition(
                partition=request.partition, fetch_offset=request.offset, partition_max_bytes=request.max_bytes))
        answer = self._call(
            "Fetch", replica_id=-1, max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1,
            max_bytes=sum(request.max_bytes for request in by_partition.values()), isolation_level=0, session_id=0,
            session_epoch=-1, topics=[fetch.FetchTopic(topic=topic, partitions=partitions)
                                      for topic, partitions in topics.items()],
            forgotten_topics_data=[], rack_id="")
        answered = {(topic.topic, partition.partition_index): partition
                    for topic in answer.responses for partition in topic.partitions}
        return [self._fetched(request, answered.get((request.topic, request.partition))) for request in requests]

    def get_offsets_before(self, topic: str, partition: int, time: int, max_num_offsets: int) -> list[int]:
        """Up to `max_num_offsets` valid offsets before `time` (ms), descending: the first offsets of the segments
        last written at or before it, and the log end (ListOffsets v0's old-style offsets). LATEST_TIME (-1) starts
        from the log end, EARLIEST_TIME (-2) gives the log start."""
        request = api("ListOffsets").request
        answer = self._call("ListOffsets", replica_id=-1, topics=[request.ListOffsetsTopic(
            name=topic, partitions=[request.ListOffsetsPartition(partition_index=partition, timestamp=time,
                                                                 max_num_offsets=max_num_offsets)])])
        found = next((p for t in answer.topics if t.name == topic for p in t.partitions
                      if p.partition_index == partition), None)
        error = _broker_error(found.error_code if found else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, topic, partition)
        if error is not None:
            raise error
        return list(found.old_style_offsets)

    def _fetched(self, request: FetchRequest, answer) -> FetchedMessages:
        error = _broker_error(answer.error_code if answer else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                              request.topic, request.partition)
        if error is not None:
            return FetchedMessages(request, [], error, answer.high_watermark if answer else -1)
        from odradek.records.arrow import batches_to_columns  # pyarrow: imported by the first fetch, not every command

        try:
            batches = [(header, batch) for header, batch in whole_batches(answer.records or b"")
                       if not header.is_control]
            columns = batches_to_columns(batches, include_headers=True, start=request.offset)
        except KafkaError as exc:
            return FetchedMessages(request, [], ClientError(f"{exc.code.name}: {request.topic}-{request.partition} "
                                                            f"at offset {request.offset}: {exc.message}",
                                                            exc.code.name), answer.high_watermark)
        messages = [
            Message(request.topic, request.partition, offset, self.key_decoder(key), self.value_decoder(value),
                    [(header["key"], header["value"]) for header in headers or ()], timestamp)
            for offset, timestamp, key, value, headers in zip(
                columns.offsets.tolist(), columns.timestamps.tolist(), columns.keys.to_pylist(),
                columns.values.to_pylist(), columns.headers.to_pylist())]
        return FetchedMessages(request, messages, None, answer.high_watermark)

    def _call(self, name: str, **fields):
        """One request to the consumer's broker over the direct connection (opened on first use, secured as the
        consumer's config says, and opened again once after it was lost)."""
        for attempt in (1, 2):
            try:
                if self._connection is None:
                    self._connection = self._connect()
                return self._connection.call(name, **fields)
            except (AuthenticationFailed, Unreachable, UnsupportedApi) as exc:
                if self._connection is not None:
                    self._connection.close()
                    self._connection = None
                if isinstance(exc, AuthenticationFailed):  # the same settings are refused again: not retried
                    raise ClientError(str(exc), "_AUTHENTICATION") from None
                if attempt == 2 or isinstance(exc, UnsupportedApi):
                    raise ClientError(str(exc), "_TRANSPORT", retriable=isinstance(exc, Unreachable)) from None

    def _connect(self) -> Connection:
        try:
            security = client_security(self._config)
        except ValueError as exc:
            raise ClientError(str(exc), "_INVALID_ARG") from None
        address = server_address(self._bootstrap_servers.split(",")[0])
        return Connection(address, OFFSET_TIMEOUT_S, "odradek-simple-consumer", VERSIONS, security)

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
        self._consumer.close()

    def __enter__(self) -> "SimpleConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _broker_error(code: int, topic: str, partition: int) -> ClientError | None:
    if code == ErrorCode.NONE:
        return None
    return ClientError(f"{error_name(code)}: {topic}-{partition}", error_name(code))
