"""A consumer process for the ZooKeeper group tests: one ConsumerConnector through zookeeper.connect, one stream over
the topic, every message handed out written as `topic partition offset` to a file, offsets committed after the
file is flushed (at least once: a kill -9 never commits what was not written); SIGTERM shuts it down cleanly.

    python -m tests.client.zk_member ZK_CONNECT GROUP TOPIC OUTPUT [--storage zookeeper|kafka] [--dual]
"""

from __future__ import annotations

import argparse
import signal
import threading

from odradek.client import ConsumerConnector


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("zookeeper"), parser.add_argument("group"), parser.add_argument("topic")
    parser.add_argument("output")
    parser.add_argument("--storage", default="zookeeper")
    parser.add_argument("--dual", action="store_true")
    args = parser.parse_args()
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stopping.set())
    connector = ConsumerConnector(None, args.group, zookeeper_connect=args.zookeeper, consumer_timeout_ms=100,
                                  offsets_storage=args.storage, dual_commit_enabled=args.dual)
    [stream] = connector.create_message_streams({args.topic: 1})[args.topic]
    with open(args.output, "a") as output:
        while not stopping.is_set():
            for message in stream:
                output.write(f"{message.topic} {message.partition} {message.offset}\n")
            output.flush()
            connector.commit_offsets()
    connector.shutdown()


if __name__ == "__main__":
    main()
