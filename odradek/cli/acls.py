"""`odradek acls add|list|remove`: the cluster's ACLs, with kafka-acls' options.

Resources: --topic, --group, --transactional-id, --delegation-token (each repeatable) and --cluster, with
--resource-pattern-type (literal or prefixed to add; also any or match to list and remove). Bindings: every
--allow-principal and --deny-principal with every --operation (default All) from every --allow-host/--deny-host
(default *). --producer and --consumer add kafka-acls' convenience sets (Write, Describe and Create on the topics;
Read and Describe on the topics and Read on the --group). `list` filters by --principal and the resources; `remove`
deletes what its options match, without the confirmation prompt kafka-acls shows unless --force. --command-config
takes a client properties file (security.protocol, sasl.*, ssl.*) for a secured listener, as kafka-acls does: with
the authorizer on, the command's principal needs ALTER (DESCRIBE to list) on the cluster, e.g. a super user.
"""

from __future__ import annotations

import argparse
import sys

from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType, ResourcePatternType,
                                   ResourceType)

from odradek.cli.common import add_admin_options, admin_of, print_table

CLUSTER_NAME = "kafka-cluster"


def _enum_value(kind):
    """An argparse type reading kafka-acls' spelling of an enum value (Write, IdempotentWrite, prefixed ...)."""
    names = {member.name.replace("_", "").lower(): member for member in kind}

    def parse(text: str):
        member = names.get(text.replace("_", "").replace("-", "").lower())
        if member is None or member.name in ("UNKNOWN",):
            raise argparse.ArgumentTypeError(f"{text!r} is not one of " + ", ".join(sorted(names)))
        return member
    parse.__name__ = kind.__name__
    return parse


def add_commands(commands) -> None:
    acls = commands.add_parser("acls", help="add, list and remove ACLs", description="Manage the cluster's ACLs "
                               "(the broker needs authorizer.class.name set).")
    actions = acls.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = actions.add_parser("add", help="create ACLs", description="Create ACLs.")
    add.set_defaults(run=run_add)
    listing = actions.add_parser("list", help="list ACLs", description="List ACLs matching the options.")
    listing.set_defaults(run=run_list)
    remove = actions.add_parser("remove", help="remove ACLs", description="Remove ACLs matching the options.")
    remove.set_defaults(run=run_remove)
    for action in (add, listing, remove):
        action.add_argument("--topic", action="append", default=[], metavar="TOPIC", help="a topic; repeatable")
        action.add_argument("--group", action="append", default=[], metavar="GROUP", help="a group; repeatable")
        action.add_argument("--transactional-id", action="append", default=[], metavar="ID",
                            help="a transactional id; repeatable")
        action.add_argument("--delegation-token", action="append", default=[], metavar="TOKEN",
                            help="a delegation token; repeatable")
        action.add_argument("--cluster", action="store_true", help="the cluster resource")
        action.add_argument("--resource-pattern-type", type=_enum_value(ResourcePatternType),
                            default=ResourcePatternType.LITERAL if action is add else None,
                            help="literal (default) or prefixed; any or match also for list and remove")
        add_admin_options(action)
    for action in (add, remove):
        action.add_argument("--allow-principal", action="append", default=[], metavar="PRINCIPAL",
                            help="a principal the ACLs allow, e.g. User:alice (User:* is everyone); repeatable")
        action.add_argument("--deny-principal", action="append", default=[], metavar="PRINCIPAL",
                            help="a principal the ACLs deny; repeatable")
        action.add_argument("--allow-host", action="append", default=[], metavar="HOST",
                            help="a host the allow ACLs apply from (default *); repeatable")
        action.add_argument("--deny-host", action="append", default=[], metavar="HOST",
                            help="a host the deny ACLs apply from (default *); repeatable")
        action.add_argument("--operation", action="append", default=[], type=_enum_value(AclOperation),
                            help="Read, Write, Create, Delete, Alter, Describe, ClusterAction, DescribeConfigs, "
                                 "AlterConfigs, IdempotentWrite, All (default All); repeatable")
        action.add_argument("--producer", action="store_true", help="Write, Describe and Create on the topics")
        action.add_argument("--consumer", action="store_true", help="Read and Describe on the topics, Read on "
                                                                    "the groups")
    remove.add_argument("--force", action="store_true", help="accepted for kafka-acls' sake; never prompts")
    listing.add_argument("--principal", help="only ACLs of this principal")


