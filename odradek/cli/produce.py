"""`odradek produce`: one record per input line (stdin or a file), like kafka-console-producer.

Records go through odradek.client.Producer, so keys are partitioned exactly as Java clients partition them. A line
is `KEY<separator>VALUE` when --key-separator is given (a line without the separator is a value with no key).
--command-config, --producer.config and --producer-property take Kafka's client properties, as
kafka-console-producer does. Sends are asynchronous and batched; the command waits for every acknowledgement and
fails if any record failed.
"""

from __future__ import annotations

import argparse
import sys

from odradek.cli.common import add_client_options, add_client_properties, command_config, key_value
from odradek.client import ClientError, Producer


def add_commands(commands) -> None:
    produce = commands.add_parser("produce", help="write lines from stdin or a file as records",
                                  description="Write each input line as one record.")
    produce.add_argument("topic")
    produce.add_argument("--file", "-f", type=argparse.FileType("rb"), default=None,
                         help="read lines from this file (default stdin)")
    produce.add_argument("--key-separator", "-K", metavar="SEP",
                         help="split each line at the first SEP into key and value")
    produce.add_argument("--header", "-H", type=key_value, action="append", default=[], metavar="KEY=VALUE",
                         help="a header on every record, repeatable")
    produce.add_argument("--partition", "-p", type=int, help="write to this partition (default: by key)")
    produce.add_argument("--acks", choices=["0", "1", "all"], default="all", help="acknowledgements (default all)")
    produce.add_argument("--compression", choices=["none", "gzip", "snappy", "lz4", "zstd"], default="none",
                         help="compress record batches with this codec (compression.type; default none)")
    add_client_options(produce)
    add_client_properties(produce, "producer")
    produce.set_defaults(run=run_produce)


def split_line(line: bytes, separator: bytes | None) -> tuple[bytes | None, bytes]:
    if separator is None or separator not in line:
        return None, line
    key, value = line.split(separator, 1)
    return key, value


def run_produce(args: argparse.Namespace) -> int:
    source = args.file or sys.stdin.buffer
    separator = args.key_separator.encode() if args.key_separator is not None else None
    headers = [(name, value.encode()) for name, value in args.header]
    sent = []
    config = {"compression.type": args.compression, **command_config(args)}
    with Producer(args.bootstrap_server, acks=config.pop("acks", args.acks), config=config) as producer:
        for line in source:
            key, value = split_line(line.rstrip(b"\r\n"), separator)
            sent.append(producer.send(args.topic, value, key, partition=args.partition, headers=headers))
    failures = [future.exception() for future in sent if future.exception() is not None]
    if failures:
        raise ClientError(f"{len(failures)} of {len(sent)} record(s) failed; first: {failures[0]}")
    print(f"Produced {len(sent)} record(s) to {args.topic}.", file=sys.stderr)
    return 0
