"""`odradek zk ls|get PATH`: look inside the cluster's ZooKeeper, as Kafka's zookeeper-shell does; `odradek zk
set-acls --zookeeper.acl secure|unsecure`: set every znode's ACL as brokers with zookeeper.set.acl=true (or false)
would have created it, as Kafka's zookeeper-security-migration does.

The --zookeeper option (HOST:PORT[/chroot], default $ODRADEK_ZOOKEEPER or 127.0.0.1:2181) is shared with `odradek
brokers list --zookeeper`; both open odradek.cluster.zookeeper's zookeeper_client, as the console does. The client
logs in as Kafka's tools do: the JAAS file's Client section named by -Djava.security.auth.login.config in
$KAFKA_OPTS, and TLS from --zk-tls-config-file (zookeeper.ssl.* settings, as Kafka's tools take them);
odradek/cluster/zk_security.py reads both. ls and get change nothing;
set-acls changes ACLs only, under the chroot (with none, everything but ZooKeeper's own /zookeeper and the root).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

DEFAULT_ZOOKEEPER = "127.0.0.1:2181"


def add_zookeeper_option(parser: argparse.ArgumentParser, default: str | None = DEFAULT_ZOOKEEPER) -> None:
    fallback = os.environ.get("ODRADEK_ZOOKEEPER", default) if default else None
    parser.add_argument("--zookeeper", "-z", default=fallback, metavar="HOST:PORT[/chroot]",
                        help="the cluster's ZooKeeper (zookeeper.connect)"
                             + (f"; default $ODRADEK_ZOOKEEPER or {default}" if default else ""))


def add_tls_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--zk-tls-config-file", type=Path, metavar="FILE",
                        help="properties file with zookeeper.ssl.* settings for TLS to ZooKeeper")


def add_commands(commands) -> None:
    zk = commands.add_parser("zk", help="look inside the cluster's ZooKeeper (ls, get) or set its ACLs (set-acls)",
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
    acls = actions.add_parser("set-acls", help="secure or open every znode's ACL (zookeeper-security-migration)",
                              description="Set the ACL of every znode under the chroot to what brokers with "
                                          "zookeeper.set.acl=true (secure) or false (unsecure) create.")
    acls.add_argument("--zookeeper.acl", dest="acl", required=True, choices=("secure", "unsecure"),
                      help="secure: writable only by the brokers' identity (SCRAM credentials and broker configs "
                           "readable only by it); unsecure: open to everyone again")
    add_zookeeper_option(acls)
    add_tls_option(acls)
    acls.set_defaults(run=run_set_acls)


def run_ls(args: argparse.Namespace) -> int:
    from kazoo.exceptions import NoNodeError

    from odradek.cluster.zookeeper import in_order, zookeeper_client

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

    from odradek.cluster.zookeeper import zookeeper_client

    with zookeeper_client(args.zookeeper) as client:
        try:
            data = client.get(args.path)[0]
        except NoNodeError:
            raise ValueError(f"no znode {args.path} in ZooKeeper {args.zookeeper}") from None
    print(data.decode(errors="backslashreplace") if data else "")
    return 0


def run_set_acls(args: argparse.Namespace) -> int:
    """Walk the tree from the top (the chroot), parents before children, as ZkSecurityMigrator does."""
    from odradek.cli.common import properties_file
    from odradek.cluster.zookeeper import split_connect_string, zookeeper_client

    chrooted = bool(split_connect_string(args.zookeeper)[1])
    settings = {**properties_file(args.zk_tls_config_file), "zookeeper.set.acl": args.acl == "secure"}
    with zookeeper_client(args.zookeeper, settings=settings) as client:
        paths = ["/"]
        count = 0
        while paths:
            path = paths.pop()
            if path == "/zookeeper" and not chrooted:
                continue  # ZooKeeper's own quota and config nodes
            if path != "/" or chrooted:
                client.set_acls(path, client.security.acl_for(path))
                count += 1
            paths.extend(f"{path.rstrip('/')}/{child}" for child in client.get_children(path))
    print(f"set {args.acl} ACLs on {count} znodes")
    return 0
