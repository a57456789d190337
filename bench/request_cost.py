"""Broker CPU per small request: what one single-record Produce, one small Fetch and one Metadata of a
1000-partition topic cost the broker, independent of how fast the clients are.

Many clients sending one record per request (linger.ms=0) make the broker's per-request path (frame cutting,
header and body decode, dispatch, handler, response encode, the write) the whole cost, so this measures exactly
that: a broker (odradek.embedded.BrokerProcess, running the code on PYTHONPATH) is driven by K client processes,
each with one raw socket on which it keeps WINDOW requests in flight, every request the same pre-encoded frame
(no client-side encoding, so the clients stay cheap). The figure is the broker process's CPU time (utime + stime
of all its threads, from /proc/<pid>/stat) before and after, divided by the number of requests answered. CPU per
request is far less disturbed by a shared, loaded machine than a rate; each case is the median of several rounds.

- produce: Produce v9 (what librdkafka 2.x sends), acks=1, one 100-byte record per request, a partition per
  client (4 partitions, 4 clients by default).
- fetch: Fetch v12 (no fetch session), one partition from offset 0, partition_max_bytes 1 KiB, min_bytes 0:
  each answer carries a few small batches and nothing waits.
- fetch-tail: the same from TAIL_RECORDS - 5 of a partition holding TAIL_RECORDS one-record batches, nothing
  written after them: a consumer near the log end (the active segment's batches after its last index entry).
- metadata: Metadata v12 for one topic of 1000 partitions, one client, one request at a time; also the
  round-trip latency as the client sees it.
- api-versions: ApiVersions v3, as many clients and in flight as produce: what every request pays (the
  connection's loop, header decode, dispatch, an answer's encode and send) with a handler that returns a ready
  answer (52 entries to encode).

`python -m bench.request_cost [label=path ...] [--requests N] [--rounds R]` prints one line per tree and case:
each source tree named (default: this one) gets its own broker, and the trees are measured round by round in turn,
so that a change can be compared with the code before it in the same run; with several trees, each later one is
also given as a ratio to the first, the median of the rounds' ratios (this machine has minutes-long phases in which
everything costs up to twice as much, which a ratio taken round by round cancels out). To see where the time goes,
run it with --hold and attach `py-spy record --native -p PID` (each broker's pid is printed) while it runs.

With --floor the same clients also drive two servers that answer every frame with a fixed answer and do nothing
else, in the same rounds: build/loadgen/floor-server (bench/loadgen/floor-server.c, `make loadgen`), in C, whose CPU
per request is the least any broker's can be on this machine (loopback TCP, wake-ups, the loop), and
bench/python_floor.py, the same in Python on uvloop, Odradek's runtime: what the interpreter and the event loop take
of a request before a broker does anything. The brokers' figures are given beside both as ratios.

With --instructions each broker runs under valgrind's callgrind instead, which counts the instructions the broker
executes in user space while the clients run (the kernel's part, 14% of a pipelined small request's CPU and 46%
with one in flight, is not counted): the same count within 1% run after run (a one-record Produce: 121,933 to
122,062 instructions over five runs), whatever else the machine is doing, where CPU time moves by half. It runs
about 50 times slower, so one round of a few thousand requests is enough; this is the figure to compare two trees
by when a change is worth a few percent. Compare runs of the same --cases: each case runs on what the ones before it left in the log.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import multiprocessing
import os
import re
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odradek.client import Admin
from odradek.embedded import BrokerProcess, free_port
from odradek.protocol import RequestHeader, api, encode_request
from odradek.records.batch import Record, encode_batch

CLIENTS = 4
WINDOW = 16  # requests in flight per connection
METADATA_PARTITIONS = 1000
TAIL_RECORDS = 100  # per partition of the fetch-tail case's topic: 17 KB, the last ones behind the last index entry
_SIZE = struct.Struct(">i")
_TICKS = os.sysconf("SC_CLK_TCK")
REPOSITORY = Path(__file__).resolve().parent.parent
FLOOR_SERVER = REPOSITORY / "build" / "loadgen" / "floor-server"
FLOORS = {"floor": [str(FLOOR_SERVER)],  # the floor servers' labels among the trees', and their commands
          "python-floor": [sys.executable, "-m", "bench.python_floor"]}


def broker_cpu_seconds(pid: int) -> float:
    """utime + stime of every thread of process `pid` (fields 14 and 15 of /proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS


def produce_frame(topic: str, partition: int) -> bytes:
    produce = api("Produce")
    batch = encode_batch([Record(offset_delta=0, timestamp=int(time.time() * 1000), key=None, value=b"v" * 100)])
    request = produce.request(acks=1, timeout_ms=30000, topic_data=[produce.request.TopicProduceData(
        name=topic, partition_data=[produce.request.PartitionProduceData(index=partition, records=batch)])])
    return encode_request(RequestHeader(api_key=produce.key, api_version=9, correlation_id=1,
                                        client_id="request-cost"), request)


def fetch_frame(topic: str, partition: int, offset: int = 0) -> bytes:
    fetch = api("Fetch")
    request = fetch.request(max_wait_ms=0, min_bytes=0, max_bytes=1 << 20, session_id=0, session_epoch=-1,
                            topics=[fetch.request.FetchTopic(topic=topic, partitions=[fetch.request.FetchPartition(
                                partition=partition, fetch_offset=offset, partition_max_bytes=1024)])])
    return encode_request(RequestHeader(api_key=fetch.key, api_version=12, correlation_id=1,
                                        client_id="request-cost"), request)


def api_versions_frame() -> bytes:
    api_versions = api("ApiVersions")
    request = api_versions.request(client_software_name="request-cost", client_software_version="1")
    return encode_request(RequestHeader(api_key=api_versions.key, api_version=3, correlation_id=1,
                                        client_id="request-cost"), request)


def metadata_frame(topic: str) -> bytes:
    metadata = api("Metadata")
    request = metadata.request(topics=[metadata.request.MetadataRequestTopic(name=topic)],
                               allow_auto_topic_creation=False)
    return encode_request(RequestHeader(api_key=metadata.key, api_version=12, correlation_id=1,
                                        client_id="request-cost"), request)


def drive(port: int, frame: bytes, count: int, window: int) -> None:
    """Send `frame` `count` times over one connection keeping `window` in flight; read every answer."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sent = answered = 0
    buffer = bytearray()
    while answered < count:
        burst = min(window - (sent - answered), count - sent)
        if burst > 0:
            sock.sendall(frame * burst)
            sent += burst
        data = sock.recv(1 << 20)
        if not data:
            raise ConnectionError("broker closed the connection")
        buffer += data
        position = 0
        while len(buffer) - position >= 4:
            (size,) = _SIZE.unpack_from(buffer, position)
            if len(buffer) - position - 4 < size:
                break
            position += 4 + size
            answered += 1
        del buffer[:position]
    sock.close()


def run_clients(broker: BrokerProcess, frames: list[bytes], count: int, window: int) -> tuple[float, float]:
    """Each frame driven `count` times by its own process; (broker CPU microseconds per request, seconds)."""
    context = multiprocessing.get_context("fork")
    processes = [context.Process(target=drive, args=(broker.port, frame, count, window)) for frame in frames]
    before = broker_cpu_seconds(broker.process.pid)
    started = time.perf_counter()
    for process in processes:
        process.start()
    for process in processes:
        process.join()
        if process.exitcode:
            raise RuntimeError(f"a client failed (exit code {process.exitcode})")
    elapsed = time.perf_counter() - started
    used = broker_cpu_seconds(broker.process.pid) - before
    return used / (count * len(frames)) * 1e6, elapsed


def round_trip_ms(port: int, frame: bytes, count: int) -> float:
    """Median round trip of one request at a time, in milliseconds, over a connection of its own: the answer is
    read but not decoded, so the figure is the broker's and the socket's, not a Python codec's."""
    sock = socket.create_connection(("127.0.0.1", port))
    times = []
    for _ in range(count):
        started = time.perf_counter()
        sock.sendall(frame)
        (size,) = _SIZE.unpack(_receive(sock, 4))
        _receive(sock, size)
        times.append(time.perf_counter() - started)
    sock.close()
    return statistics.median(times) * 1000


def _receive(sock: socket.socket, size: int) -> bytes:
    data = sock.recv(size, socket.MSG_WAITALL)
    if len(data) < size:
        raise ConnectionError("broker closed the connection")
    return data


class CallgrindBroker(BrokerProcess):
    """The broker under callgrind, counting nothing until `count_instructions` switches counting on around the
    clients' run."""

    @property
    def dump_path(self) -> Path:
        """Where callgrind writes its dumps (this path with .1, .2, ... after it), beside the data directory."""
        return self.data_dir.parent / f"{self.data_dir.name}.callgrind"

    def command(self) -> list[str]:
        return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={self.dump_path}",
                *super().command()]

    def count_instructions(self, frames: list[bytes], count: int, window: int) -> tuple[float, float]:
        """`run_clients` with instructions counted: (instructions per request, seconds)."""
        pid = str(self.process.pid)
        subprocess.run(["callgrind_control", "--instr=on", pid], check=True, capture_output=True)
        _, elapsed = run_clients(self, frames, count, window)
        subprocess.run(["callgrind_control", "--instr=off", pid], check=True, capture_output=True)
        dumped = set(self.dump_path.parent.glob(f"{self.dump_path.name}.*"))
        subprocess.run(["callgrind_control", "--dump", pid], check=True, capture_output=True)  # also zeroes them
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            for path in set(self.dump_path.parent.glob(f"{self.dump_path.name}.*")) - dumped:
                totals = re.search(r"^totals: (\d+)$", path.read_text(), re.MULTILINE)
                if totals:
                    path.unlink()
                    return int(totals[1]) / (count * len(frames)), elapsed
            time.sleep(0.2)
        raise RuntimeError(f"callgrind wrote no dump beside {self.dump_path}")


