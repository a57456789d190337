"""`odradek groups`: list, describe (with lag per partition), reset offsets of and delete consumer groups.

Like kafka-consumer-groups: reset-offsets shows the plan and changes nothing unless --execute is given, and only a
group without active members can have its offsets reset or be deleted (the broker enforces that).
"""

from __future__ import annotations

import argparse
import sys

from confluent_kafka.admin import OffsetSpec

from odradek.cli.common import add_admin_options, admin_of, print_table, timestamp_ms
from odradek.client import Admin, ClientError


def add_commands(commands) -> None:
    groups = commands.add_parser("groups", help="list, describe, reset offsets of and delete consumer groups",
                                 description="Manage consumer groups.")
    actions = groups.add_subparsers(dest="action", metavar="ACTION", required=True)

    listing = actions.add_parser("list", help="list groups and their states", description="List consumer groups.")
    listing.set_defaults(run=run_list)

    describe = actions.add_parser("describe", help="members, committed offsets and lag per partition",
                                  description="Show a group's state, and per partition its committed offset, the "
                                              "log end offset, the lag and the member that owns it.")
    describe.add_argument("group")
    describe.set_defaults(run=run_describe)

    reset = actions.add_parser("reset-offsets", help="move a group's committed offsets (dry run unless --execute)",
                               description="Move a group's committed offsets. Shows the new offsets and changes "
                                           "nothing unless --execute is given.")
    reset.add_argument("group")
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", "-t", action="append", help="a topic to reset, repeatable")
    which.add_argument("--all-topics", action="store_true", help="every topic the group has offsets for")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the earliest offset of each partition")
    target.add_argument("--to-latest", action="store_true", help="the latest offset of each partition")
    target.add_argument("--to-datetime", type=timestamp_ms, metavar="TIME",
                        help="the first offset at or after TIME (epoch ms or ISO-8601)")
    target.add_argument("--to-offset", type=int, metavar="OFFSET", help="this offset in every partition")
    reset.add_argument("--execute", action="store_true", help="apply the new offsets (default: dry run)")
    reset.set_defaults(run=run_reset_offsets)

    delete = actions.add_parser("delete", help="delete a group and its offsets",
                                description="Delete an empty group and its committed offsets.")
    delete.add_argument("group")
    delete.set_defaults(run=run_delete)

    for action in (listing, describe, reset, delete):
        add_admin_options(action)


def run_list(args: argparse.Namespace) -> int:
    print_table(["GROUP", "STATE"], admin_of(args).list_groups())
    return 0


def run_describe(args: argparse.Namespace) -> int:
    group = admin_of(args).describe_group(args.group)
    if group.state == "DEAD" and not group.offsets:  # what the coordinator says of a group it does not know
        raise ClientError(f"GROUP_ID_NOT_FOUND: consumer group {args.group!r} does not exist", "GROUP_ID_NOT_FOUND")
    print(f"Group {group.group_id} is {group.state} with {len(group.members)} member(s).")
    clients = {member_id: f"{client_id}/{host}" for member_id, client_id, host in group.members}
    print_table(["TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "CLIENT"],
                [(o.topic, o.partition, o.committed, o.latest_offset, o.lag, o.member or None,
                  clients.get(o.member)) for o in group.offsets])
    return 0


def planned_offsets(admin: Admin, args: argparse.Namespace) -> dict[tuple[str, int], int]:
    committed = admin.committed_offsets(args.group)
    topics = sorted({topic for topic, _ in committed}) if args.all_topics else args.topic
    plan: dict[tuple[str, int], int] = {}
    for topic in topics:
        count = admin.partition_count(topic)
        if count is None:
            raise ValueError(f"topic {topic!r} does not exist")
        partitions = range(count)
        if args.to_offset is not None:
            # as Kafka's tool does: an offset outside a partition's log is moved to its nearer end
            earliest = admin.list_offsets(topic, partitions, OffsetSpec.earliest())
            latest = admin.list_offsets(topic, partitions, OffsetSpec.latest())
            found = {p: min(max(args.to_offset, earliest[p]), latest[p]) for p in partitions}
        elif args.to_datetime is not None:
            found = admin.offsets_for_time(topic, partitions, args.to_datetime)
        else:
            found = admin.list_offsets(topic, partitions,
                                       OffsetSpec.earliest() if args.to_earliest else OffsetSpec.latest())
        plan.update({(topic, p): offset for p, offset in found.items()})
    return plan


def run_reset_offsets(args: argparse.Namespace) -> int:
    admin = admin_of(args)
    plan = planned_offsets(admin, args)
    if args.execute:
        admin.set_group_offsets(args.group, plan)
    print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                [(args.group, topic, p, offset) for (topic, p), offset in sorted(plan.items())])
    if not args.execute:
        print("Dry run: nothing changed; add --execute to apply these offsets.", file=sys.stderr)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    admin_of(args).delete_group(args.group)
    print(f"Deleted group {args.group}.")
    return 0
