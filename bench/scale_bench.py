"""How one broker's costs grow with its partition count and its connection count (issue 18, Scale).

For each partition count (topics of 100 partitions, one broker process, single node) it measures: the time to
create them (CreateTopics, 10 topics a request), a Metadata request for all topics, the broker's RSS, open file
descriptors (/proc/<pid>/fd) and disk use, a Fetch of 1,000 partitions (max_wait_ms=0) with every partition empty
and with one batch in each, the time a clean stop (SIGTERM) takes after the creation and again after a restart
with nothing written, and the time until the broker is ready after a clean restart and after kill -9 (recovery).
The Metadata and Fetch round trips read their answers as bytes without decoding them: the Python codec takes 20
times as long to decode 10,000 partitions' Metadata as the broker takes to answer.
Then, on a broker with few partitions, it opens idle connections (the test process's RLIMIT_NOFILE is raised
first) and measures RSS per connection and ApiVersions latency while they are open. Everything goes over the
raw protocol (tests/broker/raw_client.py), so the client is a socket and a codec, not a library's machinery.
Results: bench/results/<date>-scale.json and a log-log chart <date>-scale.png beside it.
Run: `python bench/scale_bench.py [--counts 1000 10000 50000] [--connections 10000] [--label before]`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from odradek.embedded import BrokerProcess  # noqa: E402
from bench.request_cost import round_trip_ms  # noqa: E402
from odradek.protocol import RequestHeader, api, encode_request  # noqa: E402
from odradek.records.batch import Record, encode_batch  # noqa: E402
from tests.broker.raw_client import RawClient  # noqa: E402

PARTITIONS_PER_TOPIC = 100
TOPICS_PER_REQUEST = 10
FETCHED_PARTITIONS = 1000
ROUND_TRIPS = 20
METADATA_ALL = {"topics": None, "allow_auto_topic_creation": False, "include_topic_authorized_operations": False}
RESULTS = Path(__file__).resolve().parent / "results"
CreateTopics = api("CreateTopics").request
Fetch = api("Fetch").request
Produce = api("Produce").request


def timed(action) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def median_seconds(action, runs: int = 5) -> float:
    return statistics.median(timed(action) for _ in range(runs))


def process_figures(pid: int) -> dict:
    """RSS (MiB) and open file descriptors of a process."""
    rss_kib = next(int(line.split()[1]) for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                   if line.startswith("VmRSS:"))
    return {"rss_mib": rss_kib / 1024, "open_fds": len(os.listdir(f"/proc/{pid}/fd"))}


def disk_mib(path: Path) -> float:
    output = subprocess.run(["du", "-sk", str(path)], capture_output=True, text=True, check=True).stdout
    return int(output.split()[0]) / 1024


def topic_names(count: int) -> list[str]:
    return [f"scale-{index:04d}" for index in range(count // PARTITIONS_PER_TOPIC)]


def create_topics(client: RawClient, names: list[str]) -> None:
    for start in range(0, len(names), TOPICS_PER_REQUEST):
        answer = client.call("CreateTopics", 5, timeout_ms=600_000, validate_only=False, topics=[
            CreateTopics.CreatableTopic(name=name, num_partitions=PARTITIONS_PER_TOPIC, replication_factor=1)
            for name in names[start:start + TOPICS_PER_REQUEST]])
        errors = [topic.error_code for topic in answer.topics if topic.error_code]
        assert not errors, errors


def request_frame(api_name: str, version: int, **fields) -> bytes:
    target = api(api_name)
    return encode_request(RequestHeader(api_key=target.key, api_version=version, correlation_id=1,
                                        client_id="scale-bench"), target.request(**fields))


def metadata_all(client: RawClient) -> int:
    answer = client.call("Metadata", 12, **METADATA_ALL)
    return sum(len(topic.partitions) for topic in answer.topics)


def fetched_partitions(names: list[str]) -> list[tuple[str, list[int]]]:
    topics = names[:FETCHED_PARTITIONS // PARTITIONS_PER_TOPIC]
    return [(name, list(range(PARTITIONS_PER_TOPIC))) for name in topics]


def fetch_fields(partitions: list[tuple[str, list[int]]]) -> dict:
    return {"replica_id": -1, "max_wait_ms": 0, "min_bytes": 0, "max_bytes": 50 << 20, "isolation_level": 0,
            "session_id": 0, "session_epoch": -1, "forgotten_topics_data": [], "rack_id": "", "topics": [
                Fetch.FetchTopic(topic=name, partitions=[
                    Fetch.FetchPartition(partition=index, fetch_offset=0, partition_max_bytes=1 << 20)
                    for index in indexes]) for name, indexes in partitions]}


def fetched_bytes(client: RawClient, partitions: list[tuple[str, list[int]]]) -> int:
    answer = client.call("Fetch", 11, **fetch_fields(partitions))
    return sum(len(partition.records or b"") for topic in answer.responses for partition in topic.partitions)


def produce_one_batch_each(client: RawClient, partitions: list[tuple[str, list[int]]]) -> int:
    """The size of the batch each partition got."""
    batch = encode_batch([Record(index, 1_700_000_000_000, None, b"x" * 100) for index in range(10)])
    answer = client.call("Produce", 9, transactional_id=None, acks=1, timeout_ms=30_000, topic_data=[
        Produce.TopicProduceData(name=name, partition_data=[
            Produce.PartitionProduceData(index=index, records=batch) for index in indexes])
        for name, indexes in partitions])
    errors = [p.error_code for topic in answer.responses for p in topic.partition_responses if p.error_code]
    assert not errors, errors[:5]
    return len(batch)


def ready_after(broker: BrokerProcess, names: list[str], stop) -> tuple[float, float]:
    """Seconds `stop` took, and from starting the broker again until a Metadata request lists every partition."""
    stop_s = timed(stop)
    started = time.perf_counter()
    broker.start(timeout=1800)
    client = RawClient(broker.port)
    try:
        while metadata_all(client) < len(names) * PARTITIONS_PER_TOPIC:
            time.sleep(0.05)
    finally:
        client.close()
    return stop_s, time.perf_counter() - started


def measure_partitions(count: int, workdir: Path) -> dict:
    names = topic_names(count)
    broker = BrokerProcess(workdir / f"p{count}", settings={"auto.create.topics.enable": "false"}).start()
    try:
        client = RawClient(broker.port)
        client.sock.settimeout(1800)
        row = {"partitions": count, "create_s": timed(lambda: create_topics(client, names))}
        assert metadata_all(client) == count
        row["metadata_all_round_trip_ms"] = round_trip_ms(broker.port, request_frame("Metadata", 12, **METADATA_ALL),
                                                          ROUND_TRIPS)
        row.update({f"after_create_{key}": value for key, value in process_figures(broker.process.pid).items()})
        fetched = fetched_partitions(names)
        fetch_frame = request_frame("Fetch", 11, **fetch_fields(fetched))
        row["fetch_1000_empty_round_trip_ms"] = round_trip_ms(broker.port, fetch_frame, ROUND_TRIPS)
        batch_bytes = produce_one_batch_each(client, fetched)
        assert fetched_bytes(client, fetched) == batch_bytes * FETCHED_PARTITIONS
        row["fetch_1000_data_round_trip_ms"] = round_trip_ms(broker.port, fetch_frame, ROUND_TRIPS)
        client.close()
        row["disk_mib"] = disk_mib(broker.data_dir)
        row["first_stop_s"], row["clean_restart_s"] = ready_after(broker, names, broker.stop)
        row.update({f"after_restart_{key}": value for key, value in process_figures(broker.process.pid).items()})
        _, row["kill9_restart_s"] = ready_after(broker, names, broker.kill)
        row.update({f"after_recovery_{key}": value for key, value in process_figures(broker.process.pid).items()})
        row["clean_stop_s"] = timed(lambda: broker.stop(timeout=600))  # nothing written since the start
        return row
    finally:
        broker.stop(timeout=600)


def raise_fd_limit(wanted: int) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = min(max(soft, wanted), hard)
    resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    return target


def measure_connections(count: int, workdir: Path) -> dict:
    broker = BrokerProcess(workdir / "connections").start()
    sockets: list[socket.socket] = []
    try:
        client = RawClient(broker.port)
        api_versions = lambda: client.call("ApiVersions", 3, client_software_name="scale-bench",  # noqa: E731
                                           client_software_version="1")
        idle_latency = median_seconds(api_versions, 50)
        before = process_figures(broker.process.pid)
        for _ in range(count):
            sockets.append(socket.create_connection(("127.0.0.1", broker.port)))
        deadline = time.monotonic() + 120
        while process_figures(broker.process.pid)["open_fds"] < before["open_fds"] + count:
            if time.monotonic() > deadline:
                break
            time.sleep(0.2)
        after = process_figures(broker.process.pid)
        loaded_latency = median_seconds(api_versions, 50)
        client.close()
        return {"connections": count, "accepted": after["open_fds"] - before["open_fds"],
                "rss_per_connection_kib": (after["rss_mib"] - before["rss_mib"]) * 1024 / count,
                "rss_mib": after["rss_mib"], "api_versions_idle_ms": idle_latency * 1000,
                "api_versions_with_connections_ms": loaded_latency * 1000}
    finally:
        for sock in sockets:
            sock.close()
        broker.stop(timeout=120)


GROWTH_METRICS = [("create_s", "create (s)"), ("metadata_all_round_trip_ms", "Metadata all topics (ms)"),
                  ("clean_restart_s", "ready after clean restart (s)"), ("kill9_restart_s", "ready after kill -9 (s)"),
                  ("first_stop_s", "clean stop after create (s)"), ("clean_stop_s", "clean stop after a restart (s)"),
                  ("after_restart_open_fds", "open fds after restart"), ("after_restart_rss_mib", "RSS (MiB)"),
                  ("disk_mib", "disk (MiB)"),
                  ("fetch_1000_data_round_trip_ms", "Fetch 1,000 partitions with data (ms)")]


def draw(runs: dict[str, list[dict]], path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(2, 5, figsize=(20, 7))
    for axis, (key, title) in zip(axes.flat, GROWTH_METRICS):
        for label, rows in runs.items():
            points = [(row["partitions"], row[key]) for row in rows if row.get(key)]
            if points:
                axis.plot(*zip(*points), marker="o", label=label)
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_title(title, fontsize=9)
        axis.set_xlabel("partitions", fontsize=8)
        axis.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=90)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1000, 10000, 50000])
    parser.add_argument("--connections", type=int, default=10000, help="0: skip the connection test")
    parser.add_argument("--label", default="after", help="the name this run is kept under in the results file")
    parser.add_argument("--dir", type=Path, default=None, help="where the brokers' data goes (default: a tmp dir)")
    args = parser.parse_args()
    # the broker process inherits the limit: 50,000 partitions or 10,000 connections need more than 1,024 files
    raise_fd_limit(max(args.counts) * 3 + args.connections + 1000)
    date = datetime.date.today().isoformat()
    out = RESULTS / f"{date}-scale.json"
    results = json.loads(out.read_text()) if out.exists() else {"runs": {}, "connections": {}}
    results["meta"] = {"cpus": os.cpu_count(), "load_average": os.getloadavg(),
                       "fd_limit": resource.getrlimit(resource.RLIMIT_NOFILE)}
    with tempfile.TemporaryDirectory(dir=args.dir) as workdir:
        rows = []
        for count in args.counts:
            rows.append(measure_partitions(count, Path(workdir)))
            print(json.dumps(rows[-1]), flush=True)
            results["runs"][args.label] = rows
            out.write_text(json.dumps(results, indent=1) + "\n")
        if args.connections:
            results["connections"][args.label] = measure_connections(args.connections, Path(workdir))
            print(json.dumps(results["connections"][args.label]), flush=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    draw(results["runs"], out.with_suffix(".png"))
    print(f"wrote {out} and {out.with_suffix('.png')}")


if __name__ == "__main__":
    main()
