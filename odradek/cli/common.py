"""What every client-side command shares: the --command-config and --timeout options (with --bootstrap-server, which
odradek.client.options holds for the Spark pipelines' commands too), KEY=VALUE arguments, tables.

Commands talk to a cluster through odradek.client only; failures surface as ClientError (or ValueError for bad
input), which `odradek.cli.main` turns into one `odradek: ...` line and exit code 1; UsageError (arguments that
parse but do not go together) exits 2 like argparse's own usage errors.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Sequence
from pathlib import Path

from odradek.client import Admin
from odradek.client.options import add_bootstrap
from odradek.config import parse_properties

INTERRUPTED_EXIT_CODE = 130  # 128 + SIGINT, as shells and Kafka's own (JVM) tools report Ctrl-C


class UsageError(ValueError):
    """Arguments that parse one by one but do not make sense together: exit code 2, as argparse's errors."""


def add_admin_options(parser: argparse.ArgumentParser) -> None:
    """--bootstrap-server and --timeout, for commands that ask the cluster questions through Admin."""
    add_bootstrap(parser)
    parser.add_argument("--timeout", type=float, default=15.0, metavar="SECONDS",
                        help="how long to wait for the cluster's answers (default 15)")


def add_command_config(parser: argparse.ArgumentParser) -> None:
    """--command-config: a client properties file for a secured listener, as Kafka's tools take it."""
    parser.add_argument("--command-config", type=Path, metavar="FILE",
                        help="client properties (security.protocol, sasl.*, ssl.*) for a secured listener")


def properties_file(path: Path | None) -> dict[str, str]:
    """The settings of a Java properties file (none without one)."""
    return parse_properties(path.read_text(encoding="utf-8")) if path else {}


def command_config(args: argparse.Namespace) -> dict[str, str]:
    """The client properties --command-config names (none without it, or for a command that lacks the option)."""
    return properties_file(getattr(args, "command_config", None))


def admin_of(args: argparse.Namespace) -> Admin:
    return Admin(args.bootstrap_server, args.timeout, command_config(args))


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
