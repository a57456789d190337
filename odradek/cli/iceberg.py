"""`odradek iceberg describe TOPIC`: a topic's Iceberg table (odradek.iceberg.mode, docs/iceberg.md) beside its
log: per partition the log end offset (the high watermark, by ListOffsets), the next offset the table's last commit
recorded, and the lag between them; then the table's name, snapshot and when it was committed.

The catalog is the broker's: its iceberg.catalog.uri, iceberg.warehouse, iceberg.namespace and log.dirs are asked
by DescribeConfigs, resolved as the broker resolves them (a default SQLite catalog is a file in the broker's data
dir: read on the broker's machine), unless --catalog-uri (and --warehouse, --namespace) name it here.
"""

from __future__ import annotations

import argparse
import datetime

from confluent_kafka.admin import OffsetSpec

from odradek.cli.common import add_admin_options, admin_of, print_table
from odradek.client.errors import ClientError


def add_commands(commands) -> None:
    iceberg = commands.add_parser("iceberg", help="topics written into Iceberg tables",
                                  description="Topics written into Iceberg tables (docs/iceberg.md).")
    actions = iceberg.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    describe = actions.add_parser("describe", help="a topic's table and its lag behind the log",
                                  description="Per partition: the log end offset, the offset the table's last "
                                              "commit covers up to, and the lag between them.")
    describe.add_argument("topic")
    describe.add_argument("--catalog-uri", help="the catalog (default: the broker's iceberg.catalog.uri)")
    describe.add_argument("--warehouse", help="the warehouse (default: the broker's iceberg.warehouse)")
    describe.add_argument("--namespace", help="the namespace (default: the broker's iceberg.namespace)")
    add_admin_options(describe)
    describe.set_defaults(run=run_describe)


def run_describe(args: argparse.Namespace) -> int:
    from pyiceberg.exceptions import NoSuchTableError

    from odradek.iceberg.table import broker_catalog, committed_offsets, open_catalog

    admin = admin_of(args)
    [topic] = admin.describe_topics([args.topic])
    config, log_dir = broker_catalog(admin, args.catalog_uri, args.warehouse, args.namespace)
    try:
        table = open_catalog(config, log_dir).load_table((config["iceberg.namespace"], args.topic))
    except NoSuchTableError:
        raise ClientError(f"no table {config['iceberg.namespace']}.{args.topic} in {config['iceberg.catalog.uri']} "
                          f"(is odradek.iceberg.mode set on the topic?)") from None
    committed = committed_offsets(table)
    ends = admin.list_offsets(args.topic, [partition.partition for partition in topic.partitions],
                              OffsetSpec.latest())
    rows = []
    for partition in topic.partitions:
        end, done = ends.get(partition.partition), committed.get(partition.partition, 0)
        rows.append((partition.partition, end, done, None if end is None else max(end - done, 0)))
    print_table(("PARTITION", "LOG-END-OFFSET", "TABLE-OFFSET", "LAG"), rows)
    snapshot = table.current_snapshot()
    if snapshot is None:
        print(f"table {config['iceberg.namespace']}.{args.topic}: no snapshot yet")
    else:
        when = datetime.datetime.fromtimestamp(snapshot.timestamp_ms / 1000, datetime.UTC).isoformat()
        print(f"table {config['iceberg.namespace']}.{args.topic}: snapshot {snapshot.snapshot_id} at {when}")
    return 0
