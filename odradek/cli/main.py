"""The `odradek` command: one entry point, one subcommand per job, errors in one clear line and Kafka-tool exit codes.

`odradek serve` runs a single-node broker with an embedded default (data directory, auto-created topics, a cluster id
made once and kept) so that `odradek serve` alone gives a working Kafka endpoint on 127.0.0.1:9092.
With --zookeeper (zookeeper.connect) it joins a cluster instead; `odradek cluster up` runs a local one.
The client-side commands live one group per module (topics, produce, consume, groups, share-groups, brokers, zk,
cluster, perf, dump-log, mirror, users, reassign and elect-leaders, console, schema-registry, iceberg, rest-proxy),
each adding its parsers here (`console.port`, `schema.registry.port` and `rest.proxy.port` also serve the web
console, the schema registry and the REST proxy beside the broker); Spark's pipeline commands join only when
odradek.spark.pipelines imports (pyspark is optional).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import confluent_kafka

from odradek import __version__
from odradek.cli import (acls, brokers, cluster, console, consume, dump_log, groups, iceberg, mirror, perf, produce,
                         reassign, rest_proxy, schema_registry, share_groups, topics, users, zk)
from odradek.cli.common import INTERRUPTED_EXIT_CODE, UsageError, key_value
from odradek.cli.extras import missing_extra_line
from odradek.client.errors import LIBRDKAFKA_LOGGER, ClientError
from odradek.cluster.membership import ClusterMembershipError
from odradek.config import BROKER_CONFIGS, host_port, parse_listener, parse_properties
from odradek.errors import KafkaError

DEFAULT_DATA_DIR = "odradek-data"
# The cyclic collector's young generation while serving is collected every this many allocations (Python's default
# is 700). A Fetch or Metadata of 1,000 partitions makes thousands of objects that live until it is answered; found
# alive by a collection every 700, they moved to the old generations, whose growth triggered a full collection of
# every partition's long-lived objects every 16 or so such Fetches: a pause of 20-38 ms at 1,000 partitions, 120 ms
# at 10,000. Every 50,000, nearly all of them are gone by the time a collection comes.
YOUNG_COLLECTION_THRESHOLD = 50_000


def _port(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number from 0 to 65535, got {text!r}")
    return port


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="odradek", description="A Kafka-compatible commit log in Python.")
    parser.add_argument("--version", action="version", version=f"odradek {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True
    serve = commands.add_parser("serve", help="run a single-node broker",
                                description="Run a single-node broker. Settings use Kafka's names "
                                            "(log.dirs, num.partitions, log.retention.hours, ...).")
    serve.add_argument("--data-dir", help=f"log directory (log.dirs; default ./{DEFAULT_DATA_DIR})")
    serve.add_argument("--host", default=None, help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=_port, default=None, help="port to listen on (default 9092; 0 picks one)")
    serve.add_argument("--zookeeper", metavar="HOST:PORT[/chroot]",
                       help="join the cluster coordinated by this ZooKeeper (zookeeper.connect); without it the "
                            "broker is a cluster of its own")
    serve.add_argument("--broker-id", type=int, help="this broker's id (broker.id; default 1)")
    serve.add_argument("--config", type=Path, help="a server.properties file")
    serve.add_argument("--set", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                       help="one broker setting, repeatable; wins over --config")
    serve.add_argument("--log-level", default="INFO", help="logging level (default INFO)")
    serve.set_defaults(run=run_serve)
    for module in (topics, produce, consume, groups, share_groups, acls, brokers, zk, cluster, perf, dump_log, mirror,
                   users, reassign, console, schema_registry, iceberg, rest_proxy):
        module.add_commands(commands)
    _add_pipeline_commands(commands)
    return parser


def _add_pipeline_commands(commands) -> None:
    """Spark's commands, when odradek.spark.pipelines exists and its imports (pyspark) are installed."""
    try:
        from odradek.spark.pipelines import add_pipeline_commands
    except ImportError:
        return
    add_pipeline_commands(commands)


def run_serve(args: argparse.Namespace) -> int:
    # Loading the broker and opening every partition's log allocate objects that nearly all live on: the cyclic
    # collector, run as they pile up, would scan them again and again (0.16 s of a 1.9 s start with 10,000
    # partitions). It runs once they are all built.
    gc.disable()
    try:
        broker = _load_broker(args)
    finally:
        gc.enable()
    gc.set_threshold(YOUNG_COLLECTION_THRESHOLD, *gc.get_threshold()[1:])
    return asyncio.run(_serve(broker))


def _load_broker(args: argparse.Namespace):
    from odradek.broker._frame_buffer import keep_freed_frames
    from odradek.broker.broker import Broker

    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    props: dict[str, str] = {}
    if args.config is not None:
        props.update(parse_properties(args.config.read_text()))
    props.update(dict(args.set))
    if args.data_dir is not None:
        props["log.dirs"] = args.data_dir
    if args.zookeeper is not None:
        props["zookeeper.connect"] = args.zookeeper
    if args.broker_id is not None:
        props["broker.id"] = str(args.broker_id)
    props.setdefault("log.dirs", DEFAULT_DATA_DIR)
    for directory in str(props["log.dirs"]).split(","):
        _check_data_dir(Path(directory.strip()))
    host, port = parse_listener(props.get("listeners", BROKER_CONFIGS["listeners"].default))
    host = host or "0.0.0.0"
    host = args.host if args.host is not None else host
    port = args.port if args.port is not None else port
    _use_uvloop()
    keep_freed_frames()  # the process is the broker's: large frames' memory is kept for the next ones
    return Broker(props, host=host, port=port)


