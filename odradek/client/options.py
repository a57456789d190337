"""The command-line arguments every program that is a client of a broker reads the same way: --bootstrap-server
(the CLI's commands and the Spark pipelines' take it alike) and a time given as epoch milliseconds or ISO-8601 (the
CLI's --from-time and --to-datetime, the console's message browser and offset reset).

They sit with the client rather than the CLI so that the layers below the CLI (odradek.spark, odradek.console) read
them without importing it.
"""

from __future__ import annotations

import argparse
import datetime
import os

DEFAULT_BOOTSTRAP = "127.0.0.1:9092"


def add_bootstrap(parser: argparse.ArgumentParser, *hidden_aliases: str) -> None:
    """--bootstrap-server (-b), defaulting to $ODRADEK_BOOTSTRAP_SERVER; hidden_aliases are older spellings that
    still work but are not shown in --help."""
    parser.add_argument("--bootstrap-server", "-b", dest="bootstrap_server",
                        default=os.environ.get("ODRADEK_BOOTSTRAP_SERVER", DEFAULT_BOOTSTRAP), metavar="HOST:PORT",
                        help=f"broker to connect to (default $ODRADEK_BOOTSTRAP_SERVER or {DEFAULT_BOOTSTRAP})")
    if hidden_aliases:
        parser.add_argument(*hidden_aliases, dest="bootstrap_server", help=argparse.SUPPRESS)


def timestamp_ms(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 date/time (local time when it names no zone)."""
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected epoch milliseconds or an ISO-8601 time, got {text!r}") from None
    return int(moment.timestamp() * 1000)
