"""How the console shows what it reads: record bytes as text, pretty JSON or hex, pages of long lists, and which
offsets a page of messages covers.

Plain functions with no I/O, so the rules (a page never loads a whole topic, newest-first paging walks backwards
from the log end) are tested without a broker or a browser.
"""

from __future__ import annotations

import dataclasses
import datetime
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
