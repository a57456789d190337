"""`odradek pipeline ...`: the Spark pipelines shipped with the product, and their event generators, on the CLI.

The CLI hooks this in with add_pipeline_commands(subparsers). pyspark is not imported here: it is an optional extra
(pip install odradek[spark]) and is loaded when a pipeline actually runs, so `odradek serve` and the broker never
import it. Each command sets `run` on its namespace, as the rest of the CLI does, and returns an exit code. The broker
is named as in every other command (--bootstrap-server, -b or $ODRADEK_BOOTSTRAP_SERVER); --bootstrap-servers, the
pipelines' first spelling, is still accepted but no longer shown. --command-config FILE takes a secured cluster's
Kafka client properties, as every other command does (security.protocol, sasl.*, ssl.*, translated by
odradek.client.properties), for all of a pipeline's reads and writes: the driver's lookups, the read tasks' own
connections, the sink's producers, the generators'; each --kafka KEY=VALUE (librdkafka's names) wins over the file.
A spark:// master that cannot be reached is one `odradek: ...` line before any JVM starts.
"""

from __future__ import annotations

import argparse
import json
import socket

from odradek.client.options import add_bootstrap, add_command_config, properties_file
from odradek.client.properties import librdkafka_settings

OLD_BOOTSTRAP_OPTION = "--bootstrap-servers"


def add_pipeline_commands(subparsers) -> None:
    """Add `pipeline` with its subcommands to the CLI's subparsers."""
    pipeline = subparsers.add_parser("pipeline", help="run a Spark pipeline (needs odradek[spark])",
                                     description="Spark pipelines over a broker's topics, run on a local Spark "
                                                 "or on the cluster --master names.")
    commands = pipeline.add_subparsers(dest="pipeline", metavar="PIPELINE")
    commands.required = True

    load = _command(commands, "warehouse-load", "topics -> Parquet partitioned by topic and partition, "
                                                "resuming exactly where the last run committed")
    load.add_argument("--topics", required=True, help="comma-separated topics")
    load.add_argument("--output", required=True, help="output directory")
    load.add_argument("--allow-data-loss", action="store_true",
                      help="skip offsets deleted by retention instead of failing")
    load.set_defaults(run=_run_warehouse_load)

    stream = _command(commands, "activity-stream", "page views -> views per page per minute, to a compacted "
                                                   "topic (live) and to Parquet (closed minutes)")
    stream.add_argument("--input-topic", default="page-views", help="page views to read (default page-views)")
    stream.add_argument("--output-topic", default="page-views-per-minute",
                        help="compacted topic of running counts (default page-views-per-minute)")
    stream.add_argument("--output", required=True, help="Parquet output directory")
    stream.add_argument("--checkpoint", required=True, help="checkpoint directory (keeps the offsets read)")
    stream.add_argument("--watermark", default="1 minute", help="how late a view may arrive (default 1 minute)")
    stream.add_argument("--available-now", action="store_true", help="process what is there now, then exit")
    stream.add_argument("--trigger-seconds", type=int, default=10,
                        help="seconds between micro-batches (default 10)")
    stream.add_argument("--max-offsets-per-trigger", type=int,
                        help="at most this many records per micro-batch (default: all there are)")
    stream.set_defaults(run=_run_activity_stream)

    snapshot = _command(commands, "changelog-snapshot", "compacted topic -> table of the latest value per key")
    snapshot.add_argument("--topic", required=True, help="the compacted topic to snapshot")
    snapshot.add_argument("--output", required=True, help="output directory (replaced)")
    snapshot.set_defaults(run=_run_changelog_snapshot)

    generate = commands.add_parser("generate", help="write demo events for the pipelines",
                                   description="Write demo events for the pipelines to a topic.")
    generate.add_argument("kind", choices=("orders", "page-views", "profile-changes"))
    _add_client_settings(generate)
    generate.add_argument("--topic", help="default: orders, page-views or profiles")
    generate.add_argument("--count", type=int, default=10_000, help="how many events (default 10000)")
    generate.add_argument("--seed", type=int, default=0, help="random seed, for repeatable events (default 0)")
    generate.set_defaults(run=_run_generate)


def _command(commands, name: str, help_text: str) -> argparse.ArgumentParser:
    parser = commands.add_parser(name, help=help_text, description=help_text)
    _add_client_settings(parser)
    parser.add_argument("--master", default="local[2]",
                        help="Spark master: local[N] or a cluster such as spark://host:7077 (default local[2])")
    return parser


