"""`odradek groups`: list, describe (with lag per partition), reset offsets of and delete consumer groups.

Like kafka-consumer-groups: reset-offsets shows the plan and changes nothing unless --execute is given, and only a
group without active members can have its offsets reset or be deleted (the broker enforces that).
"""

from __future__ import annotations

import argparse

from odradek.cli.common import (GroupAction, add_group_command, add_reset_arguments, admin_of, print_reset_plan,
                                print_table)
from odradek.client import ClientError


def add_commands(commands) -> None:
    add_group_command(commands, "groups", "list, describe, reset offsets of and delete consumer groups",
                      "Manage consumer groups.", [
                          GroupAction("list", run_list, "list groups and their states", "List consumer groups.",
                                      takes_group=False),
                          GroupAction("describe", run_describe, "members, committed offsets and lag per partition",
                                      "Show a group's state, and per partition its committed offset, the log end "
                                      "offset, the lag and the member that owns it (consumer id, host and client "
                                      "id), in kafka-consumer-groups' columns."),
                          GroupAction("reset-offsets", run_reset_offsets,
                                      "move a group's committed offsets (dry run unless --execute)",
                                      "Move a group's committed offsets. Shows the new offsets and changes nothing "
                                      "unless --execute is given.",
                                      lambda reset: add_reset_arguments(reset, "offsets")),
                          GroupAction("delete", run_delete, "delete a group and its offsets",
                                      "Delete an empty group and its committed offsets.")])


def run_list(args: argparse.Namespace) -> int:
    print_table(["GROUP", "STATE"], admin_of(args).list_groups())
    return 0


def run_describe(args: argparse.Namespace) -> int:
    group = admin_of(args).describe_group(args.group)
    if group.state == "DEAD" and not group.offsets:  # what the coordinator says of a group it does not know
        raise ClientError(f"GROUP_ID_NOT_FOUND: consumer group {args.group!r} does not exist", "GROUP_ID_NOT_FOUND")
    print(f"Group {group.group_id} is {group.state} with {len(group.members)} member(s).")
    members = {member_id: (host, client_id) for member_id, client_id, host in group.members}
    print_table(["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST",
                 "CLIENT-ID"],
                [(group.group_id, o.topic, o.partition, o.committed, o.latest_offset, o.lag, o.member or None,
                  *members.get(o.member, (None, None))) for o in group.offsets])
    return 0


def run_reset_offsets(args: argparse.Namespace) -> int:
    admin = admin_of(args)
    plan = admin.reset_plan(args.group, None if args.all_topics else args.topic, to_earliest=args.to_earliest,
                            to_offset=args.to_offset, to_datetime=args.to_datetime)
    if args.execute:
        admin.set_group_offsets(args.group, plan)
    print_reset_plan(args, plan)
    return 0


def run_delete(args: argparse.Namespace) -> int:
    admin_of(args).delete_group(args.group)
    print(f"Deleted group {args.group}.")
    return 0
