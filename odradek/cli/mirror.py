"""`odradek mirror`: copy every topic whose name matches a regex from one cluster to another, continuously.

Built as the design's MirrorMaker: a ConsumerConnector on the source (a group, with a Whitelist filter, so topics
created later are picked up) feeding a Producer on the target. Keys, values, headers and timestamps are kept; a
record goes to the same partition number when the target topic has that many partitions (else it is partitioned
by key); a missing target topic is created with the source's partition count and its settings (the topic's own
configs, as MirrorMaker 2 copies them). Progress is committed in the
source group only after the target acknowledged everything before it, so a restarted mirror resumes where the
last one committed and never loses a record (at-least-once: it may copy a few again). --command-config is the
source's client properties, --target-command-config the target's.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from concurrent.futures import Future
from pathlib import Path

from odradek.cli.common import add_admin_options, command_config, properties_file
from odradek.client import Admin, ClientError, ConsumerConnector, Message, Producer, Whitelist
from odradek.client.properties import librdkafka_settings


def add_commands(commands) -> None:
    mirror = commands.add_parser("mirror", help="copy topics matching a regex to another cluster",
                                 description="Copy topics whose whole name matches --topics from the source "
                                             "cluster (--bootstrap-server) to --target, resuming from offsets "
                                             "committed in --group on the source.")
    mirror.add_argument("--target", required=True, metavar="HOST:PORT", help="the target cluster")
    mirror.add_argument("--topics", required=True, metavar="REGEX", help="topics to copy (a regex, whole name)")
    mirror.add_argument("--group", default="odradek-mirror",
                        help="source group that holds the mirror's progress (default odradek-mirror)")
    mirror.add_argument("--commit-interval-ms", type=int, default=1000,
                        help="how often progress is committed (default 1000)")
    mirror.add_argument("--idle-timeout-ms", type=int, metavar="MS",
                        help="stop once nothing new arrived for this long, counted from when every source "
                             "partition was read to its end (default: run until stopped)")
    mirror.add_argument("--target-command-config", type=Path, metavar="FILE",
                        help="Kafka client properties for the target cluster (--command-config is the source's)")
    add_admin_options(mirror)
    mirror.set_defaults(run=run_mirror)


class Mirror:
    def __init__(self, source: str, target: str, topics: str, group: str, commit_interval_ms: int,
                 admin_timeout: float, source_config: dict[str, str] | None = None,
                 target_config: dict[str, str] | None = None):
        """source_config, target_config: librdkafka settings for each side's secured listener."""
        self.source_admin = Admin(source, admin_timeout, source_config)
        self.target_admin = Admin(target, admin_timeout, target_config)
        self.connector = ConsumerConnector(source, group, consumer_timeout_ms=commit_interval_ms,
                                           topic_refresh_ms=commit_interval_ms, config=source_config)
        self.producer = Producer(target, config=target_config)
        self.topics = Whitelist(topics)
        self.commit_interval_ms = commit_interval_ms
        self.copied = 0
        self.stopping = False
        self._target_partitions: dict[str, int] = {}
        self._unconfirmed: list[Future] = []

    def run(self, idle_timeout_ms: int | None = None) -> int:
        """Copy until stopped (or idle that long); returns the records copied."""
        [stream] = self.connector.create_message_streams_by_filter(self.topics, 1)
        last_arrival = time.monotonic()
        try:
            while not self.stopping:
                next_commit = time.monotonic() + self.commit_interval_ms / 1000
                copied_before = self.copied
                for message in stream:
                    self.copy(message)
                    if self.stopping or time.monotonic() >= next_commit:
                        break
                self.commit()
                # a round that copied, or a consumer still joining the source group or reading what it has, is
                # not idle; idleness counts from after the commit, which over a slow link can take longer than the
                # idle timeout while the stream holds records already fetched
                if self.copied > copied_before or not self.connector.caught_up:
                    last_arrival = time.monotonic()
                elif idle_timeout_ms is not None and time.monotonic() - last_arrival >= idle_timeout_ms / 1000:
                    break
        finally:
            self.connector.shutdown()
            self.producer.close()
        return self.copied

    def copy(self, message: Message) -> None:
        partitions = self.target_partition_count(message.topic)
        partition = message.partition if message.partition < partitions else None
        self._unconfirmed.append(self.producer.send(message.topic, message.value, message.key, partition=partition,
                                                    headers=message.headers, timestamp_ms=message.timestamp_ms))
        self.copied += 1

    def target_partition_count(self, topic: str) -> int:
        count = self._target_partitions.get(topic)
        if count is None:
            count = self.target_admin.partition_count(topic)
            if count is None:
                count = self.source_admin.partition_count(topic) or 1
                try:
                    self.target_admin.create_topic(topic, count, configs=self.source_admin.topic_configs(topic))
                except ClientError as exc:
                    if exc.name != "TOPIC_ALREADY_EXISTS":
                        raise
                count = self.producer.partition_count(topic)
            self._target_partitions[topic] = count
        return count

    def commit(self) -> None:
        """Commit the source offsets of everything copied so far, once the target has confirmed all of it."""
        self.producer.flush()
        failed = [future.exception() for future in self._unconfirmed if future.exception() is not None]
        if failed:
            raise ClientError(f"{len(failed)} record(s) could not be written to the target; first: {failed[0]}")
        self._unconfirmed = []
        self.connector.commit_offsets()


def run_mirror(args: argparse.Namespace) -> int:
    mirror = Mirror(args.bootstrap_server, args.target, args.topics, args.group, args.commit_interval_ms,
                    args.timeout, command_config(args),
                    librdkafka_settings(properties_file(args.target_command_config)))

    def stop(*_):
        mirror.stopping = True

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, stop)
    copied = mirror.run(args.idle_timeout_ms)
    print(f"Mirrored {copied} record(s).", file=sys.stderr)
    return 0