def _add_client_settings(parser: argparse.ArgumentParser) -> None:
    """What every pipeline command connects with: --bootstrap-server, --command-config and --kafka."""
    add_bootstrap(parser, OLD_BOOTSTRAP_OPTION)
    add_command_config(parser)
    parser.add_argument("--kafka", action="append", default=[], metavar="KEY=VALUE",
                        help="a client setting passed to confluent-kafka (librdkafka's names), repeatable; wins "
                             "over --command-config")


def _client_config(args) -> dict[str, str]:
    """librdkafka settings: the broker, --command-config's properties, then each --kafka setting."""
    config = {"bootstrap.servers": args.bootstrap_server, **librdkafka_settings(properties_file(args.command_config))}
    for setting in args.kafka:
        key, separator, value = setting.partition("=")
        if not separator:
            raise ValueError(f"--kafka: expected KEY=VALUE, got {setting!r}")
        config[key.strip()] = value.strip()
    return config


def _session(args):
    from odradek.spark.session import spark_session

    _check_reachable(args.master)
    return spark_session(args.master, app_name=f"odradek-{args.pipeline}")


def _check_reachable(master: str) -> None:
    """A standalone master (spark://host:port, or host1:port1,host2:port2 for HA) that no connection reaches is an
    OSError, the CLI's one line: Spark itself would retry for a minute and then print its traces."""
    if not master.startswith("spark://"):
        return
    errors = []
    for address in master.removeprefix("spark://").split(","):
        host, _, port = address.rpartition(":")
        try:
            socket.create_connection((host, int(port)), timeout=10).close()
            return
        except (OSError, ValueError) as exc:
            errors.append(f"{address}: {exc}")
    raise OSError(f"cannot reach the Spark master {master} ({'; '.join(errors)})")


def _run_warehouse_load(args) -> int:
    from odradek.spark.warehouse import warehouse_load

    spark = _session(args)
    try:
        loaded = warehouse_load(spark, _client_config(args), [t.strip() for t in args.topics.split(",")],
                                args.output, fail_on_data_loss=not args.allow_data_loss)
    finally:
        spark.stop()
    for r in loaded:
        print(f"{r.topic}-{r.partition}: offsets {r.start}..{r.end - 1}, {r.rows} rows")
    print(f"loaded {sum(r.rows for r in loaded)} rows from {len(loaded)} partition ranges into {args.output}")
    return 0


def _run_activity_stream(args) -> int:
    from odradek.spark.activity import activity_stream

    spark = _session(args)
    try:
        queries = activity_stream(spark, _client_config(args), args.input_topic, args.output_topic, args.output,
                                  args.checkpoint, watermark=args.watermark, available_now=args.available_now,
                                  trigger_seconds=args.trigger_seconds,
                                  max_offsets_per_trigger=args.max_offsets_per_trigger)
        try:
            for query in queries:
                query.awaitTermination()
        finally:
            for query in queries:
                query.stop()
    finally:
        spark.stop()
    return 0


def _run_changelog_snapshot(args) -> int:
    from odradek.spark.changelog import changelog_snapshot

    spark = _session(args)
    try:
        offsets = changelog_snapshot(spark, _client_config(args), args.topic, args.output)
    finally:
        spark.stop()
    print(f"snapshot of {args.topic} up to {json.dumps(offsets)} written to {args.output}")
    return 0


def _run_generate(args) -> int:
    import time

    from odradek.spark import generators

    config = _client_config(args)
    if args.kind == "orders":
        topic = args.topic or "orders"
        generators.produce_orders(args.bootstrap_server, topic, args.count, seed=args.seed, config=config)
        print(f"{args.count} orders written to {topic}")
    elif args.kind == "page-views":
        topic = args.topic or "page-views"
        minutes = 10
        start_ms = (int(time.time()) // 60 - minutes) * 60_000
        views = generators.produce_page_views(args.bootstrap_server, topic, args.count, start_ms=start_ms,
                                              minutes=minutes, seed=args.seed, config=config)
        print(f"{sum(views.values())} page views over the last {minutes} minutes written to {topic}")
    else:
        topic = args.topic or "profiles"
        state = generators.produce_profile_changes(args.bootstrap_server, topic, max(1, args.count // 10),
                                                   args.count, seed=args.seed, config=config)
        print(f"{args.count} profile changes written to {topic}; {len(state)} customers exist at the end")
    return 0
