"""`odradek rest-proxy`: the REST proxy (odradek.restproxy, Confluent REST Proxy's v2 and v3 APIs) in front of any
Kafka-compatible cluster, on 127.0.0.1:8082 by default, until Ctrl-C.

It connects like the other client commands (--bootstrap-server, --command-config for a secured listener); with
--basic-auth each request's basic-auth user and password are the SASL user it acts as (the --command-config file
then gives security.protocol and sasl.mechanism, not a user). --ssl-certfile and --ssl-keyfile (PEM) serve HTTPS.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import INTERRUPTED_EXIT_CODE, UsageError, add_admin_options, command_config


def add_commands(commands) -> None:
    proxy = commands.add_parser("rest-proxy", help="serve Confluent REST Proxy's v2 and v3 APIs",
                                description="Serve Kafka over HTTP with Confluent REST Proxy's v2 and v3 APIs: "
                                            "produce, consumer instances, topics, groups, ACLs "
                                            "(docs/rest-proxy.md).")
    proxy.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    proxy.add_argument("--port", type=int, default=8082, help="port to serve on (default 8082; 0 picks one)")
    proxy.add_argument("--basic-auth", action="store_true",
                       help="require HTTP basic auth: each request logs in to the brokers as that SASL user, so "
                            "its ACLs apply")
    proxy.add_argument("--ssl-certfile", metavar="FILE", help="PEM certificate chain: serve HTTPS")
    proxy.add_argument("--ssl-keyfile", metavar="FILE", help="PEM private key of --ssl-certfile")
    proxy.add_argument("--schema-registry-url", metavar="URL",
                       help="a schema registry (odradek schema-registry, or Confluent's): the avro and jsonschema "
                            "embedded formats")
    proxy.add_argument("--consumer-instance-timeout-ms", type=int, default=300_000, metavar="MS",
                       help="close a consumer instance idle this long (default 300000)")
    add_admin_options(proxy)
    proxy.set_defaults(run=run_rest_proxy)


def run_rest_proxy(args: argparse.Namespace) -> int:
    from odradek.restproxy import ProxySettings, RestProxy

    if bool(args.ssl_certfile) != bool(args.ssl_keyfile):
        raise UsageError("give --ssl-certfile and --ssl-keyfile together")
    settings = ProxySettings(args.bootstrap_server, command_config(args), basic_auth=args.basic_auth,
                             timeout=args.timeout, instance_timeout_ms=args.consumer_instance_timeout_ms,
                             schema_registry_url=args.schema_registry_url)
    proxy = RestProxy(settings, args.host, args.port, args.ssl_certfile, args.ssl_keyfile)
    print(f"odradek: rest proxy on {proxy.start()}", flush=True)
    try:
        proxy.serve()
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT_CODE
    return 0
