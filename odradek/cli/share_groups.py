"""`odradek share-groups`: list, describe, reset the start offsets of and delete share groups (KIP-932).

As kafka-share-groups.sh: describe shows each share-partition's start offset and lag (and with --members each
member and its partitions), reset-offsets shows the plan and changes nothing unless --execute is given, and only a
share group without members can have its offsets reset or be deleted (the broker enforces that). The new offsets
are computed as `odradek groups reset-offsets` computes them (odradek/client/admin.py's reset_plan) and sent with
AlterShareGroupOffsets; the share-group APIs go to the first bootstrap server, the coordinator of every share group
on a single node.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import (GroupAction, add_group_command, add_reset_arguments, admin_of, print_reset_plan,
                                print_table)
from odradek.client import ClientError
from odradek.client.share_groups import (alter_share_group_offsets, delete_share_group, describe_share_groups,
                                         list_share_groups, share_group_offsets)


def add_commands(commands) -> None:
    add_group_command(commands, "share-groups", "list, describe, reset offsets of and delete share groups",
                      "Manage share groups (KIP-932).", [
                          GroupAction("list", run_list, "list share groups and their states", "List share groups.",
                                      takes_group=False),
                          GroupAction("describe", run_describe, "start offset and lag per share-partition",
                                      "Show a share group's state and, per partition, its start offset and lag, "
                                      "in kafka-share-groups' columns.", add_describe_arguments),
                          GroupAction("reset-offsets", run_reset_offsets,
                                      "move a share group's start offsets (dry run unless --execute)",
                                      "Move an empty share group's start offsets. Shows the new offsets and "
                                      "changes nothing unless --execute is given.",
                                      lambda reset: add_reset_arguments(reset, "state")),
                          GroupAction("delete", run_delete, "delete a share group and its state",
                                      "Delete an empty share group and its share-partitions' state.")])


def add_describe_arguments(describe: argparse.ArgumentParser) -> None:
    describe.add_argument("--members", action="store_true", help="the members and their assigned partitions")


def run_list(args: argparse.Namespace) -> int:
    print_table(["GROUP", "STATE"], list_share_groups(admin_of(args)))
    return 0


def run_describe(args: argparse.Namespace) -> int:
    admin = admin_of(args)
    (described,) = describe_share_groups(admin, [args.group])
    offsets = share_group_offsets(admin, args.group)
    print(f"Share group {args.group} is {described.state} with {len(described.members)} member(s).")
    if args.members:
        print_table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                    [(args.group, m.member_id, m.host, m.client_id, len(m.partitions),
                      ",".join(f"{topic}:{p}" for topic, p in m.partitions) or None) for m in described.members])
        return 0
    print_table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                [(args.group, o.topic, o.partition, o.start_offset, o.lag) for o in offsets])
    return 0


def run_reset_offsets(args: argparse.Namespace) -> int:
    admin = admin_of(args)
    topics = args.topic
    if args.all_topics:
        topics = sorted({o.topic for o in share_group_offsets(admin, args.group)})
    try:
        plan = admin.reset_plan(args.group, topics, to_earliest=args.to_earliest, to_offset=args.to_offset,
                                to_datetime=args.to_datetime)
    except ValueError as exc:
        raise ClientError(f"UNKNOWN_TOPIC_OR_PARTITION: {exc}", "UNKNOWN_TOPIC_OR_PARTITION") from None
    if args.execute:
        alter_share_group_offsets(admin, args.group, plan)
    print_reset_plan(args, plan)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    delete_share_group(admin_of(args), args.group)
    print(f"Deleted share group {args.group}.")
    return 0
