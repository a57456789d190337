"""What every client-side command shares: --bootstrap-server (which odradek.client.options holds for the Spark
pipelines' commands too) with --command-config, the client properties file Kafka's tools take (Java's names,
translated by odradek.client.properties), and --timeout; the group commands' parsers and reset-offsets' plan;
KEY=VALUE arguments, tables.

Commands talk to a cluster through odradek.client only; failures surface as ClientError (or ValueError for bad
input), which `odradek.cli.main` turns into one `odradek: ...` line and exit code 1; UsageError (arguments that
parse but do not go together) exits 2 like argparse's own usage errors.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import NamedTuple

from odradek.client import Admin
from odradek.client.options import add_bootstrap, add_command_config, properties_file, timestamp_ms
from odradek.client.properties import librdkafka_settings

INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, as shells and Kafka's own (JVM) tools report Ctrl-C


class UsageError(ValueError):
    """Arguments that parse one by one but do not make sense together: exit code 2, as argparse's errors."""


def add_client_options(parser: argparse.ArgumentParser) -> None:
    """--bootstrap-server and --command-config: what every command that talks to brokers takes."""
    add_bootstrap(parser)
    add_command_config(parser)


def add_admin_options(parser: argparse.ArgumentParser) -> None:
    """add_client_options and --timeout, for commands that ask the cluster questions through Admin."""
    add_client_options(parser)
    parser.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                        help="how long to wait for the cluster's answers (default 15)")


def add_client_properties(parser: argparse.ArgumentParser, role: str) -> None:
    """--producer-property KEY=VALUE and --producer.config FILE (or the consumer's), as Kafka's console and perf
    tools take them: Kafka client properties over --command-config's."""
    parser.add_argument(f"--{role}-property", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                        help=f"a {role} property (Kafka's names: acks, linger.ms, compression.type, ...), "
                             "repeatable; wins over the files")
    parser.add_argument(f"--{role}.config", dest=f"{role}_config", type=Path, metavar="FILE",
                        help=f"{role} properties file (wins over --command-config)")


def command_config(args: argparse.Namespace) -> dict[str, str]:
    """The librdkafka settings of the client properties the command was given: --command-config, then a
    --producer.config/--consumer.config file, then each --producer-property/--consumer-property (none without)."""
    properties = properties_file(args.command_config)
    for role in ("producer", "consumer"):
        properties.update(properties_file(getattr(args, f"{role}_config", None)))
        properties.update(getattr(args, f"{role}_property", ()))
    return librdkafka_settings(properties)


def admin_of(args: argparse.Namespace) -> Admin:
    return Admin(args.bootstrap_server, args.timeout, command_config(args))


class GroupAction(NamedTuple):
    """One action of a group command: its name, the function that runs it, its help and description, what more it
    takes than the group (`arguments`, given its parser) and whether it takes a group at all (list does not)."""

    name: str
    run: Callable[[argparse.Namespace], int]
    help: str
    description: str
    arguments: Callable[[argparse.ArgumentParser], None] | None = None
    takes_group: bool = True


def add_group_command(commands, name: str, help: str, description: str, actions: Iterable[GroupAction]) -> None:
    """`odradek groups` and `odradek share-groups`: the command and its actions, each parser taking the group
    (unless the action takes none), then the action's own arguments, then the admin options."""
    command = commands.add_parser(name, help=help, description=description)
    parsers = command.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action in actions:
        parser = parsers.add_parser(action.name, help=action.help, description=action.description)
        if action.takes_group:
            parser.add_argument("group")
        if action.arguments is not None:
            action.arguments(parser)
        parser.set_defaults(run=action.run)
        add_admin_options(parser)


def add_reset_arguments(reset: argparse.ArgumentParser, held: str) -> None:
    """reset-offsets' arguments after the group, as kafka-consumer-groups and kafka-share-groups take them: which
    topics (`held`: what the group has for a topic, "offsets" or "state"), the target and --execute."""
    which = reset.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", "-t", action="append", help="a topic to reset, repeatable")
    which.add_argument("--all-topics", action="store_true", help=f"every topic the group has {held} for")
    target = reset.add_mutually_exclusive_group(required=True)
    target.add_argument("--to-earliest", action="store_true", help="the earliest offset of each partition")
    target.add_argument("--to-latest", action="store_true", help="the latest offset of each partition")
    target.add_argument("--to-datetime", type=timestamp_ms, metavar="TIME",
                        help="the first offset at or after TIME (epoch ms or ISO-8601)")
    target.add_argument("--to-offset", type=int, metavar="OFFSET", help="this offset in every partition")
    reset.add_argument("--execute", action="store_true", help="apply the new offsets (default: dry run)")


def print_reset_plan(args: argparse.Namespace, plan: Mapping[tuple[str, int], int]) -> None:
    """reset-offsets' answer: the new offset of each partition, then, unless --execute applied them, the dry-run
    line on stderr."""
    print_table(["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"],
                [(args.group, topic, p, offset) for (topic, p), offset in sorted(plan.items())])
    if not args.execute:
        print("Dry run: nothing changed; add --execute to apply these offsets.", file=sys.stderr)


def key_value(text: str) -> tuple[str, str]:
    if "=" not in text:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    key, value = text.split("=", 1)
    return key.strip(), value


def print_table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> None:
    """Left-aligned columns, as kafka-consumer-groups prints them; '-' for a missing value."""
    cells = [list(headers)] + [["-" if value is None else str(value) for value in row] for row in rows]
    widths = [max(len(row[column]) for row in cells) for column in range(len(headers))]
    for row in cells:
        print("  ".join(value.ljust(width) for value, width in zip(row, widths)).rstrip())
