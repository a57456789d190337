"""`odradek cluster up`: a whole cluster on 127.0.0.1 for development, in one command.

A ZooKeeper server and N `odradek serve` brokers (ids 1..N, odradek.embedded.Cluster), their addresses and log
files printed, all stopped together by Ctrl-C (or SIGTERM). The data lives in a temporary directory removed at exit
unless --data-dir keeps it (the same directory brings the same cluster back).
"""

from __future__ import annotations

import argparse
import signal
import threading
from pathlib import Path

from odradek.cli.common import key_value


def add_commands(commands) -> None:
    cluster = commands.add_parser("cluster", help="run a local ZooKeeper and brokers for development",
                                  description="A local development cluster.")
    actions = cluster.add_subparsers(dest="action", metavar="ACTION", required=True)
    up = actions.add_parser("up", help="start ZooKeeper and N brokers on 127.0.0.1; Ctrl-C stops them all",
                            description="Start a ZooKeeper server and N brokers on free 127.0.0.1 ports, print "
                                        "where they are, and stop them all at Ctrl-C.")
    up.add_argument("--brokers", type=int, default=3, help="how many brokers (default 3)")
    up.add_argument("--data-dir", type=Path,
                    help="keep ZooKeeper's and the brokers' data here (default: a temporary directory)")
    up.add_argument("--set", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                    help="a setting for every broker, repeatable (Kafka's names)")
    up.set_defaults(run=run_up)


def run_up(args: argparse.Namespace) -> int:
    from odradek.embedded import Cluster

    if args.brokers < 1:
        raise ValueError("--brokers must be at least 1")
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    cluster = Cluster(args.brokers, data_dir=args.data_dir, settings=dict(args.set))
    try:
        cluster.start()
        zookeeper = cluster.zookeeper_server
        print(f"zookeeper  {zookeeper.connect}  log {zookeeper.log_path}")
        for broker in cluster.brokers:
            print(f"broker {broker.node_id}   {broker.bootstrap_servers}  log {broker.log_path}")
        print(f"bootstrap.servers={cluster.bootstrap_servers}")
        print(f"zookeeper.connect={cluster.zookeeper_connect}")
        print("Ctrl-C stops them all.", flush=True)
        stopping.wait()
    finally:
        cluster.close()
    return 0
