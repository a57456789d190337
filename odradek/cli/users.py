"""`odradek users`: add, list and remove users' SCRAM credentials (the SCRAM part of kafka-configs' `--entity-type
users`), through AlterUserScramCredentials and DescribeUserScramCredentials.

The password is salted here by confluent-kafka and only the salted password goes over the wire, as with Kafka's own
tools. `--command-config` takes a client properties file (security.protocol, sasl.*, ssl.*) for a secured listener,
as kafka-configs does.
"""

from __future__ import annotations

import argparse
import getpass

from confluent_kafka.admin import (ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from odradek.cli.common import add_admin_options, admin_of, print_table
from odradek.security.scram import DEFAULT_ITERATIONS, MECHANISMS

_MECHANISMS = {name: getattr(ScramMechanism, name.replace("-", "_")) for name in MECHANISMS}


def add_commands(commands) -> None:
    users = commands.add_parser("users", help="add, list and remove users' SCRAM credentials",
                                description="Manage the SCRAM credentials SASL/SCRAM listeners check.")
    actions = users.add_subparsers(dest="action", metavar="ACTION", required=True)

    add = actions.add_parser("add", help="set a user's password for a SCRAM mechanism",
                             description="Add a user, or change its password, for one SCRAM mechanism.")
    add.add_argument("user")
    add.add_argument("--password", help="the password (default: asked for on the terminal)")
    add.add_argument("--iterations", type=int, default=DEFAULT_ITERATIONS,
                     help=f"PBKDF2 iterations, 4096..16384 (default {DEFAULT_ITERATIONS})")
    add.set_defaults(run=run_add)

    listing = actions.add_parser("list", help="users and their SCRAM mechanisms",
                                 description="List users with SCRAM credentials (all, or those named).")
    listing.add_argument("users", nargs="*", metavar="USER")
    listing.set_defaults(run=run_list)

    remove = actions.add_parser("remove", help="remove a user's credential for a SCRAM mechanism",
                                description="Remove a user's SCRAM credential for one mechanism.")
    remove.add_argument("user")
    remove.set_defaults(run=run_remove)

    for action in (add, remove):
        action.add_argument("--mechanism", choices=sorted(_MECHANISMS), default="SCRAM-SHA-256",
                            help="SCRAM-SHA-256 (default) or SCRAM-SHA-512")
    for action in (add, listing, remove):
        add_admin_options(action)


def run_add(args: argparse.Namespace) -> int:
    password = args.password if args.password is not None else getpass.getpass(f"Password for {args.user}: ")
    upsertion = UserScramCredentialUpsertion(
        args.user, ScramCredentialInfo(_MECHANISMS[args.mechanism], args.iterations), password.encode())
    admin_of(args).alter_user_scram_credentials(upsertion)
    print(f"{args.mechanism} credential of {args.user} set ({args.iterations} iterations).")
    return 0


def run_list(args: argparse.Namespace) -> int:
    described = admin_of(args).describe_user_scram_credentials(args.users)
    names = {mechanism: name for name, mechanism in _MECHANISMS.items()}
    print_table(["USER", "MECHANISM", "ITERATIONS"],
                [(user, names[info.mechanism], info.iterations)
                 for user, description in sorted(described.items())
                 for info in description.scram_credential_infos])
    return 0


def run_remove(args: argparse.Namespace) -> int:
    admin_of(args).alter_user_scram_credentials(UserScramCredentialDeletion(args.user, _MECHANISMS[args.mechanism]))
    print(f"{args.mechanism} credential of {args.user} removed.")
    return 0
