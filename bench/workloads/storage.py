"""The storage benchmark (`bench/storage_bench.py`) inside the suite: the partition log beside raw disk I/O.

It already pairs each log operation with the raw operation it should approach; here it is repeated so that every
figure gets a median and a spread like the rest of the suite (one round each time, alternating raw and log).
"""

from __future__ import annotations

from bench import storage_bench
from bench.measure import MACHINE, Results

WORKLOAD = "storage"
RAW = {"raw write", "write+fdatasync", "read, pread 1 MiB chunks", "read, raw sendfile of the file"}


def run(results: Results, brokers: list[str], sizes) -> None:
    for _ in range(sizes.repeat):
        for name, value in storage_bench.run(sizes.storage_mib, sizes.sync_mib, rounds=1).items():
            results.add(WORKLOAD, name, MACHINE if name in RAW else "odradek", value, unit="MB/s")
