"""The machine's own limits, measured in the same run as the brokers: sequential disk writes and loopback TCP.

Disk: 1 MiB writes to a fresh file on the disk the brokers use (the temp directory), once into the page cache and
once with fdatasync after every write (dd bs=1M oflag=dsync), through `storage_bench.raw_write`, the same loop the
storage benchmark compares the log against; each after a sync(), so that dirty pages other processes left behind
do not throttle the measurement, and after one uncounted warm-up write (in a VM the first touch of page-cache memory
can cost ten times more than every later one). Loopback: iperf3 for a few seconds when it is installed (`make bench`
installs it as root), otherwise one Python socket pair streaming 4 MiB sends to a reader that discards them, which
understates the link a little (the reader is Python too). Broker figures divided by these are in the report.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from bench import peers, storage_bench
from bench.measure import MACHINE, Results

WORKLOAD = "machine"
MIB = 1 << 20


def loopback_iperf3(seconds: int) -> float:
    port = peers.free_port()
    server = subprocess.Popen(["iperf3", "-s", "-1", "-p", str(port)], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 10
        while True:
            done = subprocess.run(["iperf3", "-c", "127.0.0.1", "-p", str(port), "-t", str(seconds), "-J"],
                                  capture_output=True, text=True)
            report = json.loads(done.stdout or "{}")
            if "end" in report and "sum_received" in report["end"]:
                return report["end"]["sum_received"]["bits_per_second"] / 8 / MIB
            if time.monotonic() > deadline:
                raise RuntimeError(f"iperf3 failed: {report.get('error', done.stderr)}")
            time.sleep(0.1)
    finally:
        server.kill()
        server.wait()


def loopback_python(nbytes: int) -> float:
    drain = storage_bench.Drain()
    chunk = bytes(4 * MIB)
    started = time.perf_counter()
    for _ in range(nbytes // len(chunk)):
        drain.sender.sendall(chunk)
    drain.close()
    return nbytes / MIB / (time.perf_counter() - started)


def run(results: Results, brokers: list[str], sizes) -> None:
    data = bytes(MIB)
    with tempfile.TemporaryDirectory(prefix="bench-machine-") as tmp:
        path = Path(tmp) / "write.bin"
        storage_bench.raw_write(path, data, sizes.disk_mib, sync=False)  # warm-up, not counted
        path.unlink()
        for _ in range(sizes.repeat):
            for metric, mib, sync in (("disk write, 1 MiB blocks, page cache", sizes.disk_mib, False),
                                      ("disk write, fdatasync every 1 MiB", sizes.sync_mib, True)):
                os.sync()  # start without anyone's dirty pages, whose writeback would throttle ours
                results.add(WORKLOAD, metric, MACHINE, storage_bench.raw_write(path, data, mib, sync=sync), unit="MB/s")
                path.unlink()
    tool = "iperf3" if shutil.which("iperf3") else "python socket pair"
    for _ in range(sizes.repeat):
        value = loopback_iperf3(3) if tool == "iperf3" else loopback_python(2 << 30)
        results.add(WORKLOAD, f"loopback TCP ({tool})", MACHINE, value, unit="MB/s")
