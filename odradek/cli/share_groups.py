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
import sys

from odradek.cli.common import add_admin_options, add_reset_arguments, admin_of, print_table
from odradek.client import ClientError
from odradek.client.admin import raise_for_error
from odradek.protocol import api

_VERSIONS = {"ListGroups": (5, 5), "ShareGroupDescribe": (1, 1), "DescribeShareGroupOffsets": (0, 1),
             "AlterShareGroupOffsets": (0, 0), "DeleteGroups": (0, 2)}


def add_commands(commands) -> None:
    groups = commands.add_parser("share-groups", help="list, describe, reset offsets of and delete share groups",
                                 description="Manage share groups (KIP-932).")
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list share groups and their states",
                                 description="List share groups.")
    listing.set_defaults(run=run_list)

    describe = actions.add_parser("describe", help="start offset and lag per share-partition",
                                  description="Show a share group's state and, per partition, its start offset "
                                              "and lag, in kafka-share-groups' columns.")
    describe.add_argument("group")
    describe.add_argument("--members", action="store_true", help="the members and their assigned partitions")
    describe.set_defaults(run=run_describe)

    reset = actions.add_parser("reset-offsets", help="move a share group's start offsets (dry run unless "
                                                     "--execute)",
                               description="Move an empty share group's start offsets. Shows the new offsets and "
                                           "changes nothing unless --execute is given.")
    add_reset_arguments(reset, "state")
    reset.set_defaults(run=run_reset_offsets)

    delete = actions.add_parser("delete", help="delete a share group and its state",
                                description="Delete an empty share group and its share-partitions' state.")
    delete.add_argument("group")
    delete.set_defaults(run=run_delete)

    for action in (listing, describe, reset, delete):
        add_admin_options(action)


def _call(args: argparse.Namespace, name: str, **fields):
    return admin_of(args).call(name, _VERSIONS[name], **fields)


def _offsets(args: argparse.Namespace, group: str):
    Request = api("DescribeShareGroupOffsets").request
    answer = _call(args, "DescribeShareGroupOffsets", groups=[
        Request.DescribeShareGroupOffsetsRequestGroup(group_id=group, topics=None)]).groups[0]
    raise_for_error(answer.error_code, answer.error_message)
    return [(t.topic_name, p) for t in answer.topics for p in t.partitions]


def run_list(args: argparse.Namespace) -> int:
    answer = _call(args, "ListGroups", states_filter=[], types_filter=["share"])
    raise_for_error(answer.error_code, None)
    print_table(["GROUP", "STATE"], sorted((g.group_id, g.group_state) for g in answer.groups))
    return 0


def run_describe(args: argparse.Namespace) -> int:
    described = _call(args, "ShareGroupDescribe", group_ids=[args.group],
                      include_authorized_operations=False).groups[0]
    raise_for_error(described.error_code, described.error_message)
    offsets = _offsets(args, args.group)
    state, members = described.group_state, described.members
    print(f"Share group {args.group} is {state} with {len(members)} member(s).")
    if args.members:
        print_table(["GROUP", "CONSUMER-ID", "HOST", "CLIENT-ID", "#PARTITIONS", "ASSIGNMENT"],
                    [(args.group, m.member_id, m.client_host, m.client_id,
                      sum(len(tp.partitions) for tp in m.assignment.topic_partitions),
                      ",".join(f"{tp.topic_name}:{p}" for tp in m.assignment.topic_partitions
                               for p in tp.partitions) or None) for m in members])
        return 0
    print_table(["GROUP", "TOPIC", "PARTITION", "START-OFFSET", "LAG"],
                [(args.group, topic, p.partition_index, p.start_offset if p.start_offset >= 0 else None,
                  p.lag if p.lag >= 0 else None) for topic, p in offsets])
    return 0


def run_reset_offsets(args: argparse.Namespace) -> int:
    topics = args.topic
    if args.all_topics:
        topics = sorted({topic for topic, _ in _offsets(args, args.group)})
    try:
        plan = admin_of(args).reset_plan(args.group, topics, to_earliest=args.to_earliest, to_offset=args.to_offset,
                                         to_datetime=args.to_datetime)
    except ValueError as exc:
        raise ClientError(f"UNKNOWN_TOPIC_OR_PARTITION: {exc}", "UNKNOWN_TOPIC_OR_PARTITION") from None
    if args.execute:
        Request = api("AlterShareGroupOffsets").request
        by_topic: dict[str, list] = {}
        for (topic, index), offset in sorted(plan.items()):
            by_topic.setdefault(topic, []).append(
                Request.AlterShareGroupOffsetsRequestPartition(partition_index=index, start_offset=offset))
        answer = _call(args, "AlterShareGroupOffsets", group_id=args.group, topics=[
            Request.AlterShareGroupOffsetsRequestTopic(topic_name=t, partitions=parts)
            for t, parts in by_topic.items()])
        raise_for_error(answer.error_code, answer.error_message)
        for topic in answer.responses:
            for p in topic.partitions:
                raise_for_error(p.error_code, p.error_message)
    print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                [(args.group, topic, p, offset) for (topic, p), offset in sorted(plan.items())])
    if not args.execute:
        print("Dry run: nothing changed; add --execute to apply these offsets.", file=sys.stderr)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    result = _call(args, "DeleteGroups", groups_names=[args.group]).results[0]
    raise_for_error(result.error_code, None)
    print(f"Deleted share group {args.group}.")
    return 0
