"""`odradek brokers list`: the cluster's live brokers and its controller.

Asked of a broker by default (DescribeCluster: what clients see), or read from ZooKeeper's registry with
--zookeeper (what the brokers registered), both shown the same way.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import add_admin_options, admin_of, print_table
from odradek.cli.zk import add_zookeeper_option


def add_commands(commands) -> None:
    brokers = commands.add_parser("brokers", help="list the cluster's live brokers and its controller",
                                  description="The cluster's brokers.")
    actions = brokers.add_subparsers(dest="action", metavar="ACTION", required=True)
    listing = actions.add_parser("list", help="live brokers, their addresses and racks, and the controller",
                                 description="List the live brokers and mark the controller: asked of a broker, or "
                                             "read from ZooKeeper's /brokers/ids with --zookeeper.")
    add_admin_options(listing)
    add_zookeeper_option(listing, default=None)
    listing.set_defaults(run=run_list)


def run_list(args: argparse.Namespace) -> int:
    if args.zookeeper:
        from odradek.cluster.zookeeper import read_cluster, zookeeper_client

        with zookeeper_client(args.zookeeper, args.timeout) as client:
            info = read_cluster(client)
    else:
        info = admin_of(args).describe_cluster()
    print(f"cluster id {info.cluster_id or '-'}, controller {info.controller_id}")
    print_table(["ID", "HOST", "PORT", "RACK", "CONTROLLER"],
                [(b.node_id, b.host, b.port, b.rack, "yes" if b.node_id == info.controller_id else "")
                 for b in info.brokers])
    return 0
