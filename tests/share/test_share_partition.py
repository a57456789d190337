"""The share-partition state machine (odradek/coordinator/share_partition.py) and its persisted form: acquisition
counts deliveries, acknowledgements settle records, the delivery limit archives, locks expire, and the state
batches written to __share_group_state bring back exactly the records not done."""

from __future__ import annotations

import uuid

import pytest

from odradek.coordinator.share_partition import (ACCEPT, ACKNOWLEDGED, ARCHIVED, AVAILABLE, GAP, REJECT, RELEASE,
                                                 RENEW, SharePartition)
from odradek.coordinator.share_state import parse_record, snapshot_record
from odradek.errors import ErrorCode, KafkaError

LIMITS = dict(lock_duration_ms=1000, delivery_limit=3, max_locks=100)


def ack(sp: SharePartition, member: str, first: int, last: int, types: list[int], now_ms: int) -> None:
    """An acknowledgement whose state write succeeded."""
    sp.complete(sp.acknowledge(member, first, last, types, now_ms))


def test_an_acknowledgement_takes_effect_once_written_and_a_failed_write_leaves_the_records_acquired():
    sp = SharePartition(0, **LIMITS)
    sp.acquire("a", [(0, 3)], 10, now_ms=0)
    pending = sp.acknowledge("a", 0, 3, [ACCEPT, RELEASE, REJECT, RENEW], now_ms=500)
    assert pending == [0, 1, 2]
    # written with the states it leads to; meanwhile still acquired: not taken again, not expired, not released
    assert sp.state() == (1, [(1, 1, AVAILABLE, 1), (2, 2, ARCHIVED, 1), (3, 3, AVAILABLE, 1)])
    with pytest.raises(KafkaError) as twice:
        sp.acknowledge("a", 0, 0, [ACCEPT], now_ms=600)
    assert twice.value.code == ErrorCode.INVALID_RECORD_STATE
    assert not sp.expire_locks(now_ms=1200)  # 0-2 are past their lock deadline but pending; 3 renewed to 1500
    assert sp.acquired_count() == 4 and sp.next_fetch_offset() == 4
    assert sp.release_member("a") and sp.acquired_count() == 3  # the renewed one comes back, the pending stay
    assert sp.next_lock_deadline() is None and sp.start_offset == 0
    sp.complete(pending)
    assert sp.start_offset == 1 and sp.acquired_count() == 0
    assert sp.state() == (1, [(1, 1, AVAILABLE, 1), (2, 2, ARCHIVED, 1), (3, 3, AVAILABLE, 1)])

    sp = SharePartition(0, **LIMITS)
    sp.acquire("a", [(0, 1)], 10, now_ms=0)
    sp.roll_back(sp.acknowledge("a", 0, 1, [ACCEPT], now_ms=0))  # the write failed
    assert sp.acquired_count() == 2 and sp.start_offset == 0
    assert sp.state() == (0, [(0, 1, AVAILABLE, 1)])
    ack(sp, "a", 0, 1, [ACCEPT], now_ms=1)  # the client's retry
    assert sp.start_offset == 2 and sp.state() == (2, [])


def test_acquired_records_go_to_one_member_and_accepted_ones_leave_the_window():
    sp = SharePartition(10, **LIMITS)
    assert sp.acquire("a", [(10, 14)], 3, now_ms=0) == [(10, 12, 1)]
    assert sp.acquire("b", [(10, 14)], 10, now_ms=0) == [(13, 14, 1)]
    ack(sp, "a", 10, 12, [ACCEPT], now_ms=1)
    assert sp.start_offset == 13
    with pytest.raises(KafkaError) as refused:
        ack(sp, "a", 13, 13, [ACCEPT], now_ms=1)  # b holds it
    assert refused.value.code == ErrorCode.INVALID_RECORD_STATE


def test_release_redelivers_with_a_higher_count_until_the_limit_archives():
    sp = SharePartition(0, **LIMITS)
    for delivery in (1, 2, 3):
        assert sp.next_fetch_offset() == 0
        assert sp.acquire("a", [(0, 0)], 10, now_ms=0) == [(0, 0, delivery)]
        ack(sp, "a", 0, 0, [RELEASE], now_ms=0)
    assert sp.start_offset == 1 and not sp.records  # archived after its third delivery


def test_per_offset_types_reject_and_gap_archive():
    sp = SharePartition(0, **LIMITS)
    sp.acquire("a", [(0, 3)], 10, now_ms=0)
    ack(sp, "a", 0, 3, [ACCEPT, REJECT, RELEASE, GAP], now_ms=0)
    assert sp.start_offset == 2
    assert [(o, r.state, r.delivery_count) for o, r in sorted(sp.records.items())] == [
        (2, AVAILABLE, 1), (3, ARCHIVED, 1)]
    assert sp.acquire("b", [(0, 3)], 10, now_ms=0) == [(2, 2, 2)]