def _check_data_dir(directory: Path) -> None:
    """A data directory the broker can use, made if missing; else a ValueError that says what is wrong with it."""
    if directory.exists() and not directory.is_dir():
        raise ValueError(f"data directory {directory} (log.dirs) is a file, not a directory")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"cannot create data directory {directory} (log.dirs): {exc.strerror}") from None
    if not os.access(directory, os.W_OK | os.X_OK):
        raise ValueError(f"data directory {directory} (log.dirs) is not writable")


async def _serve(broker) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    host, port = await broker.start()
    registry_port = broker.config["schema.registry.port"]
    registry_url = _start_schema_registry(broker, host, port, registry_port) if registry_port else None
    console_url = _start_console(broker, host, port, registry_url) if broker.config["console.port"] else None
    proxy_url = _start_rest_proxy(broker, registry_url) if broker.config["rest.proxy.port"] else None
    print(f"odradek: broker {broker.node_id} ready on {host}:{port} "
          f"(cluster {broker.metadata.cluster_id}, data {broker.log_dir})", flush=True)
    if console_url is not None:
        print(f"odradek: console on {console_url}", flush=True)
    if registry_url is not None:
        print(f"odradek: schema registry on {registry_url}", flush=True)
    if proxy_url is not None:
        print(f"odradek: rest proxy on {proxy_url}", flush=True)
    iceberg = loop.create_task(_iceberg_writer(broker))
    await stop.wait()
    iceberg.cancel()  # the writer stops while the broker's loop still answers its reads
    await asyncio.gather(iceberg, return_exceptions=True)
    await broker.stop()
    return 0


async def _iceberg_writer(broker) -> None:
    """The Iceberg writer beside the broker, started once a topic has odradek.iceberg.mode set (docs/iceberg.md)."""
    from odradek.iceberg.beside import serve_beside

    await serve_beside(broker)


def _start_console(broker, host: str, port: int, registry_url: str | None) -> str:
    """The web console beside the broker, on 127.0.0.1:console.port, reading it through its own listener (and its
    schemas from the registry beside it, if one is)."""
    from odradek.console import Console, ConsoleSettings

    local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    metrics = [f"http://{host_port(local, broker.metrics.port)}/metrics"] if broker.metrics is not None else []
    settings = ConsoleSettings(host_port(local, port), port=broker.config["console.port"],
                               zookeeper=broker.config["zookeeper.connect"] or None, metrics_urls=metrics,
                               schema_registry_url=registry_url)
    return Console(settings).start_thread()


def _start_schema_registry(broker, host: str, port: int, registry_port: int) -> str:
    """The schema registry beside the broker, on 127.0.0.1:schema.registry.port, through the broker's own listener
    (it catches up with _schemas in its thread, once the broker's loop runs); the broker validates the records of
    topics with confluent.*.schema.validation against its schemas."""
    from odradek.broker import schema_validation
    from odradek.registry import SchemaRegistry, SchemaRegistrySettings
    from odradek.registry.validation import RegistrySchemas

    local = "127.0.0.1" if host in ("0.0.0.0", "::", "") else host
    registry = SchemaRegistry(SchemaRegistrySettings(host_port(local, port), port=registry_port))
    schemas = RegistrySchemas(registry.store)
    schema_validation.install(broker, schemas)
    url = registry.start_thread()
    threading.Thread(target=_when_serving, args=(url, schemas.serving), name="odradek-registry-ready",
                     daemon=True).start()
    return url


def _when_serving(url: str, serving: threading.Event) -> None:
    """Sets `serving` once the registry at `url` answers (requests wait until it has read its topic to the end)."""
    while True:
        try:
            with urllib.request.urlopen(f"{url}/", timeout=60):
                serving.set()
                return
        except urllib.error.HTTPError:
            serving.set()  # an answer all the same
            return
        except OSError:
            time.sleep(0.5)  # not listening yet, or gone: the broker's validated topics wait meanwhile


def _start_rest_proxy(broker, registry_url: str | None) -> str:
    """The REST proxy beside the broker, on 127.0.0.1:rest.proxy.port, reaching it through its own listener (and
    the schema formats through the registry beside it, if one is), with basic auth and TLS as its rest.proxy.*
    configs say (odradek.cli.rest_proxy.proxy_beside)."""
    from odradek.cli.rest_proxy import proxy_beside

    return proxy_beside(broker, registry_url).start_thread()


def _use_uvloop() -> None:
    try:
        import uvloop
    except ImportError:
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    LIBRDKAFKA_LOGGER.setLevel(logging.CRITICAL)  # the command reports failures itself, in one line
    try:
        return args.run(args)
    except UsageError as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 2
    except (KafkaError, ClientError, ClusterMembershipError, OSError, ValueError) as exc:
        print(f"odradek: {exc}", file=sys.stderr)
        return 1
    except confluent_kafka.KafkaException as exc:  # a client call odradek.client does not wrap
        print(f"odradek: {ClientError.of(exc)}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return INTERRUPTED_EXIT_CODE
    except ModuleNotFoundError as exc:  # an optional dependency (an extra) that is not installed
        line = missing_extra_line(getattr(args, "command", None), exc)
        if line is None:
            raise
        print(line, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
