"""How the console shows what it reads: record bytes as text, pretty JSON or hex, settings in human units, pages of
long lists, which offsets a page of messages covers, which records a search looks through, and a page of messages
as JSON.

Plain functions with no I/O, so the rules (a page never loads a whole topic, newest-first paging walks backwards
from the log end) are tested without a broker or a browser.
"""

from __future__ import annotations

import dataclasses
import datetime
import base64
import json
from collections.abc import Sequence
from typing import Generic, TypeVar

FORMATS = ("text", "json", "hex")
SHOWN_BYTES = 16 * 1024  # a record shown in a page is cut here; the page says how long it really is

T = TypeVar("T")


def render_bytes(data: bytes | None, fmt: str) -> str:
    """A key or value as text (UTF-8, bad bytes replaced), pretty JSON (text where it is not JSON) or hex."""
    if data is None:
        return ""
    shown = data[:SHOWN_BYTES]
    if fmt == "hex":
        text = shown.hex(" ")
    elif fmt == "json" and len(data) <= SHOWN_BYTES:
        try:
            text = json.dumps(json.loads(data), indent=2, ensure_ascii=False)
        except ValueError:
            text = shown.decode("utf-8", "replace")
    else:
        text = shown.decode("utf-8", "replace")
    return text if len(data) <= SHOWN_BYTES else f"{text}\n… ({len(data):,} bytes in all)"


def format_time(timestamp_ms: int | None) -> str:
    if timestamp_ms is None or timestamp_ms < 0:
        return ""
    moment = datetime.datetime.fromtimestamp(timestamp_ms / 1000, datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


SIZE_UNITS = [("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
TIME_UNITS = [("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000)]
# a setting's unit is in its name, as Kafka's docs give it: retention.ms is milliseconds, segment.bytes bytes,
# log.retention.hours hours (and log.cleaner.dedupe.buffer.size, socket.*.buffer.bytes ... bytes)
TIME_SUFFIXES = {".ms": 1, ".seconds": 1000, ".minutes": 60_000, ".hours": 3_600_000}
SIZE_SUFFIXES = (".bytes", ".buffer.size")
LONG_MAX = (1 << 63) - 1  # Kafka's "no limit" for a long setting, e.g. message.timestamp.*.ms


def _scaled(value: int, units: list[tuple[str, int]], base: str) -> str:
    """`value` in the largest unit it reaches: exact ("7 d"), else to one decimal with a "≈" ("≈ 1.5 h")."""
    for name, size in units:
        if value >= size:
            if value % size == 0:
                return f"{value // size:,} {name}"
            return f"≈ {value / size:,.1f} {name}"
    return f"{value:,} {base}"


def human_bytes(size: float | None) -> str:
    """A byte count in binary units: 1 GiB, ≈ 1.5 MiB, 512 B."""
    return "" if size is None else _scaled(int(size), SIZE_UNITS, "B")


def human_setting(name: str, value: str | None) -> str:
    """A time or size setting's value in human units ("7 d" for retention.ms=604800000, "1 GiB" for
    segment.bytes=1073741824); "" for other settings, negative values (Kafka's -1: no limit) and non-numbers."""
    try:
        number = int(value or "")
    except ValueError:
        return ""
    if number < 0:
        return ""
    if name.endswith(SIZE_SUFFIXES):
        return _scaled(number, SIZE_UNITS, "B")
    for suffix, unit_ms in TIME_SUFFIXES.items():
        if name.endswith(suffix):
            if number == LONG_MAX:
                return "no limit"
            return _scaled(number * unit_ms, TIME_UNITS, "ms")
    return ""


@dataclasses.dataclass(frozen=True)
class Page(Generic[T]):
    items: Sequence[T]
    number: int  # from 1
    pages: int
    total: int

    @property
    def previous(self) -> int | None:
        return self.number - 1 if self.number > 1 else None

    @property
    def next(self) -> int | None:
        return self.number + 1 if self.number < self.pages else None


def page_of(items: Sequence[T], number: int, size: int) -> Page[T]:
    """Page `number` (from 1, clamped into range) of `size` items."""
    pages = max(1, -(-len(items) // size))
    number = min(max(1, number), pages)
    return Page(items[(number - 1) * size:number * size], number, pages, len(items))


def first_chunk(earliest: int, latest: int, offset: int | None, newest_first: bool, size: int) -> tuple[int, int]:
    """The offsets [start, end) a page starting at `offset` reads first: newest first it ends at `offset` (included,
    default the last record) and goes back `size`; oldest first it starts at `offset` (default the earliest)."""
    if newest_first:
        end = latest if offset is None else min(latest, max(earliest, offset + 1))
        return max(earliest, end - size), end
    start = earliest if offset is None else min(latest, max(earliest, offset))
    return start, min(latest, start + size)


def next_chunk(earliest: int, latest: int, chunk: tuple[int, int], newest_first: bool, size: int) -> tuple[int, int]:
    """The chunk after `chunk` in the reading direction (empty at the log's end)."""
    start, end = chunk
    if newest_first:
        return max(earliest, start - size), start
    return end, min(latest, end + size)


def search_windows(ranges: dict[int, tuple[int, int]], limit: int) -> dict[int, tuple[int, int]]:
    """The offsets [start, end) a search reads in each partition (`ranges`: its earliest and latest offsets): the
    newest records of every partition, `limit` in all, shared evenly and what a short partition leaves over given
    to the others."""
    windows = {partition: (latest, latest) for partition, (_, latest) in ranges.items()}
    left = limit
    open_partitions = sorted(ranges, key=lambda p: ranges[p][1] - ranges[p][0])
    while open_partitions and left > 0:
        share = max(1, left // len(open_partitions))
        for partition in list(open_partitions):
            earliest, latest = ranges[partition]
            start = windows[partition][0]
            taken = min(share, start - earliest, left)
            windows[partition] = (start - taken, latest)
            left -= taken
            if windows[partition][0] == earliest:
                open_partitions.remove(partition)
            if left == 0:
                break
    return windows


def _json_bytes(data: bytes | None):
    """Bytes as JSON: UTF-8 text as a string, anything else as {"base64": ...}."""
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def messages_json(messages) -> list[dict]:
    """Records as JSON objects (topic, partition, offset, timestamp, key, value, headers), in the page's order."""
    return [{"topic": m.topic, "partition": m.partition, "offset": m.offset, "timestamp_ms": m.timestamp_ms,
             "timestamp": format_time(m.timestamp_ms) or None, "key": _json_bytes(m.key),
             "value": _json_bytes(m.value), "headers": [[name, _json_bytes(value)] for name, value in m.headers]}
            for m in messages]
