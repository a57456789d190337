"""What the log cleaner knows about transactions as it walks a log in offset order (Kafka's CleanedTransactionMetadata).

The cleaner only ever walks offsets below the last stable offset, so every transaction it meets is decided: an
aborted one has an entry in the `.txnindex` of the segment holding its ABORT marker, and any other transactional batch
belongs to a committed transaction (or to one whose marker lies past what is walked, which is then committed too, or
it would have an entry). Given the aborted entries overlapping the walk, this tracker answers, batch by batch:

* is this data batch part of an aborted transaction? Then the cleaner drops it (keeping at most the empty shell that
  carries its producer's last sequence) and keeps its keys out of the offset map;
* does the transaction this marker closes still have a batch in the log, that is, did the walk pass one of its
  batches since the producer's previous marker? Then the marker stays as it is (a replay of the log would otherwise
  see a transaction that never ends). If not, the marker is removable: the cleaner stamps a delete horizon on it and
  drops it once the horizon has passed, as it does for tombstones;
* which aborted-transaction entries the cleaned segment keeps: those of the ABORT markers whose transaction still had
  batches when the walk passed them. An entry whose marker goes, or is about to, is not needed by read_committed
  fetches: there is no aborted data left for it to hide.

Plain state, no I/O: the cleaner feeds it headers and marker types in offset order.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from odradek.storage.transaction_index import AbortedTransaction


class CleanedTransactions:
    def __init__(self, aborted: Iterable[AbortedTransaction]):
        self._upcoming = [(entry.first_offset, entry) for entry in aborted]  # min-heap by first offset
        heapq.heapify(self._upcoming)
        self._aborting: dict[int, AbortedTransaction] = {}  # producer id -> its aborted transaction walked into
        self._with_batches: set[int] = set()  # producer ids with a batch walked since their last marker
        self._kept_entries: list[AbortedTransaction] = []

    def _enter_aborted_up_to(self, offset: int) -> None:
        """Aborted transactions that start at or below `offset` are under way from here for their producer."""
        while self._upcoming and self._upcoming[0][0] <= offset:
            _, entry = heapq.heappop(self._upcoming)
            self._aborting.setdefault(entry.producer_id, entry)

    def is_aborted(self, producer_id: int, last_offset: int, transactional: bool) -> bool:
        """A data batch walked: True if it belongs to an aborted transaction (drop it, map none of its keys)."""
        self._enter_aborted_up_to(last_offset)
        if not transactional:
            return False
        self._with_batches.add(producer_id)
        return producer_id in self._aborting

    def marker_has_batches(self, producer_id: int, offset: int, aborts: bool) -> bool:
        """A marker walked (`aborts`: an ABORT marker): True if its transaction still has a batch in the log, so the
        marker must stay; False if it may go once its delete horizon has passed."""
        self._enter_aborted_up_to(offset)
        had_batches = producer_id in self._with_batches
        self._with_batches.discard(producer_id)
        entry = self._aborting.pop(producer_id, None)
        if aborts and had_batches and entry is not None:
            self._kept_entries.append(entry)
        return had_batches

    def take_kept_entries(self) -> list[AbortedTransaction]:
        """The aborted-transaction entries to keep for the markers walked since the last call, in marker order."""
        kept, self._kept_entries = self._kept_entries, []
        return kept
