"""A task's read of one offset range: Fetch requests straight to the partition's leader, answers decoded to Arrow.

confluent-kafka hands a consumer one Python object per message, and turning those into columns cost more than the
rest of a Spark read together. So a task speaks Kafka itself with odradek.protocol's codec over one connection,
secured as the kafka.* options say (TLS, SASL PLAIN or SCRAM: odradek.security.client; a refused login fails the
task at once with the broker's message): ApiVersions to agree on versions (Fetch 4-12, ListOffsets 2-7, Metadata
1-12: every Kafka from 2.4 to 4.x serves them, and so does Odradek), Metadata to find the leader, ListOffsets for the
data-loss checks, then one Fetch after another, the next already sent while the previous answer is decoded by
odradek.records.arrow into one Arrow batch. What reaches Spark is what Kafka's consumer would deliver: control
batches (transaction markers) never, aborted transactions not under kafka.isolation.level=read_committed (the
default is read_uncommitted, the Java consumer's and so Spark's own Kafka source's), offsets compacted away skipped.
A moved leader or a dropped connection is retried until kafkaConsumer.pollTimeoutMs passes without progress.
"""

from __future__ import annotations

import itertools
import time
from typing import Iterator

import pyarrow as pa

from odradek.client.connection import AuthenticationFailed, Connection, Unreachable, UnsupportedApi, server_address
from odradek.errors import ErrorCode, KafkaError, error_name
from odradek.protocol import api
from odradek.records.arrow import HEADERS_TYPE, RecordColumns, batches_to_columns
from odradek.records.batch import committed_batches, whole_batches
from odradek.security.client import client_security
from odradek.spark.kafka_io import BrokerUnavailableError, DataLossError, OffsetRange, TopicNotFoundError

RECORD_FIELDS = [
    pa.field("key", pa.binary()),
    pa.field("value", pa.binary()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.timestamp("us", tz="UTC")),
    pa.field("timestampType", pa.int32()),
]
RECORD_SCHEMA = pa.schema(RECORD_FIELDS)
RECORD_SCHEMA_WITH_HEADERS = pa.schema(RECORD_FIELDS + [pa.field("headers", HEADERS_TYPE)])

VERSIONS = {"ApiVersions": (0, 0), "Metadata": (1, 12), "ListOffsets": (2, 7), "Fetch": (4, 12)}
FETCH_BYTES = 8 << 20  # record data per answer, so per Arrow batch
FETCH_MAX_WAIT_MS = 500  # the range's records exist, so the broker only waits when they are not yet readable
RETRY_BACKOFF_S = 0.2
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1
READ_UNCOMMITTED, READ_COMMITTED = 0, 1
LEADER_MOVED = {ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
                ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.KAFKA_STORAGE_ERROR,
                ErrorCode.BROKER_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION,
                ErrorCode.OFFSET_NOT_AVAILABLE}
UNKNOWN_PARTITION = {ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNKNOWN_TOPIC_ID}


def read_range(client_config: dict[str, str], offset_range: OffsetRange, *, include_headers: bool,
               fail_on_data_loss: bool, poll_timeout_s: float) -> Iterator[pa.RecordBatch]:
    """Arrow record batches holding the records of one offset range, in offset order.

    Offsets missing inside the range (compacted away, transaction markers) are skipped; a range whose start was
    deleted by retention, or whose end is beyond the log, is data loss: an error, or with failOnDataLoss=false the
    records still present are returned.
    """
    if offset_range.size <= 0:
        return
    reader = PartitionReader(client_config, offset_range, poll_timeout_s)
    try:
        yield from reader.batches(include_headers, fail_on_data_loss)
    finally:
        reader.close()


