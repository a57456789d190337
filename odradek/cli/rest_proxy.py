"""`odradek rest-proxy`: the REST proxy (odradek.restproxy, Confluent REST Proxy's v2 and v3 APIs) in front of any
Kafka-compatible cluster, on 127.0.0.1:8082 by default, until Ctrl-C.

It connects like the other client commands (--bootstrap-server, --command-config for a secured listener); with
--basic-auth each request's basic-auth user and password are the SASL user it acts as (the --command-config file
then gives security.protocol and sasl.mechanism, not a user). --ssl-certfile and --ssl-keyfile (PEM) serve HTTPS.

Beside a broker (`rest.proxy.port`, started by `odradek serve`), `proxy_beside` makes the same proxy from the
broker's configs: `rest.proxy.authentication.method` BASIC is --basic-auth (the proxy then reaches the broker
through its first SASL_PLAINTEXT listener, with that listener's first sasl.enabled.mechanisms), and
`rest.proxy.ssl.certfile` / `rest.proxy.ssl.keyfile` are --ssl-certfile / --ssl-keyfile.
"""

from __future__ import annotations

import argparse

from odradek.cli.common import INTERRUPTED_EXIT_CODE, UsageError, add_admin_options, command_config
from odradek.config import host_port

LOCAL_HOSTS = ("0.0.0.0", "::", "")  # a listener bound to every address is reached on 127.0.0.1


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


def proxy_beside(broker, registry_url: str | None):
    """The REST proxy for a broker's `rest.proxy.*` configs, on 127.0.0.1:rest.proxy.port, reaching the broker
    through its first listener (its first SASL_PLAINTEXT one with BASIC); ValueError for configs that do not fit."""
    from odradek.restproxy import ProxySettings, RestProxy
    from odradek.security.sasl import enabled_mechanisms

    config = broker.config
    certfile, keyfile = config["rest.proxy.ssl.certfile"] or None, config["rest.proxy.ssl.keyfile"] or None
    if bool(certfile) != bool(keyfile):
        raise ValueError("give rest.proxy.ssl.certfile and rest.proxy.ssl.keyfile together")
    basic_auth = config["rest.proxy.authentication.method"] == "BASIC"
    listener, client_config = broker.listeners[0], {}
    if basic_auth:
        listener = next((each for each in broker.listeners if each.security_protocol == "SASL_PLAINTEXT"), None)
        if listener is None:
            raise ValueError("rest.proxy.authentication.method BASIC needs a SASL_PLAINTEXT listener: each request "
                             "logs in to it as its basic-auth user")
        client_config = {"security.protocol": "SASL_PLAINTEXT",
                         "sasl.mechanism": enabled_mechanisms(listener, broker.props)[0]}
    host = "127.0.0.1" if listener.host in LOCAL_HOSTS else listener.host
    settings = ProxySettings(host_port(host, listener.port), client_config, basic_auth=basic_auth,
                             schema_registry_url=registry_url)
    return RestProxy(settings, port=config["rest.proxy.port"], ssl_certfile=certfile, ssl_keyfile=keyfile)
