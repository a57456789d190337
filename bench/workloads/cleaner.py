"""Cleaner (log compaction) throughput, Odradek only: runs `bench/cleaner_bench.py`, which the cleaner's author
owns, as a child process, once per repetition, and reads its "cleaned" line.

Running it as a program rather than importing it keeps the suite independent of that script's functions; the suite
depends only on its printed summary line, and keeps the whole output of the last run as notes. While the script
does not exist the suite says so in one TODO line instead.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from bench.measure import Results

WORKLOAD = "cleaner"
SCRIPT = Path(__file__).resolve().parent.parent / "cleaner_bench.py"
_CLEANED = re.compile(r"cleaned .*: (?P<mib>[\d.]+) MiB/s, (?P<records>[\d,]+) records/s")


def run(results: Results, brokers: list[str], sizes) -> None:
    if not SCRIPT.exists():
        results.note(WORKLOAD, "throughput", "TODO: bench/cleaner_bench.py does not exist yet; cleaner throughput "
                                             "is not measured")
        return
    for _ in range(sizes.repeat):
        done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600)
        match = _CLEANED.search(done.stdout)
        if done.returncode != 0 or match is None:
            results.error(WORKLOAD, "dirty log compacted", "odradek",
                          f"bench/cleaner_bench.py exited {done.returncode}: {done.stderr.strip()[-300:]}",
                          unit="MiB/s")
            return
        results.add(WORKLOAD, "dirty log compacted", "odradek", float(match["mib"]), unit="MiB/s")
        results.add(WORKLOAD, "records read while compacting", "odradek", float(match["records"].replace(",", "")),
                    unit="records/s")
    for line in done.stdout.strip().splitlines():
        results.note(WORKLOAD, "dirty log compacted", line)
