"""`odradek reassign` and `odradek elect-leaders`: kafka-reassign-partitions and kafka-leader-election.

`reassign --execute FILE` asks AlterPartitionReassignments for the partitions of a file in Kafka's reassignment
format ({"version":1,"partitions":[{"topic":..,"partition":..,"replicas":[..]}]}), `--verify FILE` says of each
whether its move is done, still under way or never started, and `--cancel FILE` cancels those under way (as
kafka-reassign-partitions, which takes the same file for all three); `--execute` first prints the current
assignment to roll back to, and `--generate TOPICS_FILE --broker-list 1,2,3` proposes a spread of whole topics over
those brokers (Kafka's replica assignment) beside their current one, as kafka-reassign-partitions prints them. `elect-leaders` asks ElectLeaders, preferred or
unclean, for one partition or all, and prints kafka-leader-election's lines. Both go through odradek.client.Admin.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from odradek.cli.common import UsageError, add_admin_options, admin_of
from odradek.cluster.placement import assign_replicas


def add_commands(commands) -> None:
    reassign = commands.add_parser(
        "reassign", help="move partitions to other brokers (kafka-reassign-partitions)",
        description="Move partitions to other brokers, check on the moves and cancel them. FILE is Kafka's "
                    'reassignment JSON: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[2,3]}]}.')
    action = reassign.add_mutually_exclusive_group(required=True)
    action.add_argument("--execute", type=Path, metavar="FILE", help="start moving the partitions FILE lists")
    action.add_argument("--verify", type=Path, metavar="FILE", help="say whether each move FILE lists is done")
    action.add_argument("--cancel", type=Path, metavar="FILE", help="cancel the moves of the partitions FILE lists")
    action.add_argument("--generate", type=Path, metavar="TOPICS_FILE",
                        help='propose a spread of the topics TOPICS_FILE lists ({"version":1,"topics":[{"topic":'
                             '"t"}]}) over --broker-list, printing the current assignment beside it')
    reassign.add_argument("--broker-list", metavar="IDS", help="with --generate: the brokers to spread over (1,2,3)")
    reassign.add_argument("--disable-rack-aware", action="store_true",
                          help="with --generate: ignore the brokers' racks")
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


def reassignment_json(assignment: dict[tuple[str, int], list[int]]) -> str:
    """Kafka's reassignment JSON as kafka-reassign-partitions prints it: compact, partitions sorted, any log dir."""
    return json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": index, "replicas": replicas, "log_dirs": ["any"] * len(replicas)}
        for (topic, index), replicas in sorted(assignment.items())]}, separators=(",", ":"))


def current_assignment(admin, topics) -> dict[tuple[str, int], list[int]]:
    layouts = admin.topic_layouts(include_internal=True)
    missing = sorted(set(topics) - set(layouts))
    if missing:
        raise ValueError(f"topic(s) {', '.join(missing)} do not exist")
    return {(topic, p.partition): p.replicas for topic in topics for p in layouts[topic]}


def _generate(admin, args: argparse.Namespace) -> int:
    """kafka-reassign-partitions --generate: each topic spread over the brokers as a new topic would be (Kafka's
    replica assignment, rack-aware when every broker has a rack), keeping its partition count and factor."""
    if args.broker_list is None:
        raise UsageError("--generate needs --broker-list")
    try:
        topics = [str(entry["topic"]) for entry in json.loads(args.generate.read_text())["topics"]]
        wanted = [int(broker) for broker in args.broker_list.split(",")]
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{args.generate} is not a topics file ({exc!r}); expected "
                         '{"version":1,"topics":[{"topic":"t"}]}') from None
    racks = {broker.node_id: broker.rack for broker in admin.describe_cluster().brokers}
    unknown = sorted(set(wanted) - set(racks))
    if unknown:
        raise ValueError(f"broker(s) {', '.join(map(str, unknown))} in --broker-list are not in the cluster")
    brokers = {broker: None if args.disable_rack_aware else racks[broker] for broker in wanted}
    current = current_assignment(admin, topics)
    proposed = {}
    for topic in topics:
        partitions = sorted(index for t, index in current if t == topic)
        spread = assign_replicas(brokers, len(partitions), len(current[(topic, partitions[0])]))
        proposed.update({(topic, index): replicas for index, replicas in zip(partitions, spread)})
    print(f"Current partition replica assignment\n{reassignment_json(current)}\n")
    print(f"Proposed partition reassignment configuration\n{reassignment_json(proposed)}")
    return 0


def run_reassign(args: argparse.Namespace) -> int:
    admin = admin_of(args)
    if args.generate:
        return _generate(admin, args)
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
    if args.execute:  # what to give --execute to move them back, as kafka-reassign-partitions prints it first
        current = current_assignment(admin, sorted({topic for topic, _ in targets}))
        print(f"Current partition replica assignment\n\n{reassignment_json({key: current[key] for key in targets})}"
              "\n\nSave this to use as the --reassignment-json-file option during rollback")
    outcomes = admin.alter_partition_reassignments(targets if args.execute else dict.fromkeys(targets))
    failed = {key: error for key, error in outcomes.items() if error is not None}
    done = [f"{topic}-{index}" for (topic, index), error in sorted(outcomes.items()) if error is None]
    if done:
        print(f"Successfully {'started' if args.execute else 'cancelled'} partition reassignment"
              f"{'' if len(done) == 1 else 's'} for {','.join(done)}")
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