def test_locks_expire_and_renew_extends_them():
    sp = SharePartition(0, **LIMITS)
    sp.acquire("a", [(0, 1)], 10, now_ms=0)
    ack(sp, "a", 1, 1, [RENEW], now_ms=900)
    assert sp.expire_locks(1000)
    assert sp.records[0].state == AVAILABLE and sp.records[1].member == "a"
    assert sp.next_lock_deadline() == 1900


def test_a_leaving_member_gives_its_records_back():
    sp = SharePartition(0, **LIMITS)
    sp.acquire("a", [(0, 4)], 10, now_ms=0)
    assert sp.release_member("a")
    assert sp.acquire("b", [(0, 4)], 10, now_ms=0) == [(0, 4, 2)]


def test_the_window_holds_at_most_max_locks_records_not_done():
    sp = SharePartition(0, lock_duration_ms=1000, delivery_limit=3, max_locks=100)
    assert sp.acquire("a", [(0, 499)], 1000, now_ms=0) == [(0, 99, 1)]
    assert sp.next_fetch_offset() is None
    ack(sp, "a", 0, 9, [ACCEPT], now_ms=0)
    assert sp.acquire("a", [(100, 499)], 1000, now_ms=0) == [(100, 109, 1)]


def test_offsets_missing_from_the_log_are_archived_as_the_window_passes_them():
    sp = SharePartition(0, **LIMITS)
    assert sp.acquire("a", [(0, 1), (5, 6)], 10, now_ms=0) == [(0, 1, 1), (5, 6, 1)]
    ack(sp, "a", 0, 1, [ACCEPT], now_ms=0)
    assert sp.start_offset == 5


def test_the_snapshot_record_restores_every_record_not_done_with_its_count():
    topic_id = uuid.uuid4()
    sp = SharePartition(0, **LIMITS)
    sp.acquire("a", [(0, 5)], 10, now_ms=0)
    ack(sp, "a", 0, 5, [ACCEPT, ACCEPT, RELEASE, ACCEPT, REJECT, ACCEPT], now_ms=0)
    sp.acquire("a", [(2, 2)], 10, now_ms=0)  # acquired when the broker dies: stored available, delivered twice
    start_offset, batches = sp.state()
    key, value = snapshot_record("g", topic_id, 3, start_offset=start_offset, batches=batches, snapshot_epoch=7,
                                 create_ms=1, write_ms=2)
    parsed = parse_record(key, value)
    assert parsed.key == ("g", topic_id, 3) and parsed.snapshot_epoch == 7
    assert parsed.batches == [(2, 2, AVAILABLE, 2), (3, 3, ACKNOWLEDGED, 1), (4, 4, ARCHIVED, 1),
                              (5, 5, ACKNOWLEDGED, 1)]
    restored = SharePartition.restored(parsed.start_offset, parsed.batches, **LIMITS)
    assert restored.acquire("b", [(0, 9)], 10, now_ms=0) == [(2, 2, 3), (6, 9, 1)]
    assert key[:2] == b"\x00\x00" and value[:2] == b"\x00\x00"  # record type 0 (ShareSnapshot), value version 0


def test_an_acknowledgement_outside_the_window_is_refused_at_once():
    sp = SharePartition(0, **LIMITS)
    sp.acquire("a", [(0, 4)], 10, now_ms=0)
    for first, last in ((0, 10**15), (-5, 2), (3, 5)):
        with pytest.raises(KafkaError) as refused:
            ack(sp, "a", first, last, [ACCEPT], now_ms=0)
        assert refused.value.code == ErrorCode.INVALID_RECORD_STATE
    assert sp.acquired_count() == 5  # nothing changed


def test_skipped_batches_are_archived_never_delivered():
    """A control batch and an aborted transaction's batch (read_committed) a fetch read: the window passes them,
    archived, with no delivery counted, also when they end the read."""
    sp = SharePartition(0, **LIMITS)
    assert sp.acquire("a", [(0, 1)], 10, now_ms=0, skipped=[(2, 4), (5, 5)]) == [(0, 1, 1)]
    assert sp.end_offset == 6 and [sp.records[o].state for o in range(2, 6)] == [ARCHIVED] * 4
    ack(sp, "a", 0, 1, [ACCEPT], now_ms=0)
    assert sp.start_offset == 6 and not sp.records
    assert sp.acquire("a", [(8, 9)], 10, now_ms=0, skipped=[(6, 7)]) == [(8, 9, 1)]
    assert sp.start_offset == 8
