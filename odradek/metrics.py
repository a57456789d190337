"""Prometheus metrics of one broker, served on `metrics.port` (0, the default, turns them off entirely).

Hot paths pay one cheap call each, never one per record: the network shell reports each request's API and latency
(`observe_request`), Produce each appended batch set (`record_produce`), Fetch each partition's answer
(`record_fetch`, which reads the header of each batch handed out, not its records). Everything that is a state
rather than an event (connections, log size per partition, consumer group lag, share groups' members, in-flight
records and lag, the log cleaner's gauges, and the process's own: the cyclic collector's collections, CPU, memory,
open files) is read from the broker only when Prometheus scrapes, by a collector. Each broker gets its own registry,
so several embedded brokers can run in one process.
"""

from __future__ import annotations

import logging
import os
import struct

from prometheus_client import CollectorRegistry, Counter, GCCollector, Histogram, ProcessCollector, start_http_server
from prometheus_client.core import GaugeMetricFamily

from odradek.protocol.registry import API_BY_KEY
from odradek.records.batch import BATCH_HEADER_SIZE, LOG_OVERHEAD
from odradek.records.region import FileRegion

log = logging.getLogger("odradek.metrics")

_LENGTH_AND_COUNT = struct.Struct(">q i 45x i")  # baseOffset, batchLength, ..., recordCount at byte 57


def records_in(records) -> int:
    """Records in a run of whole v2 batches (bytes or a FileRegion), from their headers alone."""
    if isinstance(records, FileRegion):
        read = lambda position: os.pread(records.fd, BATCH_HEADER_SIZE, records.position + position)  # noqa: E731
        length = records.length
    else:
        read = lambda position: records[position:position + BATCH_HEADER_SIZE]  # noqa: E731
        length = len(records)
    count = position = 0
    while position + BATCH_HEADER_SIZE <= length:
        _, batch_length, record_count = _LENGTH_AND_COUNT.unpack(read(position))
        count += record_count
        position += batch_length + LOG_OVERHEAD
    return count


class BrokerMetrics:
    def __init__(self, broker, port: int):
        self.broker = broker
        self.registry = CollectorRegistry()
        labels = {"registry": self.registry}
        self.bytes_in = Counter("odradek_topic_bytes_in", "Record batch bytes appended", ["topic"], **labels)
        self.messages_in = Counter("odradek_topic_messages_in", "Records appended", ["topic"], **labels)
        self.bytes_out = Counter("odradek_topic_bytes_out", "Record batch bytes sent to consumers", ["topic"],
                                 **labels)
        self.messages_out = Counter("odradek_topic_messages_out", "Records sent to consumers", ["topic"], **labels)
        self.requests = Counter("odradek_requests", "Requests answered", ["api"], **labels)
        self.request_seconds = Histogram("odradek_request_latency_seconds", "Time from a request's arrival to its "
                                         "answer being written", ["api"], **labels)
        self.registry.register(_StateCollector(broker))
        GCCollector(registry=self.registry)  # python_gc_*: a full collection (generation 2) pauses the event loop
        ProcessCollector(registry=self.registry)  # process_*: CPU seconds, resident memory, open files
        self._per_api: dict[int, tuple] = {}
        self._per_topic: dict[str, tuple] = {}
        self._server, _ = start_http_server(port, broker.host, registry=self.registry)
        self.port = self._server.server_port
        log.info("metrics on http://%s:%d/metrics", broker.host, self.port)

    def observe_request(self, api_key: int, seconds: float) -> None:
        children = self._per_api.get(api_key)
        if children is None:
            api = API_BY_KEY.get(api_key)
            name = api.name if api is not None else str(api_key)
            children = self._per_api[api_key] = (self.requests.labels(name), self.request_seconds.labels(name))
        children[0].inc()
        children[1].observe(seconds)

    def _topic(self, topic: str) -> tuple:
        children = self._per_topic.get(topic)
        if children is None:
            children = self._per_topic[topic] = (self.bytes_in.labels(topic), self.messages_in.labels(topic),
                                                 self.bytes_out.labels(topic), self.messages_out.labels(topic))
        return children

    def record_produce(self, topic: str, size: int, records: int) -> None:
        bytes_in, messages_in, _, _ = self._topic(topic)
        bytes_in.inc(size)
        messages_in.inc(records)

    def record_fetch(self, topic: str, records) -> None:
        """One partition's answer to a fetch: its record batches (bytes or a FileRegion)."""
        size = records.length if isinstance(records, FileRegion) else len(records)
        if size:
            _, _, bytes_out, messages_out = self._topic(topic)
            bytes_out.inc(size)
            messages_out.inc(records_in(records))

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


class _StateCollector:
    """Gauges read from the broker at scrape time."""

    def __init__(self, broker):
        self.broker = broker

    def collect(self):
        broker = self.broker
        connections = GaugeMetricFamily("odradek_connections", "Open client connections")
        connections.add_metric([], len(broker.server.connections) if broker.server is not None else 0)
        yield connections

        log_size = GaugeMetricFamily("odradek_log_size_bytes", "Bytes of a partition's log segments",
                                     labels=["topic", "partition"])
        for (topic, index), partition in list(broker.partitions.items()):
            log_size.add_metric([topic, str(index)], partition.log.size_bytes)
        yield log_size

        lag = GaugeMetricFamily("odradek_consumer_group_lag", "High watermark minus the group's committed offset",
                                labels=["group", "topic", "partition"])
        offsets = broker.group_coordinator.offsets
        for group_id in offsets.group_ids():
            for (topic, index), committed in offsets.of_group(group_id).items():
                partition = broker.partitions.get((topic, index))
                if partition is not None:
                    lag.add_metric([group_id, topic, str(index)], max(0, partition.high_watermark - committed.offset))
        yield lag

        yield from _share_group_gauges(broker, broker.share_coordinator)

        for name, value in broker.cleaner.metrics().items():
            gauge = GaugeMetricFamily("odradek_log_cleaner_" + name.replace("-", "_"), f"Log cleaner {name}")
            gauge.add_metric([], value)
            yield gauge


def _share_group_gauges(broker, share):
    """Share groups (KIP-932): members per group, and per share-partition its in-flight records by state and its lag
    (records from the start offset to the high watermark not yet acknowledged or archived)."""
    members = GaugeMetricFamily("odradek_share_group_members", "Members of a share group", labels=["group"])
    for group_id, group in list(share.groups.items()):
        members.add_metric([group_id], len(group.members))
    yield members
    records = GaugeMetricFamily("odradek_share_partition_records", "Records in a share-partition's in-flight window",
                                labels=["group", "topic", "partition", "state"])
    lag = GaugeMetricFamily("odradek_share_partition_lag", "Records of a share-partition not yet delivered for good",
                            labels=["group", "topic", "partition"])
    names = {topic.topic_id: name for name, topic in broker.metadata.topics.items()}
    for group_id, topic_id, index, start, counts in share.partition_views():
        topic = names.get(topic_id)
        partition = broker.partitions.get((topic, index))
        if partition is None:
            continue
        for state, count in counts.items():
            records.add_metric([group_id, topic, str(index), state], count)
        done = counts["acknowledged"] + counts["archived"]
        lag.add_metric([group_id, topic, str(index)], max(0, partition.high_watermark - start - done))
    yield records
    yield lag
