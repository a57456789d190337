"""What processes cost, read from /proc: a process's CPU seconds, and a process tree's (a child process that
starts a JVM and Python workers), for the benchmarks that set a broker's or a job's CPU beside what it did."""

from __future__ import annotations

import os
import threading

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """utime + stime of a process and its reaped children (/proc/<pid>/stat fields 14 to 17)."""
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return sum(int(value) for value in fields[11:15]) / TICKS


def children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{task}/children") as listed:
                found += [int(child) for child in listed.read().split()]
        except OSError:
            pass
    return found


def tree_cpu(root: int, done: threading.Event) -> dict[int, float]:
    """The last CPU seen of every process under `root` until `done`, sampled every 50 ms."""
    seen: dict[int, float] = {}
    while not done.is_set():
        pending = [root]
        while pending:
            pid = pending.pop()
            try:
                seen[pid] = max(seen.get(pid, 0.0), cpu_seconds(pid))
                pending += children(pid)
            except OSError:
                pass
        done.wait(0.05)
    return seen


