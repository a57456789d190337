"""`odradek perf` and `odradek dump-log` as a user runs them against a real broker and its data directory."""

from __future__ import annotations

import io
import re
import shutil

from odradek.cli.perf import Progress
from odradek.client import Admin, Producer
from .run import odradek


def test_perf_produce_then_consume_report_throughput_and_latency(broker, topic_name):
    produced = odradek(broker, "perf", "produce", "--topic", topic_name, "--num-records", "3000",
                       "--record-size", "200", "--producer-property", "acks=all")
    assert produced.returncode == 0, produced.stderr
    assert re.fullmatch(r"3000 records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
                        r"[\d.]+ ms max latency, [\d.]+ ms 50th, [\d.]+ ms 95th, [\d.]+ ms 99th, "
                        r"[\d.]+ ms 99.9th\.\n", produced.stdout), produced.stdout
    assert "[#" not in produced.stderr  # no progress bar when stderr is not a terminal

    consumed = odradek(broker, "perf", "consume", "--topic", topic_name, "--messages", "3000")
    assert consumed.returncode == 0, consumed.stderr
    header, numbers = consumed.stdout.splitlines()
    assert header == ("start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
                      "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec")  # kafka-consumer-perf-test's
    fields = [field.strip() for field in numbers.split(",")]
    assert float(fields[2]) == round(3000 * 200 / 1024 / 1024, 4) and fields[4] == "3000"
    assert fields[6] == "0"  # no group: no rebalance
    grouped = odradek(broker, "perf", "consume", "--topic", topic_name, "--messages", "3000", "--group",
                      f"g-{topic_name}")
    assert grouped.returncode == 0, grouped.stderr
    fields = [field.strip() for field in grouped.stdout.splitlines()[1].split(",")]
    rebalance, fetch = int(fields[6]), int(fields[7])
    assert rebalance > 0 and fetch >= 0  # the join, then the fetching, as Kafka's tool splits the run

    short = odradek(broker, "perf", "consume", "--topic", topic_name, "--messages", "5000", "--timeout-ms", "500")
    assert short.returncode == 1 and "consumed 3000 of 5000" in short.stderr


def test_progress_bar_draws_only_on_a_terminal():
    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal, pipe = Terminal(), io.StringIO()
    for stream in (terminal, pipe):
        bar = Progress(100, stream)
        bar._drawn_at = -1.0
        bar.update(50)
        bar.finish()
    assert "[###############...............]  50%" in terminal.getvalue()
    assert pipe.getvalue() == ""


def _partition_dir(broker, topic):
    return broker.data_dir / f"{topic}-0"


def test_dump_log_decodes_batches_records_and_indexes(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 1, configs={"index.interval.bytes": "100"})
    with Producer(broker.bootstrap_servers, linger_ms=0, config={"compression.type": "gzip"}) as producer:
        for i in range(30):
            producer.send_sync(topic_name, f"value-{i}" * 5, f"key-{i}", headers=[("h", b"x")],
                               timestamp_ms=1_700_000_000_000 + i)
    directory = _partition_dir(broker, topic_name)
    segment = directory / "00000000000000000000.log"

    dumped = odradek(None, "dump-log", str(segment), "--print-data-log")
    assert dumped.returncode == 0, dumped.stderr
    lines = dumped.stdout.splitlines()
    assert lines[:2] == [f"Dumping {segment}", "Starting offset: 0"]
    batches = [line for line in lines if line.startswith("baseOffset:")]
    assert len(batches) == 30 and all("compresscodec: gzip" in b and "isvalid: true" in b for b in batches)
    assert batches[0].startswith("baseOffset: 0 lastOffset: 0 count: 1 ")
    records = [line for line in lines if line.startswith("| offset:")]
    assert records[3] == ("| offset: 3 CreateTime: 1700000000003 keySize: 5 valueSize: 35 sequence: -1 "
                          "headerKeys: [h] key: key-3 payload: " + "value-3" * 5)

    index = odradek(None, "dump-log", str(directory / "00000000000000000000.index"),
                    str(directory / "00000000000000000000.timeindex"))
    assert index.returncode == 0, index.stderr
    entries = [line for line in index.stdout.splitlines() if line.startswith("offset:")]
    times = [line for line in index.stdout.splitlines() if line.startswith("timestamp:")]
    assert len(entries) > 5 and len(times) > 5
    assert re.fullmatch(r"offset: \d+ position: \d+", entries[0])


def test_dump_log_reports_a_bad_crc_and_a_torn_tail(broker, topic_name, tmp_path):
    with Producer(broker.bootstrap_servers, linger_ms=0) as producer:
        for i in range(3):
            producer.send_sync(topic_name, f"record {i}")
    copy = tmp_path / "00000000000000000000.log"
    data = bytearray(_partition_dir(broker, topic_name).joinpath(copy.name).read_bytes())
    data[-3] ^= 0xFF  # inside the last batch's records
    copy.write_bytes(bytes(data) + b"\x00\x01\x02")

    dumped = odradek(None, "dump-log", str(copy))
    assert dumped.returncode == 1
    batches = [line for line in dumped.stdout.splitlines() if line.startswith("baseOffset:")]
    assert [b.endswith("isvalid: true") for b in batches] == [True, True, False]
    assert "Found 3 invalid bytes at the end of" in dumped.stdout
    problems = dumped.stderr.splitlines()
    assert len(problems) == 2 and all(line.startswith("odradek: ") for line in problems)
    assert "fails its CRC" in problems[0] and "not a whole record batch" in problems[1]

    shutil.copy(copy, tmp_path / "not-a-segment.txt")
    wrong = odradek(None, "dump-log", str(tmp_path / "not-a-segment.txt"))
    assert wrong.returncode == 1 and "not a .log, .index or .timeindex file" in wrong.stderr
