"""`odradek cluster up`: a whole cluster on 127.0.0.1 for development, in one command.

A ZooKeeper server and N `odradek serve` brokers (ids 1..N, odradek.embedded.Cluster), their addresses and log
files printed, with the exact `odradek serve` line that restarts each broker by hand, all stopped together by
Ctrl-C (or SIGTERM). A broker that dies meanwhile is said at once, with its exit code and log. The data lives in a
temporary directory removed at exit unless --data-dir keeps it: the same directory brings the same cluster back on
the same ports (kept in its ports.json), so clients and restart lines written down before still work.
"""

from __future__ import annotations

import argparse
import json
import shlex
import signal
import sys
import threading
from pathlib import Path

from odradek.cli.common import key_value

PORTS_FILE = "ports.json"
WATCH_INTERVAL_S = 0.5  # how often the brokers' processes are looked at


def add_commands(commands) -> None:
    cluster = commands.add_parser("cluster", help="run a local ZooKeeper and brokers for development",
                                  description="A local development cluster.")
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start ZooKeeper and N brokers on 127.0.0.1; Ctrl-C stops them all",
                            description="Start a ZooKeeper server and N brokers on free 127.0.0.1 ports (the same "
                                        "ones again on the same --data-dir), print where they are, and stop them "
                                        "all at Ctrl-C.")
    up.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    up.add_argument("--data-dir", type=Path,
                    help="keep ZooKeeper's and the brokers' data, and their ports, here (default: a temporary "
                         "directory)")
    up.add_argument("--set", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for every broker, repeatable (Kafka's names)")
    up.set_defaults(run=run_up)


def serve_line(broker) -> str:
    """The `odradek serve` command that runs this broker by hand, with exactly the settings `cluster up` gave it."""
    return shlex.join(["odradek", *broker.command()[3:]])


def _reuse_ports(cluster, data_dir: Path | None) -> None:
    """The ports of the last run on this data directory, for ZooKeeper and each broker it had."""
    saved = data_dir / PORTS_FILE if data_dir is not None else None
    if saved is None or not saved.exists():
        return
    ports = json.loads(saved.read_text())
    cluster.zookeeper_server.port = ports["zookeeper"]
    for broker in cluster.brokers:
        broker.port = ports["brokers"].get(str(broker.node_id), 0)
        broker.settings["zookeeper.connect"] = cluster.zookeeper_connect


def _save_ports(cluster, data_dir: Path | None) -> None:
    if data_dir is not None:
        (data_dir / PORTS_FILE).write_text(json.dumps({
            "zookeeper": cluster.zookeeper_server.port,
            "brokers": {str(broker.node_id): broker.port for broker in cluster.brokers}}) + "\n")


def run_up(args: argparse.Namespace) -> int:
    from odradek.embedded import Cluster

    if args.brokers < 1:
        raise ValueError("--brokers must be at least 1")
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    cluster = Cluster(args.brokers, data_dir=args.data_dir, settings=dict(args.set))
    _reuse_ports(cluster, args.data_dir)
    try:
        cluster.start()
        _save_ports(cluster, args.data_dir)
        zookeeper = cluster.zookeeper_server
        print(f"zookeeper  {zookeeper.connect}  log {zookeeper.log_path}")
        for broker in cluster.brokers:
            print(f"broker {broker.node_id}   {broker.bootstrap_servers}  log {broker.log_path}")
        print(f"bootstrap.servers={cluster.bootstrap_servers}")
        print(f"zookeeper.connect={cluster.zookeeper_connect}")
        print("To restart one broker by hand (after it stopped), with exactly its settings:")
        for broker in cluster.brokers:
            print(f"  {serve_line(broker)}")
        print("Ctrl-C stops them all.", flush=True)
        _watch(cluster, stopping)
    finally:
        cluster.close()
    return 0


def _watch(cluster, stopping: threading.Event) -> None:
    """Until Ctrl-C: say when a broker's process ends by itself (once per death)."""
    said: set[int] = set()
    while not stopping.wait(WATCH_INTERVAL_S):
        for broker in cluster.brokers:
            code = broker.process.poll() if broker.process is not None else None
            if code is not None and broker.node_id not in said:
                said.add(broker.node_id)
                print(f"odradek: broker {broker.node_id} ({broker.bootstrap_servers}) died with exit code {code}; "
                      f"see {broker.log_path}", file=sys.stderr, flush=True)
