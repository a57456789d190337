"""The single-node catalogue's journal: what changed since the snapshot (odradek-metadata.json), one entry a line.

Rewriting the whole catalogue at every change made creating N topics one by one cost O(N^2) bytes written; an
append-only journal makes each change cost its own size, and the catalogue (odradek.cluster.metadata) compacts it
into a new snapshot once it outgrows the snapshot, so the bytes written stay linear. Each line is
`<crc32 of the JSON, 8 hex digits> <JSON>\\n`, appended and fsync'd before the change is answered. A crash can only
tear the last line: a last line that does not check (short, no newline, wrong CRC, not JSON) is dropped on load, as
a log's torn last batch is; an unreadable line followed by readable ones is damage from outside, refused. The
entries replace whole values (a topic, the settings), so replaying one already in the snapshot changes nothing:
a crash between writing the snapshot and emptying the journal is harmless. Plain file code, no event loop.
"""

from __future__ import annotations

import json
import os
import zlib
from pathlib import Path

from odradek.storage.segment import fsync_path


def encode_entry(entry: dict) -> bytes:
    body = json.dumps(entry, separators=(",", ":")).encode()
    return b"%08x %s\n" % (zlib.crc32(body), body)


def _decoded(line: bytes) -> dict | None:
    """The entry of one whole line (its newline included), or None if it does not check."""
    if len(line) < 10 or line[8:9] != b" " or not line.endswith(b"\n"):
        return None
    body = line[9:-1]
    try:
        if int(line[:8], 16) != zlib.crc32(body):
            return None
        entry = json.loads(body)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def read_journal(path: Path) -> tuple[list[dict], int]:
    """(the entries, the length of the checked part of the file); ValueError when an unreadable line is followed by
    a readable one (only a torn last line is a crash's doing)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], 0
    entries: list[dict] = []
    position = 0
    for line in data.splitlines(keepends=True):
        entry = _decoded(line)
        if entry is None:
            if any(_decoded(later) is not None for later in data[position + len(line):].splitlines(keepends=True)):
                raise ValueError(f"unreadable journal entry at byte {position} before readable ones")
            break
        entries.append(entry)
        position += len(line)
    return entries, position


class CatalogueJournal:
    """The open journal file: `append` an entry durably, `clear` it after a snapshot took it in."""

    def __init__(self, path: Path, length: int):
        """`length`: the checked part found by read_journal; a torn tail beyond it is cut off now."""
        self.path = path
        created = not path.exists()
        self._file = open(path, "ab")
        if self._file.tell() != length:
            self._file.truncate(length)
            self._file.seek(length)
            os.fsync(self._file.fileno())
        if created:
            fsync_path(path.parent)
        self.size = length

    def append(self, entry: dict) -> None:
        line = encode_entry(entry)
        self._file.write(line)
        self._file.flush()
        os.fsync(self._file.fileno())
        self.size += len(line)

    def clear(self) -> None:
        self._file.truncate(0)
        self._file.seek(0)
        os.fsync(self._file.fileno())
        self.size = 0

    def close(self) -> None:
        self._file.close()
