"""The command-line arguments every program that is a client of a broker reads the same way: --bootstrap-server and
--command-config (the CLI's commands and the Spark pipelines' take them alike; properties_file reads the file) and a
time given as epoch milliseconds or ISO-8601 (the CLI's --from-time and --to-datetime, the console's message browser
and offset reset).

They sit with the client rather than the CLI so that the layers below the CLI (odradek.spark, odradek.console) read
them without importing it.
"""

from __future__ import annotations

import argparse
import datetime
import os
from pathlib import Path

from odradek.config import parse_properties

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_bootstrap(parser: argparse.ArgumentParser, *hidden_aliases: str) -> None:
    """--bootstrap-server (-b), defaulting to $ODRADEK_BOOTSTRAP_SERVER; hidden_aliases are older spellings that
    still work but are not shown in --help."""
    parser.add_argument("--bootstrap-server", "-b", dest="bootstrap_server",
                        default=os.environ.get("ODRADEK_BOOTSTRAP_SERVER", DEFAULT_BOOTSTRAP), metavar="HOST:PORT",
                        help=f"broker to connect to (default $ODRADEK_BOOTSTRAP_SERVER or {DEFAULT_BOOTSTRAP})")
    if hidden_aliases:
        parser.add_argument(*hidden_aliases, dest="bootstrap_server", help=argparse.SUPPRESS)


def add_command_config(parser: argparse.ArgumentParser) -> None:
    """--command-config FILE: Kafka client properties, as Kafka's tools take them."""
    parser.add_argument("--command-config", type=Path, metavar="FILE",
                        help="Kafka client properties (security.protocol, sasl.mechanism, sasl.jaas.config or "
                             "sasl.username/password, ssl.*) for a secured listener")


def properties_file(path: Path | None) -> dict[str, str]:
    """The settings of a Java properties file (none without one)."""
    return parse_properties(path.read_text(encoding="utf-8")) if path else {}


def timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 date/time (local time when it names no zone)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected epoch milliseconds or an ISO-8601 time, got {text!r}") from None
    return int(moment.timestamp() * 1000)
