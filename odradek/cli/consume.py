"""`odradek consume`: print records as raw lines or JSON, like kafka-console-consumer.

Without --group the partitions are assigned directly (all of them, or --partition) and nothing is committed; with
--group the command joins that group and commits what it printed. The start is the latest offset unless
--from-beginning, --offset or --from-time says otherwise (in a group, committed offsets win over --from-beginning,
as in Kafka). It stops after --max-messages, after --idle-timeout-ms with nothing new, or on Ctrl-C; like Kafka's
console consumer, Ctrl-C still reports (and in a group commits) what was printed, then exits 130 (128 + SIGINT).
Record batches are checked against their CRC (check.crcs, as Kafka's Java consumer does): a corrupted one is an
error naming its partition and offset, never a record silently missing. --command-config, --consumer.config and
--consumer-property take Kafka's client properties, as kafka-console-consumer does.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time

import confluent_kafka

from odradek.cli.common import (INTERRUPTED_EXIT_CODE, UsageError, add_admin_options, add_client_properties, admin_of,
                                command_config)
from odradek.client import Admin, ClientError, Message
from odradek.client.behind import Behind
from odradek.client.errors import LIBRDKAFKA_LOGGER, ConnectionFailures
from odradek.client.options import timestamp_ms

BATCH_SIZE = 500  # records taken from the client per call
CLOSE_TIMEOUT_S = 30.0  # what Kafka's consumer.close() waits by default (30 s)


def add_commands(commands) -> None:
    consume = commands.add_parser("consume", help="print records of a topic",
                                  description="Print the records of a topic, one per line, until --max-messages, "
                                              "--idle-timeout-ms or Ctrl-C (which exits 130, as Kafka's "
                                              "console consumer).")
    consume.add_argument("topic")
    start = consume.add_mutually_exclusive_group()
    start.add_argument("--from-beginning", action="store_true", help="start at the earliest offset")
    start.add_argument("--offset", type=int, help="start at this offset (in every partition read)")
    start.add_argument("--from-time", type=timestamp_ms, metavar="TIME",
                       help="start at the first record at or after TIME (epoch ms or ISO-8601)")
    consume.add_argument("--partition", "-p", type=int, help="read only this partition (not with --group)")
    consume.add_argument("--group", "-g", help="consume as a member of this group, committing progress")
    consume.add_argument("--format", choices=["raw", "json"], default="raw",
                         help="raw: the value (and key) as text; json: one object per record")
    consume.add_argument("--print-key", action="store_true", help="raw format: print KEY<separator>VALUE")
    consume.add_argument("--key-separator", default="\t", metavar="SEP", help="raw format key separator (tab)")
    consume.add_argument("--max-messages", "-n", type=int, help="stop after this many records")
    consume.add_argument("--idle-timeout-ms", type=int, metavar="MS",
                         help="stop when nothing arrives for this long, counted from when every partition read has "
                              "reached its end (in a group: after joining; default: run until Ctrl-C)")
    add_admin_options(consume)
    add_client_properties(consume, "consumer")
    consume.set_defaults(run=run_consume)


def _text(data: bytes | None) -> str | None:
    return None if data is None else data.decode("utf-8", "replace")


def format_message(message: Message, args: argparse.Namespace) -> str:
    if args.format == "json":
        return json.dumps({"topic": message.topic, "partition": message.partition, "offset": message.offset,
                           "timestamp": message.timestamp_ms, "key": _text(message.key),
                           "value": _text(message.value),
                           "headers": {name: _text(value) for name, value in message.headers}})
    value = _text(message.value) or ""
    return f"{_text(message.key) or ''}{args.key_separator}{value}" if args.print_key else value


def start_offsets(admin: Admin, args: argparse.Namespace, partitions: list[int]) -> dict[int, int] | None:
    """Where to start in each partition, or None to let the group's committed offsets / auto.offset.reset decide."""
    if args.offset is not None:
        return {p: args.offset for p in partitions}
    if args.from_time is not None:
        return admin.offsets_for_time(args.topic, partitions, args.from_time)
    if args.group is None:
        end = confluent_kafka.OFFSET_BEGINNING if args.from_beginning else confluent_kafka.OFFSET_END
        return {p: end for p in partitions}
    return None


