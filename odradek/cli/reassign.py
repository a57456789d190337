"""`odradek reassign` and `odradek elect-leaders`: kafka-reassign-partitions and kafka-leader-election.

`reassign --execute FILE` asks AlterPartitionReassignments for the partitions of a file in Kafka's reassignment
format ({"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}), `--verify FILE` says of each
whether its move is done, still under way or never started, and `--cancel FILE` cancels those under way (as
kafka-reassign-partitions, which takes the same file for all three). `elect-leaders` asks ElectLeaders, preferred or
unclean, for one partition or all, and prints kafka-leader-election's lines. Both go through odradek.client.Admin.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from odradek.cli.common import UsageError, add_admin_options, admin_of


def add_commands(commands) -> None:
    reassign = commands.add_parser(
        "reassign", help="move partitions to other brokers (kafka-reassign-partitions)",
        description="Move partitions to other brokers, check on the moves and cancel them. FILE is Kafka's "
                    'reassignment JSON: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}.')
    action = reassign.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", type=Path, metavar="FILE", help="start moving the partitions FILE lists")
    action.add_argument("--verify", type=Path, metavar="FILE", help="say whether each move FILE lists is done")
    action.add_argument("--cancel", type=Path, metavar="FILE", help="cancel the moves of the partitions FILE lists")
    add_admin_options(reassign)
    reassign.set_defaults(run=run_reassign)

    elect = commands.add_parser(
        "elect-leaders", help="elect partition leaders (kafka-leader-election)",
        description="Give partitions back to their preferred replica, or an offline partition to a replica out of "
                    "sync (unclean: records may be lost).")
    elect.add_argument("--election-type", choices=("preferred", "unclean"), required=True,
                       help="preferred: the first replica leads; unclean: any live replica of an offline partition")
    elect.add_argument("--topic", help="the partition's topic (with --partition)")
    elect.add_argument("--partition", type=int, help="the partition (with --topic)")
    elect.add_argument("--all-topic-partitions", action="store_true", help="every partition of the cluster")
    add_admin_options(elect)
    elect.set_defaults(run=run_elect_leaders)


def read_reassignment(path: Path) -> dict[tuple[str, int], list[int]]:
    """Kafka's reassignment JSON: the target replicas by partition (ValueError when it is not that)."""
    try:
        body = json.loads(path.read_text())
        return {(str(entry["topic"]), int(entry["partition"])): [int(r) for r in entry["replicas"]]
                for entry in body["partitions"]}
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path} is not a reassignment file ({exc!r}); expected "
                         '{"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}') from None


def run_reassign(args: argparse.Namespace) -> int:
    admin = admin_of(args)
    targets = read_reassignment(args.execute or args.verify or args.cancel)
    if args.verify:
        ongoing = admin.list_partition_reassignments()
        replicas = {(info.name, partition.partition): partition.replicas
                    for info in admin.describe_topics(sorted({topic for topic, _ in targets}))
                    for partition in info.partitions}
        print("Status of partition reassignment:")
        for (topic, index), target in targets.items():
            if (topic, index) in ongoing:
                print(f"Reassignment of partition {topic}-{index} is still in progress.")
            elif replicas.get((topic, index)) == target:
                print(f"Reassignment of partition {topic}-{index} is completed.")
            else:
                print(f"There is no active reassignment of partition {topic}-{index}, but replica set is "
                      f"{replicas.get((topic, index))} rather than {target}.")
        return 0
    outcomes = admin.alter_partition_reassignments(targets if args.execute else dict.fromkeys(targets))
    failed = {key: error for key, error in outcomes.items() if error is not None}
    done = [f"{topic}-{index}" for (topic, index), error in outcomes.items() if error is None]
    if done:
        print(f"Successfully {'started' if args.execute else 'cancelled'} partition reassignment(s) for "
              f"{','.join(done)}")
    for (topic, index), error in failed.items():
        print(f"Error {'reassigning' if args.execute else 'cancelling the reassignment of'} partition "
              f"{topic}-{index}: {error}", file=sys.stderr)
    return 1 if failed else 0


def run_elect_leaders(args: argparse.Namespace) -> int:
    if args.all_topic_partitions == (args.topic is not None or args.partition is not None):
        raise UsageError("give either --topic and --partition, or --all-topic-partitions")
    if not args.all_topic_partitions and (args.topic is None or args.partition is None):
        raise UsageError("--topic and --partition go together")
    preferred = args.election_type == "preferred"
    asked = None if args.all_topic_partitions else [(args.topic, args.partition)]
    outcomes = admin_of(args).elect_leaders(preferred, asked)
    kind = args.election_type.upper()
    elected = [f"{t}-{p}" for (t, p), error in outcomes.items() if error is None]
    not_needed = [f"{t}-{p}" for (t, p), error in outcomes.items() if error and error.name == "ELECTION_NOT_NEEDED"]
    failed = {key: error for key, error in outcomes.items() if error and error.name != "ELECTION_NOT_NEEDED"}
    if elected:
        print(f"Successfully completed leader election ({kind}) for partitions {', '.join(elected)}")
    if not_needed:
        print(f"Valid replica already elected for partitions {', '.join(not_needed)}")
    for (topic, index), error in failed.items():
        print(f"Error completing leader election ({kind}) for partition: {topic}-{index}: {error}", file=sys.stderr)
    return 1 if failed else 0
