"""`odradek console`: the web console (odradek.console) against any Kafka-compatible cluster, on 127.0.0.1:8080
by default, until Ctrl-C.

It connects like the other client commands (--bootstrap-server, --command-config for a secured listener: with SASL
it sees what its principal may see); --zookeeper adds the ZooKeeper page, --metrics-url the rate chart, --schema-registry-url the Schemas pages.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import INTERRUPTED_EXIT_CODE, add_admin_options, command_config
from odradek.cli.zk import add_zookeeper_option


def add_commands(commands) -> None:
    console = commands.add_parser("console", help="serve the web console",
                                  description="Serve the web console: brokers, topics, messages, consumer groups "
                                              "and (with --zookeeper) ZooKeeper, in a browser (docs/console.md).")
    console.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    console.add_argument("--port", type=int, default=8080, help="port to serve on (default 8080; 0 picks one)")
    console.add_argument("--metrics-url", action="append", default=[], metavar="URL",
                         help="a broker's Prometheus endpoint (http://host:port/metrics), repeatable: the "
                              "produce and fetch rate chart and partition sizes")
    console.add_argument("--read-group", default="odradek-console", metavar="GROUP",
                         help="the group.id messages are read with (assign only: no join, no commits; with ACLs "
                              "its principal needs DESCRIBE on this group; default odradek-console)")
    console.add_argument("--schema-registry-url", metavar="URL",
                         help="a schema registry (Confluent's REST API, e.g. odradek schema-registry's "
                              "http://127.0.0.1:8081): the Schemas pages")
    add_zookeeper_option(console, default=None)
    add_admin_options(console)
    console.set_defaults(run=run_console)


def run_console(args: argparse.Namespace) -> int:
    from odradek.console import Console, ConsoleSettings

    console = Console(ConsoleSettings(args.bootstrap_server, args.host, args.port, command_config(args),
                                      args.zookeeper, args.metrics_url, timeout=args.timeout,
                                      read_group=args.read_group, schema_registry_url=args.schema_registry_url))
    print(f"odradek: console ready on {console.start()}", flush=True)
    try:
        console.serve()
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT_CODE
    return 0