def run_consume(args: argparse.Namespace) -> int:
    if args.group is not None and args.partition is not None:
        raise UsageError("--partition reads without a group; leave out --group")
    admin = admin_of(args)
    count = admin.partition_count(args.topic)
    if count is None:
        raise ClientError(f"UNKNOWN_TOPIC_OR_PART: topic {args.topic!r} does not exist", "UNKNOWN_TOPIC_OR_PART")
    if args.partition is not None and not 0 <= args.partition < count:
        raise ClientError(f"UNKNOWN_TOPIC_OR_PART: topic {args.topic!r} has partitions 0..{count - 1}, "
                          f"not {args.partition}", "UNKNOWN_TOPIC_OR_PART")
    failures = ConnectionFailures(args.bootstrap_server)  # what no retry mends; librdkafka retries the rest
    consumer = confluent_kafka.Consumer({
        "group.id": args.group or "odradek-console-consumer",
        "auto.offset.reset": "earliest" if args.from_beginning else "latest", **command_config(args),
        "bootstrap.servers": args.bootstrap_server, "enable.auto.commit": args.group is not None,
        "enable.auto.offset.store": False, "enable.partition.eof": True, "check.crcs": True,
        "logger": LIBRDKAFKA_LOGGER, "error_cb": failures})
    behind = Behind()
    if args.group is None:
        partitions = [args.partition] if args.partition is not None else list(range(count))
        offsets = start_offsets(admin, args, partitions)
        consumer.assign([confluent_kafka.TopicPartition(args.topic, p, offset) for p, offset in offsets.items()])
        behind.assigned(partitions)
    else:
        def on_assign(consumer, assigned):
            offsets = start_offsets(admin, args, [tp.partition for tp in assigned])
            if offsets is not None:
                for tp in assigned:
                    tp.offset = offsets[tp.partition]
            consumer.assign(assigned)
            behind.assigned(tp.partition for tp in assigned)

        consumer.subscribe([args.topic], on_assign=on_assign)
    interrupt = Interrupt()
    try:
        printed = _print_records(consumer, args, behind, failures, interrupt)
    finally:
        _close(consumer)  # in a group: commits the stored offsets of what was printed
    print(f"Processed a total of {printed} messages", file=sys.stderr)
    return INTERRUPTED_EXIT_CODE if interrupt.requested else 0


class Interrupt:
    """Ctrl-C (SIGINT) asks the consumer to stop instead of raising KeyboardInterrupt wherever the main thread is:
    the loop stops between batches, so every record printed is counted and stored for the commit, and none is
    stored unprinted. A second Ctrl-C ends the process at once, as a JVM's does while its shutdown hooks run."""

    def __init__(self):
        self.requested = False
        signal.signal(signal.SIGINT, self)

    def __call__(self, signum, frame) -> None:
        if self.requested:
            os._exit(INTERRUPTED_EXIT_CODE)
        self.requested = True


def _close(consumer) -> None:
    """consumer.close() (the final commit, leaving the group), bounded as Kafka's consumer bounds it by default:
    what librdkafka has not done by then is given up, said in one line."""
    closing = threading.Thread(target=consumer.close, name="odradek-consumer-close", daemon=True)
    closing.start()
    closing.join(CLOSE_TIMEOUT_S)
    if closing.is_alive():
        print(f"odradek: the consumer did not close within {CLOSE_TIMEOUT_S:g}s (commit or group leave unanswered); "
              "giving up", file=sys.stderr, flush=True)
        os._exit(1)


def _print_records(consumer, args: argparse.Namespace, behind: Behind, failures: ConnectionFailures,
                   interrupt: Interrupt) -> int:
    """Print until --max-messages, --idle-timeout-ms (counted once `behind` is caught up), Ctrl-C, or until nobody
    reads stdout any more (`| head -1`: said in one line, as Kafka's console consumer says it); returns the records
    printed. A record's offset is stored for the commit once its line is written out."""
    printed = 0
    last_seen = time.monotonic()
    out = sys.stdout
    while (args.max_messages is None or printed < args.max_messages) and not interrupt.requested:
        wanted = BATCH_SIZE if args.max_messages is None else min(BATCH_SIZE, args.max_messages - printed)
        shown = []
        batch = consumer.consume(wanted, 0.2)
        if batch:
            failures.reached()
        for raw in batch:
            error = raw.error()
            if error is not None:
                if error.code() == confluent_kafka.KafkaError._BAD_MSG:  # check.crcs, as Java's consumer
                    raise ClientError(f"Record batch for partition {raw.topic()}-{raw.partition()} at offset "
                                      f"{raw.offset()} is invalid, cause: {error.str()}", "CORRUPT_MESSAGE")
                if error.code() != confluent_kafka.KafkaError._PARTITION_EOF:
                    raise ClientError.of(error)
                behind.reached_end(raw.partition())
                continue
            shown.append(raw)
        failures.check()
        if shown:
            try:
                out.write("".join(format_message(Message.of(raw), args) + "\n" for raw in shown))
                out.flush()
            except BrokenPipeError:
                os.dup2(os.open(os.devnull, os.O_WRONLY), out.fileno())  # nor at exit
                print("Unable to write to standard out, closing consumer.", file=sys.stderr)
                break
            for raw in shown:
                consumer.store_offsets(raw)
            printed += len(shown)
        if shown or not behind.caught_up:
            last_seen = time.monotonic()
        elif args.idle_timeout_ms is not None and time.monotonic() - last_seen >= args.idle_timeout_ms / 1000:
            break
    return printed