class FloorServer:
    """A floor server (--floor; `label` one of FLOORS), with what run_clients asks of a broker: `port` and
    `process`."""

    def __init__(self, label: str):
        self.command = FLOORS[label]
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    def start(self) -> "FloorServer":
        if not Path(self.command[0]).exists():
            raise SystemExit(f"{self.command[0]} is not built: run `make loadgen`")
        self.process = subprocess.Popen([*self.command, str(self.port)], stdout=subprocess.PIPE, text=True,
                                        cwd=REPOSITORY)
        if self.process.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the floor server {self.command} did not start")
        return self

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


def start_broker(data_dir: str, tree: str, instructions: bool = False) -> BrokerProcess:
    """A broker running the code of source tree `tree` (PYTHONPATH and working directory: `python -m` puts the
    working directory first on the path), under callgrind if `instructions`."""
    os.environ["PYTHONPATH"] = tree
    here = os.getcwd()
    os.chdir(tree)
    try:
        if instructions:
            return CallgrindBroker(data_dir).start(timeout=300)
        return BrokerProcess(data_dir).start()
    finally:
        os.chdir(here)


def measure_round(broker: BrokerProcess, frames: dict[str, list[bytes]], args) -> dict[str, tuple]:
    """One round of every case on one broker: {case: (CPU per request in us, or instructions with --instructions,
    seconds[, round trip in ms])}."""
    measure = broker.count_instructions if isinstance(broker, CallgrindBroker) else functools.partial(
        run_clients, broker)
    figures = {}
    for case, case_frames in frames.items():
        if case == "metadata":
            cost, elapsed = measure(case_frames, args.metadata_requests, 1)
            figures[case] = (cost, elapsed, round_trip_ms(broker.port, case_frames[0], args.metadata_requests))
        else:
            figures[case] = measure(case_frames, args.requests, args.window)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trees", nargs="*", default=["this=."], help="label=path of an Odradek source tree")
    parser.add_argument("--requests", type=int, default=20_000, help="produce/fetch requests per client and round")
    parser.add_argument("--clients", type=int, default=CLIENTS)
    parser.add_argument("--window", type=int, default=WINDOW)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--metadata-requests", type=int, default=200)
    parser.add_argument("--cases", default="produce,fetch,fetch-tail,metadata")
    parser.add_argument("--hold", action="store_true", help="print each broker's pid and wait 5 s before measuring")
    parser.add_argument("--floor", action="store_true",
                        help="drive the floor servers (a C and a Python server that only answer) too")
    parser.add_argument("--instructions", action="store_true",
                        help="count each broker's instructions under callgrind instead of its CPU time")
    args = parser.parse_args()
    if args.floor and args.instructions:
        parser.error("--floor measures CPU time, not instructions")
    trees = [(label, os.path.abspath(path)) for label, path in (tree.split("=", 1) for tree in args.trees)]
    frames = {"produce": [produce_frame("small", index) for index in range(args.clients)],
              "fetch": [fetch_frame("small", index) for index in range(args.clients)],
              "fetch-tail": [fetch_frame("tail", index, TAIL_RECORDS - 5) for index in range(args.clients)],
              "metadata": [metadata_frame("wide")],
              "api-versions": [api_versions_frame()] * args.clients}
    frames = {case: frames[case] for case in args.cases.split(",")}
    with tempfile.TemporaryDirectory(prefix="request-cost-") as data_dir:
        brokers = {}
        try:
            for label, tree in trees:
                broker = brokers[label] = start_broker(os.path.join(data_dir, label), tree, args.instructions)
                # 1000 partitions take a while to create (under callgrind, minutes)
                admin = Admin(broker.bootstrap_servers, timeout=600 if args.instructions else 120)
                admin.create_topic("small", args.clients, 1)
                if "metadata" in frames:
                    admin.create_topic("wide", METADATA_PARTITIONS, 1)
                if "fetch-tail" in frames:
                    admin.create_topic("tail", args.clients, 1)
                    run_clients(broker, [produce_frame("tail", index) for index in range(args.clients)],
                                TAIL_RECORDS, 1)
                # every client's partition gets records (34 KB each, offset 0 below the in-memory tail), whichever
                # cases run: the fetch case alone reads as it does after the produce case
                run_clients(broker, [produce_frame("small", index) for index in range(args.clients)], 200,
                            args.window)
                if args.hold:
                    print(f"{label}: broker pid {broker.process.pid}", flush=True)
            if args.floor:
                for label in FLOORS:
                    brokers[label] = FloorServer(label).start()
            if args.hold:
                time.sleep(5)
            results: dict[tuple[str, str], list] = {}
            for _ in range(args.rounds):  # trees interleaved round by round: the machine's load hits all alike
                for label in brokers:
                    for case, figures in measure_round(brokers[label], frames, args).items():
                        results.setdefault((label, case), []).append(figures)
            unit = "instructions" if args.instructions else "broker CPU"
            for (label, case), rounds in results.items():
                cost = statistics.median(r[0] for r in rounds)  # us of CPU, or instructions
                if args.instructions:  # rates and round trips under callgrind say nothing
                    print(f"{label} {case}: {cost:,.0f} instructions per request (median of {len(rounds)})")
                elif case == "metadata":
                    latency = statistics.median(r[2] for r in rounds)
                    print(f"{label} metadata ({METADATA_PARTITIONS} partitions): {cost / 1000:.3f} ms broker CPU "
                          f"per request, {latency:.3f} ms round trip (median of {len(rounds)})")
                else:
                    total = args.requests * args.clients
                    rate = statistics.median(total / r[1] for r in rounds)
                    print(f"{label} {case}: {cost:.1f} us broker CPU per request, {rate:,.0f} requests/s "
                          f"({args.clients} clients x {args.window} in flight, median of {len(rounds)})")
            for label, _tree in trees[1:]:  # paired by round: a phase of a noisy machine hits both trees alike
                first = trees[0][0]
                for case in frames:
                    ratios = [later[0] / earlier[0]
                              for earlier, later in zip(results[first, case], results[label, case])]
                    print(f"{label} / {first} {case}: {statistics.median(ratios):.3f} of the {unit} per request "
                          f"(median of the rounds' ratios, {min(ratios):.3f}-{max(ratios):.3f})")
            if args.floor:
                for (label, _tree), floor_label, case in itertools.product(trees, FLOORS, frames):
                    ratios = [broker[0] / floor[0] for floor, broker in zip(results[floor_label, case],
                                                                            results[label, case])]
                    print(f"{label} / {floor_label} {case}: {statistics.median(ratios):.2f}x that floor's CPU per "
                          f"request (median of the rounds' ratios, {min(ratios):.2f}-{max(ratios):.2f})")
        finally:
            for broker in brokers.values():
                broker.stop()


if __name__ == "__main__":
    main()
