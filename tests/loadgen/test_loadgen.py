"""The C load generator (bench/loadgen) against a real broker: built by `make loadgen`, its producers' records
(librdkafka's and the wire producer's own encoding) are what a Kafka consumer reads back, its consumers read every
record of every partition from the start, several processes share the work, and the small-requests setting puts one
record in each Produce request."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from bench import client, loadgen, peers
from bench.workloads import small_requests
from odradek.embedded import BrokerProcess

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module", autouse=True)
def built():
    if shutil.which("gcc") is None or not Path("/usr/include/librdkafka/rdkafka.h").exists():
        pytest.skip("gcc or librdkafka-dev missing (make bench-packages installs them as root)")
    # the venv running the tests is the one whose confluent-kafka wheel lends its librdkafka
    subprocess.run(["make", "--no-print-directory", "loadgen", f"VENV={sys.prefix}"], cwd=ROOT, check=True,
                   capture_output=True)


@pytest.fixture(scope="module")
def metered(tmp_path_factory):
    """One broker for the module, with its Prometheus endpoint on (to count requests)."""
    port = peers.free_port()
    with BrokerProcess(tmp_path_factory.mktemp("loadgen") / "data", settings={"metrics.port": port}) as broker:
        broker.metrics_port = port
        yield broker


def produce_requests(broker) -> float:
    text = urllib.request.urlopen(f"http://127.0.0.1:{broker.metrics_port}/metrics", timeout=10).read().decode()
    return sum(float(line.split()[-1]) for line in text.splitlines()
               if line.startswith('odradek_requests_total{api="Produce"'))


def produce_requests_since(broker, before: float, expected: int) -> float:
    """The Produce requests the broker counted since it counted `before`, read once they reach `expected` (or after
    10 s). The broker counts a request after its answer is written, and its metrics thread can serve a scrape in
    between: a read as soon as the clients have their last answers may miss them."""
    deadline = time.monotonic() + 10
    while (counted := produce_requests(broker) - before) < expected and time.monotonic() < deadline:
        time.sleep(0.01)
    return counted


def read_all(bootstrap: str, topic: str, partitions: int, expected: int) -> list:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": topic, "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    records = []
    for _ in range(30):
        records += consumer.consume(expected, 1.0)
        if len(records) >= expected:
            break
    consumer.close()
    return records


def test_produced_records_read_back_by_a_kafka_consumer_and_by_the_c_consumer(metered, topic_name):
    bootstrap = metered.bootstrap_servers
    client.create_topic(bootstrap, topic_name, 3)
    produced = loadgen.produce(bootstrap, topic_name, 3001, processes=2, size=100, keys=50,
                               config={"acks": "all", "linger.ms": 5, "compression.codec": "zstd"})
    assert (produced.records, produced.bytes) == (3001, 300_100)
    assert produced.client_cpu > 0 and produced.seconds > 0

    records = read_all(bootstrap, topic_name, 3, 3001)
    assert len(records) == 3001 and not any(r.error() for r in records)
    assert {len(r.value()) for r in records} == {100}
    assert {r.key() for r in records} == {b"key-%011d" % k for k in range(50)}
    per_partition = [0, 0, 0]
    for record in records:
        per_partition[record.partition()] += 1
    assert tuple(per_partition) == produced.partition_records and all(per_partition)  # keys spread over all 3

    for processes in (1, 2):
        consumed = loadgen.consume(bootstrap, topic_name, produced.partition_records, processes=processes)
        assert (consumed.records, consumed.bytes) == (3001, 300_100)
        assert consumed.partition_records == produced.partition_records


def test_the_wire_programs_records_are_what_a_kafka_consumer_reads_and_they_read_every_one(metered, topic_name):
    """The wire producer's batches (built once, sent again and again, 3 full ones per process and the rest in a
    last one) pass the broker's checks of every record; a librdkafka consumer reads them at dense offsets, and the
    wire consumer counts exactly them, one process or two, and with answers held to a small size limit."""
    bootstrap = metered.bootstrap_servers
    client.create_topic(bootstrap, topic_name, 3)
    batch_size = 61 + 116 * 500  # 500 records of 100 bytes per batch (the producer counts 116 bytes per record)
    before = produce_requests(metered)
    produced = loadgen.produce(bootstrap, topic_name, 3001, processes=2, config={"acks": "all",
                               "batch.size": batch_size}, wire_partitions=3)
    assert (produced.records, produced.bytes) == (3001, 300_100)
    # 1501 records: 3 requests of 500 and one of 1; 1500: 3 of 500 (the wire producer sends a batch per request)
    assert produce_requests_since(metered, before, 7) == 7
    records = read_all(bootstrap, topic_name, 3, 3001)
    assert len(records) == 3001 and not any(r.error() for r in records)
    assert {len(r.value()) for r in records} == {100} and {r.key() for r in records} == {None}
    for partition, count in enumerate(produced.partition_records):
        offsets = sorted(r.offset() for r in records if r.partition() == partition)
        assert offsets == list(range(count)) and count > 0

    for processes, config in ((1, {}), (2, {}), (1, {"max.partition.fetch.bytes": 80_000})):
        consumed = loadgen.consume(bootstrap, topic_name, produced.partition_records, processes=processes,
                                   config=config, wire=True)
        assert (consumed.records, consumed.partition_records) == (3001, produced.partition_records)


def test_wire_consumers_tailing_while_the_wire_producers_write_read_every_record(metered, topic_name):
    """The loadgen workload's tailed round: producers and consumers started together, the consumers reading each
    partition as it fills (from offset 0, before anything is there) until they have what the same producers wrote
    in a run before, and not a record more or less."""
    bootstrap = metered.bootstrap_servers
    config = {"acks": "1", "batch.size": 61 + 116 * 500}
    client.create_topic(bootstrap, topic_name, 3)
    before = loadgen.produce(bootstrap, topic_name, 30_001, processes=2, config=config, wire_partitions=3)
    client.create_topic(bootstrap, f"{topic_name}-tailed", 3)
    produced, consumed = loadgen.produce_while_consumed(
        bootstrap, f"{topic_name}-tailed", 30_001, before.partition_records, producers=2, consumers=2,
        config=config, wire_partitions=3)
    assert produced.records == consumed.records == 30_001
    assert consumed.partition_records == before.partition_records
    assert consumed.seconds > 0


def test_a_wire_producer_refused_by_the_broker_fails_the_run_with_the_error_code(metered, topic_name):
    with pytest.raises(RuntimeError, match="error code 3 for partition 0"):  # UNKNOWN_TOPIC_OR_PARTITION
        loadgen.produce(metered.bootstrap_servers, topic_name, 10, config={"acks": "1"}, wire_partitions=1)


def test_small_requests_setting_sends_one_record_per_produce_request(metered, topic_name):
    bootstrap = metered.bootstrap_servers
    client.create_topic(bootstrap, topic_name, 4)
    before = produce_requests(metered)
    done = loadgen.produce(bootstrap, topic_name, 400, processes=small_requests.PRODUCERS,
                           config=small_requests.PRODUCER)
    assert done.records == 400
    assert produce_requests_since(metered, before, 400) == 400


def test_a_failing_process_fails_the_run_with_its_message(metered, topic_name):
    with pytest.raises(RuntimeError, match="no.such.setting"):
        loadgen.produce(metered.bootstrap_servers, topic_name, 10, processes=2, config={"no.such.setting": 1})


def test_latency_mode_keeps_the_rate_and_reports_ordered_latencies(metered, topic_name):
    """At 5k records/s for 2 s (after 0.5 s of warm-up) on one broker: every record after the warm-up is counted,
    the percentiles are in order, and the producer is paced at the rate it was given (never above it, and not
    far below it even on a loaded machine). How small the latencies are is bench/replication_latency.py's to
    measure: here they only have to be those of records that arrived, not of ones stuck until a timeout."""
    bootstrap = metered.bootstrap_servers
    client.create_topic(bootstrap, topic_name, 1)
    figures = loadgen.latency(bootstrap, topic_name, 5000, 2.0, warmup_seconds=0.5,
                              config={"acks": "all", "linger.ms": 0})
    assert figures.count == 10_000, figures
    assert 0 < figures.p50 <= figures.p99 <= figures.p99_9 <= figures.max < 10_000, figures  # ms
    assert 2500 < figures.records_per_s < 5500, figures
    assert figures.behind_schedule_ms >= 0, figures


@pytest.mark.parametrize("label", ["floor", "python-floor"])
def test_the_floor_servers_answer_every_frame_with_its_correlation_id(label):
    """bench/request_cost.py --floor counts answers by their size prefix; each floor server (C and Python) must
    answer each whole frame once, in order, whether frames arrive several to a send or split across sends."""
    from bench.request_cost import FloorServer, produce_frame

    floor = FloorServer(label).start()
    try:
        frame = bytearray(produce_frame("t", 0))
        frames = []
        for correlation_id in range(1, 6):
            frame[8:12] = correlation_id.to_bytes(4, "big")
            frames.append(bytes(frame))
        with socket.create_connection(("127.0.0.1", floor.port), timeout=10) as sock:
            # two whole, and a third cut inside its header; the pauses let each piece arrive alone
            for piece in (frames[0] + frames[1] + frames[2][:7], frames[2][7:] + frames[3][:30],
                          frames[3][30:] + frames[4]):
                sock.sendall(piece)
                time.sleep(0.05)
            answers = b""
            while len(answers) < 5 * 60 and (received := sock.recv(4096)):
                answers += received
        assert len(answers) == 5 * 60
        assert [int.from_bytes(answers[i * 60:i * 60 + 4], "big") for i in range(5)] == [56] * 5
        assert [int.from_bytes(answers[i * 60 + 4:i * 60 + 8], "big") for i in range(5)] == [1, 2, 3, 4, 5]
    finally:
        floor.stop()
