"""`odradek topics`: create, list, describe, alter and delete topics (kafka-topics' jobs, through odradek.client.Admin)."""

from __future__ import annotations

import argparse

from odradek.cli.common import UsageError, add_admin_options, admin_of, key_value
from odradek.client import ClientError


def add_commands(commands) -> None:
    topics = commands.add_parser("topics", help="create, list, describe, alter and delete topics",
                                 description="Manage topics.")
    actions = topics.add_subparsers(dest="action", metavar="ACTION", required=True)

    create = actions.add_parser("create", help="create a topic", description="Create a topic.")
    create.add_argument("topic")
    create.add_argument("--partitions", "-p", type=int, default=-1, help="partition count (default: the broker's)")
    create.add_argument("--replication-factor", "-r", type=int, default=-1,
                        help="replication factor (default: the broker's)")
    create.add_argument("--config", "-c", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help="a topic setting (retention.ms, cleanup.policy, ...), repeatable")
    create.add_argument("--if-not-exists", action="store_true", help="succeed if the topic already exists")
    create.set_defaults(run=run_create)

    listing = actions.add_parser("list", help="list topic names", description="List topic names, one per line.")
    listing.add_argument("--all", action="store_true", help="include internal topics (__consumer_offsets, ...)")
    listing.set_defaults(run=run_list)

    describe = actions.add_parser("describe", help="partitions, offsets and settings of topics",
                                  description="Describe topics: partitions, leaders, offsets and topic settings.")
    describe.add_argument("topics", nargs="*", metavar="TOPIC", help="topics to describe (default: all)")
    describe.add_argument("--under-replicated-partitions", action="store_true",
                          help="only partitions with fewer in-sync replicas than replicas (as kafka-topics)")
    describe.add_argument("--unavailable-partitions", action="store_true",
                          help="only partitions whose leader is not a live broker (as kafka-topics)")
    describe.set_defaults(run=run_describe)

    alter = actions.add_parser("alter", help="add partitions or change settings of a topic",
                               description="Add partitions to a topic or change its settings.")
    alter.add_argument("topic")
    alter.add_argument("--partitions", "-p", type=int, help="the new, larger partition count")
    alter.add_argument("--config", "-c", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                       help="set a topic setting, repeatable")
    alter.add_argument("--delete-config", action="append", default=[], metavar="KEY",
                       help="remove a topic setting (back to the default), repeatable")
    alter.set_defaults(run=run_alter)

    delete = actions.add_parser("delete", help="delete topics", description="Delete topics and their data.")
    delete.add_argument("topics", nargs="+", metavar="TOPIC")
    delete.add_argument("--if-exists", action="store_true", help="succeed if a topic does not exist")
    delete.set_defaults(run=run_delete)

    for action in (create, listing, describe, alter, delete):
        add_admin_options(action)


def run_create(args: argparse.Namespace) -> int:
    try:
        admin_of(args).create_topic(args.topic, args.partitions, args.replication_factor, dict(args.config))
    except ClientError as exc:
        if not (args.if_not_exists and exc.name == "TOPIC_ALREADY_EXISTS"):
            raise
        return 0
    print(f"Created topic {args.topic}.")
    return 0


def run_list(args: argparse.Namespace) -> int:
    for name in admin_of(args).list_topics(include_internal=args.all):
        print(name)
    return 0


def run_describe(args: argparse.Namespace) -> int:
    """kafka-topics --describe: a line per topic and a tab-separated line per partition ("Leader: none" when it has
    no leader); with --under-replicated-partitions or --unavailable-partitions only the partitions that are, and no
    topic lines, as kafka-topics prints them. Offsets are Odradek's addition ("-" for an offline partition)."""
    admin = admin_of(args)
    filtered = args.under_replicated_partitions or args.unavailable_partitions
    for topic in admin.describe_topics(args.topics or admin.list_topics()):
        if not filtered:
            replication = len(topic.partitions[0].replicas) if topic.partitions else 0
            configs = ",".join(f"{key}={value}" for key, value in topic.configs.items())
            print(f"Topic: {topic.name}\tPartitionCount: {len(topic.partitions)}\t"
                  f"ReplicationFactor: {replication}\tConfigs: {configs}")
        for p in topic.partitions:
            offline = p.latest_offset is None
            if filtered and not ((args.under_replicated_partitions and len(p.isr) < len(p.replicas))
                                 or (args.unavailable_partitions and offline)):
                continue
            offsets = "-" if offline else f"{p.earliest_offset}..{p.latest_offset}"
            print(f"\tTopic: {topic.name}\tPartition: {p.partition}\tLeader: {'none' if p.leader < 0 else p.leader}"
                  f"\tReplicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
                  f"Offsets: {offsets}")
    return 0


def run_alter(args: argparse.Namespace) -> int:
    if args.partitions is None and not args.config and not args.delete_config:
        raise UsageError("nothing to alter: give --partitions, --config or --delete-config")
    admin = admin_of(args)
    if args.partitions is not None:
        admin.add_partitions(args.topic, args.partitions)
    if args.config or args.delete_config:
        admin.alter_topic_configs(args.topic, dict(args.config), args.delete_config)
    print(f"Altered topic {args.topic}.")
    return 0


def run_delete(args: argparse.Namespace) -> int:
    admin = admin_of(args)
    for topic in args.topics:
        try:
            admin.delete_topic(topic)
        except ClientError as exc:
            if not (args.if_exists and exc.name == "UNKNOWN_TOPIC_OR_PART"):
                raise ClientError(f"cannot delete topic {topic!r}: {exc}", exc.name, exc.retriable) from None
            continue
        print(f"Deleted topic {topic}.")
    return 0
