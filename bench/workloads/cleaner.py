"""Cleaner (log compaction) throughput, Odradek only: runs `bench/cleaner_bench.py`, which the cleaner's author
owns, as a child process and keeps what it prints.

Running it as a program rather than importing it keeps the suite independent of that script's functions, which
are still changing; its printed lines go into the results and the table as notes. While the script does not
exist the suite says so in one TODO line instead.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bench.measure import Results

WORKLOAD = "cleaner"
SCRIPT = Path(__file__).resolve().parent.parent / "cleaner_bench.py"


def run(results: Results, brokers: list[str], sizes) -> None:
    if not SCRIPT.exists():
        results.note(WORKLOAD, "throughput", "TODO: bench/cleaner_bench.py does not exist yet; cleaner throughput "
                                             "is not measured")
        return
    done = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        results.note(WORKLOAD, "throughput", f"bench/cleaner_bench.py failed ({done.returncode}): "
                                             f"{done.stderr.strip().splitlines()[-1:]}")
        return
    for line in done.stdout.strip().splitlines():
        results.note(WORKLOAD, "throughput", line)
