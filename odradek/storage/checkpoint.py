"""Kafka's offset checkpoint files (`recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
`replication-offset-checkpoint`).

Text, one item per line: the version `0`, the entry count, then `topic partition offset` lines. Written to
`<name>.tmp`, fsynced and renamed over the old file (then the directory is fsynced), so a crash leaves either the old
or the new file. A missing or malformed file reads as empty: the logs then fall back to full recovery from offset 0
and to their first segment, which is slow but loses nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from odradek.storage.segment import write_atomically

VERSION = 0


def read_checkpoint(path: Path) -> dict[tuple[str, int], int]:
    try:
        lines = path.read_text().splitlines()
        if int(lines[0]) != VERSION:
            return {}
        count = int(lines[1])
        entries = {}
        for line in lines[2:2 + count]:
            topic, partition, offset = line.split(" ")
            entries[(topic, int(partition))] = int(offset)
        return entries if len(entries) == count else {}
    except (OSError, ValueError, IndexError):
        return {}


def write_checkpoint(path: Path, entries: Mapping[tuple[str, int], int]) -> None:
    lines = [str(VERSION), str(len(entries))]
    lines += [f"{topic} {partition} {offset}" for (topic, partition), offset in sorted(entries.items())]
    write_atomically(path, ("\n".join(lines) + "\n").encode())
