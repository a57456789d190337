"""SimpleConsumer: read one partition from any offset, and find offsets by time, with no group involved.

A thin wrapper over a confluent-kafka Consumer used only through `assign` (no group join, no commits): each
`fetch` assigns the partition at the asked offset and returns what arrives first, up to `max_messages`.
With `zk_connect` instead of `bootstrap_servers` the partition's leader is found through ZooKeeper (its state
znode and /brokers/ids) and the consumer connects to it (`leader` says which broker that is).
"""

from __future__ import annotations

from typing import Any

import confluent_kafka

from odradek.client.errors import LIBRDKAFKA_LOGGER, ClientError
from odradek.client.messages import Decoder, Message, identity

OFFSET_TIMEOUT_S = 10.0


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
            bootstrap_servers = f"{self.leader.host}:{self.leader.port}"
        self.topic = topic
        self.partition = partition
        self.key_decoder = key_decoder
        self.value_decoder = value_decoder
        self._consumer = confluent_kafka.Consumer({
            "bootstrap.servers": bootstrap_servers, "group.id": "odradek-simple-consumer",
            "enable.auto.commit": False, "enable.partition.eof": False, "logger": LIBRDKAFKA_LOGGER, **(config or {})})

    def _partition(self, offset: int) -> confluent_kafka.TopicPartition:
        return confluent_kafka.TopicPartition(self.topic, self.partition, offset)

    def fetch(self, offset: int, max_messages: int = 500, timeout: float = 1.0) -> list[Message]:
        """Messages from `offset` on: waits up to `timeout` for the first, then takes what is already buffered."""
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

    def close(self) -> None:
        self._consumer.close()

    def __enter__(self) -> "SimpleConsumer":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
