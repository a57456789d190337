"""`odradek schema-registry`: the schema registry (odradek.registry, Confluent Schema Registry's REST API) against
any Kafka-compatible cluster, on 127.0.0.1:8081 by default, until Ctrl-C.

It connects like the other client commands (--bootstrap-server, --command-config for a secured listener); the
registries started with the same --group-id on one cluster share the --topic (default `_schemas`) and its writes.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import INTERRUPTED_EXIT_CODE, add_admin_options, command_config


def add_commands(commands) -> None:
    registry = commands.add_parser("schema-registry", help="serve a schema registry (Confluent's REST API)",
                                   description="Serve Confluent Schema Registry's REST API, the schemas kept in "
                                               "the cluster's _schemas topic (docs/schema-registry.md).")
    registry.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    registry.add_argument("--port", type=int, default=8081, help="port to serve on (default 8081; 0 picks one)")
    registry.add_argument("--topic", default="_schemas", help="the topic schemas are kept in (default _schemas)")
    registry.add_argument("--group-id", default="schema-registry", metavar="ID",
                          help="the registries sharing the topic and its writes (transactional.id ID-writer; "
                               "default schema-registry)")
    add_admin_options(registry)
    registry.set_defaults(run=run_schema_registry)


def run_schema_registry(args: argparse.Namespace) -> int:
    from odradek.registry import SchemaRegistry, SchemaRegistrySettings

    registry = SchemaRegistry(SchemaRegistrySettings(args.bootstrap_server, args.host, args.port,
                                                     command_config(args), args.topic, args.group_id,
                                                     timeout=args.timeout))
    print(f"odradek: schema registry ready on {registry.start()}", flush=True)
    try:
        registry.serve()
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT_CODE
    return 0