class PartitionReader:
    """The leader connection of one offset range, found again whenever it is lost, and the Fetch loop over it."""

    def __init__(self, client_config: dict[str, str], offset_range: OffsetRange, poll_timeout_s: float):
        self.range = offset_range
        self.bootstrap = client_config["bootstrap.servers"]
        self.addresses = [server_address(server) for server in self.bootstrap.split(",") if server.strip()]
        self.client_id = client_config.get("client.id", "odradek-spark-source")
        self.security = client_security(client_config)
        committed = client_config.get("isolation.level", "read_uncommitted").strip().lower() == "read_committed"
        self.isolation_level = READ_COMMITTED if committed else READ_UNCOMMITTED
        self.poll_timeout_s = poll_timeout_s
        self.connection: Connection | None = None
        self.deadline = time.monotonic() + poll_timeout_s

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None

    def batches(self, include_headers: bool, fail_on_data_loss: bool) -> Iterator[pa.RecordBatch]:
        topic, partition = self.range.topic, self.range.partition
        start, end = self.range.start, self.range.end
        earliest, latest = self.list_offset(EARLIEST_TIMESTAMP, start), self.list_offset(LATEST_TIMESTAMP, start)
        if start < earliest:
            _data_loss(fail_on_data_loss, f"offsets {start}..{earliest - 1} of {topic}-{partition} were deleted "
                                          "before they could be read")
            start = earliest
        if end > latest:
            _data_loss(fail_on_data_loss, f"{topic}-{partition} ends at {latest}, before the planned end {end} "
                                          "(truncated or recreated)")
            end = latest
        offset = start
        in_flight = False
        while offset < end:
            try:
                if not in_flight:
                    self.send_fetch(offset)
                answer = self.receive_fetch()
            except Unreachable as exc:
                self.retry_later(offset, str(exc))
                in_flight = False
                continue
            in_flight = False
            error = answer.error_code
            if error == ErrorCode.OFFSET_OUT_OF_RANGE:
                if fail_on_data_loss:
                    raise DataLossError(f"failOnDataLoss: {self._where(offset)} is out of range (deleted by "
                                        "retention); set failOnDataLoss=false to read what is left")
                earliest = self.list_offset(EARLIEST_TIMESTAMP, offset)
                if earliest <= offset:
                    return  # the log now ends before the range does
                offset = earliest
                continue
            if error in LEADER_MOVED:
                self.retry_later(offset, error_name(error))
                continue
            if error in UNKNOWN_PARTITION:
                raise TopicNotFoundError(f"{self._where(offset)}: {error_name(error)}")
            if error != ErrorCode.NONE:
                raise BrokerUnavailableError(f"reading {self._where(offset)}: {error_name(error)}")
            batches = self.in_context(offset, whole_batches, answer.records or b"")
            if not batches:
                readable_end = answer.last_stable_offset if self.isolation_level else answer.high_watermark
                if 0 <= readable_end <= offset:
                    _data_loss(fail_on_data_loss, f"{topic}-{partition} ends at {readable_end}, before the planned "
                                                  f"end {end} (truncated or recreated)")
                    return
                self.retry_later(offset, "no records in the answer")
                continue
            self.deadline = time.monotonic() + self.poll_timeout_s
            fetched_to = batches[-1][0].last_offset + 1
            if fetched_to < end:
                try:
                    self.send_fetch(fetched_to)  # the broker reads the next answer while this one is decoded
                    in_flight = True
                except Unreachable:
                    self.close()  # the next turn connects again
            wanted = self.in_context(offset, self.delivered, batches, answer.aborted_transactions, end)
            columns = self.in_context(offset, batches_to_columns, wanted, include_headers=include_headers,
                                      start=offset, end=end)
            if len(columns.offsets):
                yield to_arrow(columns, topic, partition, include_headers)
            offset = fetched_to

    def in_context(self, offset: int, decode, *args, **kwargs):
        """decode(*args, **kwargs), with the partition and offset added to a CORRUPT_MESSAGE it raises."""
        try:
            return decode(*args, **kwargs)
        except KafkaError as exc:
            raise KafkaError(exc.code, f"{self._where(offset)}: {exc.message}") from None

    def delivered(self, batches, aborted_transactions, end: int) -> list:
        """The batches a consumer sees, before `end`: no control batches and, under read_committed, none of an
        aborted transaction (the answer lists each one's producer and first offset: records.batch.committed_batches)."""
        before_end = itertools.takewhile(lambda item: item[0].base_offset < end, batches)
        if self.isolation_level == READ_COMMITTED:
            return list(committed_batches(before_end, aborted_transactions or ()))
        return [(header, batch) for header, batch in before_end if not header.is_control]

    def send_fetch(self, offset: int) -> None:
        fetch = api("Fetch").request
        self.leader().send(
            "Fetch", replica_id=-1, max_wait_ms=FETCH_MAX_WAIT_MS, min_bytes=1, max_bytes=FETCH_BYTES,
            isolation_level=self.isolation_level, session_id=0, session_epoch=-1,
            topics=[fetch.FetchTopic(topic=self.range.topic, partitions=[fetch.FetchPartition(
                partition=self.range.partition, fetch_offset=offset, partition_max_bytes=FETCH_BYTES)])],
            forgotten_topics_data=[], rack_id="")

    def receive_fetch(self):
        """The partition's part of the oldest Fetch answer."""
        return self._only_partition(self.leader().receive().responses)

    def list_offset(self, timestamp: int, offset: int) -> int:
        """The earliest (-2) or latest (-1, the last stable offset under read_committed) offset of the partition."""
        request = api("ListOffsets").request
        while True:
            try:
                answer = self._only_partition(self.leader().call(
                    "ListOffsets", replica_id=-1, isolation_level=self.isolation_level,
                    topics=[request.ListOffsetsTopic(name=self.range.topic, partitions=[request.ListOffsetsPartition(
                        partition_index=self.range.partition, timestamp=timestamp)])]).topics)
            except Unreachable as exc:
                self.retry_later(offset, str(exc))
                continue
            error = answer.error_code
            if error == ErrorCode.NONE:
                return answer.offset
            if error in UNKNOWN_PARTITION:
                raise TopicNotFoundError(f"{self._where(offset)}: {error_name(error)}")
            if error not in LEADER_MOVED:
                raise BrokerUnavailableError(f"reading offsets of {self._where(offset)}: {error_name(error)}")
            self.retry_later(offset, error_name(error))

    def leader(self) -> Connection:
        """The connection to the partition's leader, found through the bootstrap servers if there is none."""
        if self.connection is not None:
            return self.connection
        causes = []
        for address in self.addresses:
            try:
                bootstrap = self._connect(address)
            except Unreachable as exc:
                causes.append(str(exc))
                continue
            try:
                leader_address = self._leader_address(bootstrap)
            except BaseException:
                bootstrap.close()
                raise
            if leader_address == address:
                self.connection = bootstrap
            else:
                bootstrap.close()
                self.connection = self._connect(leader_address)
            return self.connection
        raise Unreachable("; ".join(causes))

    def retry_later(self, offset: int, cause: str) -> None:
        """Drop the connection and wait a little before the next attempt; give up once pollTimeoutMs has passed
        without progress."""
        self.close()
        if time.monotonic() >= self.deadline:
            raise BrokerUnavailableError(f"kafkaConsumer.pollTimeoutMs: no records from {self._where(offset)} for "
                                         f"{self.poll_timeout_s:.0f}s (kafka.bootstrap.servers={self.bootstrap}; "
                                         f"last: {cause})")
        time.sleep(min(RETRY_BACKOFF_S, max(0.0, self.deadline - time.monotonic())))

    def _connect(self, address: tuple[str, int]) -> Connection:
        try:
            return Connection(address, self._attempt_timeout(), self.client_id, VERSIONS, self.security)
        except UnsupportedApi as exc:
            raise BrokerUnavailableError(f"{exc}, which the odradek source reads with") from None
        except AuthenticationFailed as exc:
            raise BrokerUnavailableError(f"kafka.bootstrap.servers={self.bootstrap}: could not log in: {exc}") from None

    def _leader_address(self, connection: Connection) -> tuple[str, int]:
        request = api("Metadata").request
        answer = connection.call("Metadata", topics=[request.MetadataRequestTopic(name=self.range.topic)],
                                 allow_auto_topic_creation=False)
        topic = next((t for t in answer.topics if t.name == self.range.topic), None)
        error = topic.error_code if topic is not None else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        partition = next((p for p in topic.partitions if p.partition_index == self.range.partition), None) \
            if error == ErrorCode.NONE else None
        if error in UNKNOWN_PARTITION or (error == ErrorCode.NONE and partition is None):
            raise TopicNotFoundError(f"{self.range.topic}-{self.range.partition}: no such partition on "
                                     f"{self.bootstrap}")
        broker = next((b for b in answer.brokers if partition is not None and b.node_id == partition.leader_id), None)
        if broker is None:
            raise Unreachable(f"no leader for {self.range.topic}-{self.range.partition} "
                              f"({error_name(error) if error != ErrorCode.NONE else 'leader not known'})")
        return broker.host, broker.port

    def _only_partition(self, topics):
        for topic in topics:
            for partition in topic.partitions:
                if partition.partition_index == self.range.partition:
                    return partition
        raise Unreachable(f"the answer for {self.range.topic} has no partition {self.range.partition}")

    def _attempt_timeout(self) -> float:
        return max(1.0, self.deadline - time.monotonic())

    def _where(self, offset: int) -> str:
        return f"{self.range.topic}-{self.range.partition} at offset {offset}"


def to_arrow(columns: RecordColumns, topic: str, partition: int, include_headers: bool) -> pa.RecordBatch:
    """One Arrow batch in the source's schema from decoded records of one partition."""
    count = len(columns.offsets)
    arrays = [
        columns.keys,
        columns.values,
        pa.repeat(pa.scalar(topic, pa.string()), count),
        pa.repeat(pa.scalar(partition, pa.int32()), count),
        pa.array(columns.offsets, pa.int64()),
        pa.array(columns.timestamps * 1000, pa.timestamp("us", tz="UTC")),
        pa.array(columns.timestamp_types, pa.int32()),
    ]
    if include_headers:
        return pa.RecordBatch.from_arrays(arrays + [columns.headers], schema=RECORD_SCHEMA_WITH_HEADERS)
    return pa.RecordBatch.from_arrays(arrays, schema=RECORD_SCHEMA)


def _data_loss(fail_on_data_loss: bool, what: str) -> None:
    if fail_on_data_loss:
        raise DataLossError(f"failOnDataLoss: {what}; set failOnDataLoss=false to read what is left")
