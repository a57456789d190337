"""`odradek zk ls|get PATH`: look inside the cluster's ZooKeeper, as Kafka's zookeeper-shell does.

The --zookeeper option (HOST:PORT[/chroot], default $ODRADEK_ZOOKEEPER or 127.0.0.1:2181) and the client it opens
are shared with `odradek brokers list --zookeeper`. Read-only: nothing here creates or changes a znode.
"""

from __future__ import annotations

import argparse
import contextlib
import os

DEFAULT_ZOOKEEPER = "127.0.0.1:2181"


def add_zookeeper_option(parser: argparse.ArgumentParser, default: str | None = DEFAULT_ZOOKEEPER) -> None:
    fallback = os.environ.get("ODRADEK_ZOOKEEPER", default) if default else None
    parser.add_argument("--zookeeper", "-z", default=fallback, metavar="HOST:PORT[/chroot]",
                        help="the cluster's ZooKeeper (zookeeper.connect)"
                             + (f"; default $ODRADEK_ZOOKEEPER or {default}" if default else ""))


@contextlib.contextmanager
def zookeeper_client(connect: str, timeout_s: float = 10.0):
    """A kazoo client inside the chroot, closed at exit; the chroot is never created here."""
    from odradek.cluster.zookeeper import connect_client

    client = connect_client(connect, 10_000, int(timeout_s * 1000), make_chroot=False)
    try:
        yield client
    finally:
        client.stop()
        client.close()


def in_order(children: list[str]) -> list[str]:
    """Znode names sorted, numeric ones (broker ids, sequence numbers) by value and first."""
    return sorted(children, key=lambda name: (not name.isdigit(), int(name) if name.isdigit() else name))


def add_commands(commands) -> None:
    zk = commands.add_parser("zk", help="look inside the cluster's ZooKeeper (ls, get)",
                             description="Read the cluster's znodes (docs/zookeeper-layout.md), as zookeeper-shell.")
    actions = zk.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("ls", help="a znode's children", description="List a znode's children, sorted.")
    listing.add_argument("path", nargs="?", default="/")
    add_zookeeper_option(listing)
    listing.set_defaults(run=run_ls)
    get = actions.add_parser("get", help="a znode's data", description="Print a znode's data.")
    get.add_argument("path")
    add_zookeeper_option(get)
    get.set_defaults(run=run_get)


def run_ls(args: argparse.Namespace) -> int:
    from kazoo.exceptions import NoNodeError

    with zookeeper_client(args.zookeeper) as client:
        try:
            children = client.get_children(args.path)
        except NoNodeError:
            raise ValueError(f"no znode {args.path} in ZooKeeper {args.zookeeper}") from None
    for child in in_order(children):
        print(child)
    return 0


def run_get(args: argparse.Namespace) -> int:
    from kazoo.exceptions import NoNodeError

    with zookeeper_client(args.zookeeper) as client:
        try:
            data = client.get(args.path)[0]
        except NoNodeError:
            raise ValueError(f"no znode {args.path} in ZooKeeper {args.zookeeper}") from None
    print(data.decode(errors="backslashreplace") if data else "")
    return 0