def _resources(args) -> list[tuple[ResourceType, str]]:
    resources = [(ResourceType.TOPIC, name) for name in args.topic]
    resources += [(ResourceType.GROUP, name) for name in args.group]
    resources += [(ResourceType.TRANSACTIONAL_ID, name) for name in args.transactional_id]
    resources += [(ResourceType.DELEGATION_TOKEN, name) for name in args.delegation_token]
    if args.cluster:
        resources.append((ResourceType.BROKER, CLUSTER_NAME))
    return resources


def _operations_by_resource(args, resources) -> list[tuple[ResourceType, str, AclOperation]]:
    """Each (resource, operation) to bind, with kafka-acls' --producer/--consumer sets."""
    if args.producer or args.consumer:
        chosen = []
        for kind, name in resources:
            if kind == ResourceType.TOPIC:
                operations = ([AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.CREATE] if args.producer
                              else []) + ([AclOperation.READ, AclOperation.DESCRIBE] if args.consumer else [])
                chosen += [(kind, name, op) for op in dict.fromkeys(operations)]
            elif kind == ResourceType.GROUP and args.consumer:
                chosen.append((kind, name, AclOperation.READ))
            elif kind == ResourceType.TRANSACTIONAL_ID and args.producer:
                chosen += [(kind, name, AclOperation.WRITE), (kind, name, AclOperation.DESCRIBE)]
        return chosen
    return [(kind, name, op) for kind, name in resources for op in (args.operation or [AclOperation.ALL])]


def _bindings(args, binding_type) -> list:
    resources = _resources(args)
    if not resources:
        raise SystemExit("name a resource: --topic, --group, --transactional-id, --delegation-token or --cluster")
    pattern = args.resource_pattern_type or ResourcePatternType.LITERAL
    who = [(principal, AclPermissionType.ALLOW, args.allow_host or ["*"]) for principal in args.allow_principal]
    who += [(principal, AclPermissionType.DENY, args.deny_host or ["*"]) for principal in args.deny_principal]
    if not who:
        raise SystemExit("name at least one --allow-principal or --deny-principal")
    return [binding_type(kind, name, pattern, principal, host, operation, permission)
            for kind, name, operation in _operations_by_resource(args, resources)
            for principal, permission, hosts in who for host in hosts]


def _print(bindings) -> None:
    print_table(["RESOURCE", "NAME", "PATTERN", "PRINCIPAL", "HOST", "OPERATION", "PERMISSION"],
                [(b.restype.name if b.restype != ResourceType.BROKER else "CLUSTER", b.name,
                  b.resource_pattern_type.name, b.principal, b.host, b.operation.name, b.permission_type.name)
                 for b in sorted(bindings, key=lambda b: (b.restype.value, b.name, b.principal,
                                                          b.operation.value, b.permission_type.value))])


def run_add(args: argparse.Namespace) -> int:
    bindings = _bindings(args, AclBinding)
    admin_of(args).create_acls(bindings)
    print(f"Added {len(bindings)} ACL(s):")
    _print(bindings)
    return 0


def run_list(args: argparse.Namespace) -> int:
    admin = admin_of(args)
    pattern = args.resource_pattern_type or ResourcePatternType.ANY
    filters = [AclBindingFilter(kind, name, pattern, args.principal, None, AclOperation.ANY, AclPermissionType.ANY)
               for kind, name in _resources(args)] or [
        AclBindingFilter(ResourceType.ANY, None, pattern, args.principal, None, AclOperation.ANY,
                         AclPermissionType.ANY)]
    _print([binding for acl_filter in filters for binding in admin.describe_acls(acl_filter)])
    return 0


def run_remove(args: argparse.Namespace) -> int:
    if not (args.allow_principal or args.deny_principal or args.operation or args.producer or args.consumer):
        # kafka-acls --remove with only resources removes every ACL on them
        pattern = args.resource_pattern_type or ResourcePatternType.LITERAL
        filters = [AclBindingFilter(kind, name, pattern, None, None, AclOperation.ANY, AclPermissionType.ANY)
                   for kind, name in _resources(args)]
        if not filters:
            raise SystemExit("name a resource: --topic, --group, --transactional-id, --delegation-token or --cluster")
    else:
        filters = _bindings(args, AclBindingFilter)
    removed = admin_of(args).delete_acls(filters)
    print(f"Removed {len(removed)} ACL(s):", file=sys.stderr)
    _print(removed)
    return 0
