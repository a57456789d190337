"""The cleaner and transactions on real Log objects: aborted data goes and never shadows committed values, markers
stay while their transaction has batches and go after their delete horizon, the aborted-transaction index follows,
open transactions are not cleaned, and the log alone still rebuilds every producer's state."""

from __future__ import annotations

import dataclasses
import shutil

import pytest

from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import DELETE_HORIZON_BIT
from odradek.storage.cleaned_transactions import CleanedTransactions
from odradek.storage.log import Log
from odradek.storage.transaction_index import AbortedTransaction

from .conftest import (
    COMPACTED, TransactionalWriter, cleaner_for, markers, produce, read_batches, read_committed, read_records,
)

RETENTION = COMPACTED.delete_retention_ms


def values(records) -> dict[bytes, tuple[int, bytes | None]]:
    """key -> (offset, value) of the last record of each key."""
    return {key: (offset, value) for offset, key, value in records}


def add_dirt_and_roll(log: Log, tag: bytes) -> None:
    """A dirty segment of unrelated keys, so that the log is chosen again."""
    produce(log, [(b"filler-%d" % index, tag) for index in range(20)])
    log.roll()


def clean_until_settled(log: Log, manager, clock) -> None:
    """Clean, clean again after new dirt (markers of emptied transactions get their horizon), then once more past
    the horizon: whatever the cleaner may remove is gone."""
    cleaner = cleaner_for(manager, clock)
    cleaner.clean_filthiest()
    add_dirt_and_roll(log, b"settle")
    cleaner.clean_filthiest()
    clock.now += RETENTION
    cleaner.clean_filthiest()


def reopened_without_snapshots(log: Log, tmp_path, clock) -> Log:
    """A copy of the log opened after an unclean stop with its producer snapshots gone: producer state is rebuilt
    from the log alone."""
    log.flush()
    copy = tmp_path / "copy" / log.directory.name
    shutil.copytree(log.directory, copy, ignore=shutil.ignore_patterns("*.snapshot"))
    return Log.open(copy, COMPACTED, clean_shutdown=False, now_ms=clock)


def test_aborted_values_go_and_never_shadow_committed_ones(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    produce(log, [(b"a", b"plain-1"), (b"b", b"plain-1"), (b"c", b"plain-1")])  # offsets 0-2
    first = TransactionalWriter(log, producer_id=100)
    first.send([(b"a", b"committed"), (b"d", b"committed"), (b"c", b"committed")])  # 3-5
    first.end(commit=True)  # 6
    second = TransactionalWriter(log, producer_id=200)
    second.send([(b"a", b"aborted"), (b"b", b"aborted")])  # 7-8: later than the committed values of a and b
    second.end(commit=False)  # 9
    produce(log, [(b"c", b"plain-2")])  # 10: supersedes one record of the committed batch
    third = TransactionalWriter(log, producer_id=300)
    third.send([(b"e", b"aborted")])  # 11: a key only an aborted transaction ever wrote
    third.end(commit=False)  # 12
    log.roll()
    produce(log, [(b"z", b"active")])  # 13
    cleaner_for(manager, clock).clean_filthiest()
    expected = [(1, b"b", b"plain-1"), (3, b"a", b"committed"), (4, b"d", b"committed"), (10, b"c", b"plain-2"),
                (13, b"z", b"active")]
    assert read_records(log) == expected
    assert read_committed(log) == expected
    rewritten = next(header for header, _ in read_batches(log) if header.producer_id == 100 and not header.is_control)
    assert rewritten.is_transactional and rewritten.record_count == 2 and rewritten.last_offset_delta == 2


def test_markers_stay_while_their_transaction_has_batches_then_go_after_the_delete_horizon(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    writer = TransactionalWriter(log, producer_id=100)
    writer.send([(b"a", b"1")])
    superseded_commit = writer.end(commit=True)
    writer.send([(b"a", b"2")])
    surviving_commit = writer.end(commit=True)
    writer.send([(b"b", b"aborted")])
    abort = writer.end(commit=False)
    writer.send([(b"c", b"3")])  # the producer's last data batch: kept in any case
    last_commit = writer.end(commit=True)
    log.roll()
    produce(log, [(b"z", b"active")])
    [abort_entry] = log.aborted_transactions(0, log.log_end_offset)
    cleaner = cleaner_for(manager, clock)

    cleaner.clean_filthiest()  # the data goes; its markers stay until a cleaning finds them with nothing left
    assert [value for _, _, value in read_committed(log)] == [b"2", b"3", b"active"]
    assert [value for _, _, value in read_records(log)] == [b"2", b"3", b"active"]
    assert [offset for offset, _, _ in markers(log)] == [superseded_commit, surviving_commit, abort, last_commit]
    assert log.aborted_transactions(0, log.log_end_offset) == [abort_entry]
    assert not any(header.has_delete_horizon for header, _ in read_batches(log))

    add_dirt_and_roll(log, b"1")
    stamped_at = clock.now = clock.now + 1000
    cleaner.clean_filthiest()  # the emptied transactions' markers get their horizon, the entry goes
    horizons = {header.base_offset: header.base_timestamp for header, _ in read_batches(log)
                if header.attributes & DELETE_HORIZON_BIT}
    assert horizons == {superseded_commit: stamped_at + RETENTION, abort: stamped_at + RETENTION}
    assert [offset for offset, _, _ in markers(log)] == [superseded_commit, surviving_commit, abort, last_commit]
    assert log.aborted_transactions(0, log.log_end_offset) == []

    clock.now = stamped_at + RETENTION - 1
    assert cleaner.clean_filthiest() is None  # nothing dirty and the horizon not reached
    clock.now += 1
    assert cleaner.clean_filthiest() is not None  # chosen for its expired markers alone
    assert [offset for offset, _, _ in markers(log)] == [surviving_commit, last_commit]
    assert [value for _, key, value in read_committed(log) if not key.startswith(b"filler")] == [b"2", b"3",
                                                                                                 b"active"]
    assert cleaner.clean_filthiest() is None  # the markers left have data: nothing awaits a horizon


def test_a_producers_last_batches_keep_its_state_and_the_log_alone_rebuilds_it(tmp_path, manager, clock):
    log = manager.create("t", 0, COMPACTED)
    committing = TransactionalWriter(log, producer_id=100, epoch=2)
    committing.send([(b"a", b"txn-1")])
    committing.send([(b"a", b"txn-2")])
    committing.end(commit=True)
    aborting = TransactionalWriter(log, producer_id=200, epoch=5)
    aborting.send([(b"b", b"aborted")])
    aborting.end(commit=False)
    produce(log, [(b"a", b"plain")])  # empties the committed transaction's batches
    log.roll()
    produce(log, [(b"z", b"active")])
    clean_until_settled(log, manager, clock)
    batches = [(header.base_offset, header.producer_id, header.base_sequence, header.is_control,
                header.record_count) for header, _ in read_batches(log) if header.producer_id >= 0]
    assert batches == [(1, 100, 1, False, 0), (2, 100, -1, True, 1), (3, 200, 0, False, 0), (4, 200, -1, True, 1)]
    assert [value for _, _, value in read_committed(log)][:2] == [b"plain", b"active"]

    reopened = reopened_without_snapshots(log, tmp_path, clock)
    state = reopened.producer_state
    assert state.first_unstable_offset(default=-1) == -1  # no transaction left open by the emptied batches
    assert (state.producers[100].epoch, state.producers[100].last_sequence) == (2, 1)
    assert (state.producers[200].epoch, state.producers[200].last_sequence) == (5, 0)
    committing = TransactionalWriter(reopened, producer_id=100, epoch=2)
    committing.sequence = 5
    with pytest.raises(KafkaError) as raised:
        committing.send([(b"a", b"gap")])
    assert raised.value.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    committing.sequence = 2
    committing.send([(b"a", b"next")])
    committing.end(commit=True)
    reopened.close()


def test_a_marker_that_alone_carries_its_producers_epoch_stays(tmp_path, manager, clock):
    log = manager.create("t", 0, COMPACTED)
    writer = TransactionalWriter(log, producer_id=100, epoch=0)
    writer.send([(b"a", b"txn")])
    writer.end(commit=True)
    writer.epoch = 1  # the coordinator bumped the epoch and aborted: a marker with no data in its epoch
    fencing_abort = writer.end(commit=False)
    produce(log, [(b"a", b"plain")])
    log.roll()
    produce(log, [(b"z", b"active")])
    clean_until_settled(log, manager, clock)
    assert markers(log) == [(fencing_abort, 100, True)]
    reopened = reopened_without_snapshots(log, tmp_path, clock)
    zombie = TransactionalWriter(reopened, producer_id=100, epoch=0)
    zombie.sequence = 1
    with pytest.raises(KafkaError) as raised:
        zombie.send([(b"a", b"zombie")])
    assert raised.value.code == ErrorCode.INVALID_PRODUCER_EPOCH
    reopened.close()


def test_nothing_from_an_open_transaction_on_is_cleaned(manager, clock):
    log = manager.create("t", 0, COMPACTED)
    produce(log, [(b"a", b"1")])
    produce(log, [(b"a", b"2")])
    log.roll()
    writer = TransactionalWriter(log, producer_id=100)
    writer.send([(b"a", b"open")])
    log.roll()
    produce(log, [(b"a", b"3")])
    log.roll()
    produce(log, [(b"z", b"active")])
    cleaner = cleaner_for(manager, clock)
    stats = cleaner.clean_filthiest()
    assert stats.end_offset == 2  # up to the segment holding the open transaction
    assert [value for _, _, value in read_records(log)] == [b"2", b"open", b"3", b"active"]
    writer.end(commit=False)
    add_dirt_and_roll(log, b"1")
    cleaner.clean_filthiest()
    assert [value for _, key, value in read_records(log) if key == b"a"] == [b"3"]


def test_cleaning_with_a_transaction_spanning_segment_groups(manager, clock):
    config = dataclasses.replace(COMPACTED, segment_bytes=600)  # one small batch a segment, groups of a few
    log = manager.create("t", 0, config)
    writer = TransactionalWriter(log, producer_id=100)
    for round_ in range(6):
        writer.send([(b"k%d" % round_, b"aborted".ljust(200, b"."))])
        log.roll()
    writer.end(commit=False)
    produce(log, [(b"k0", b"plain")])
    log.roll()
    produce(log, [(b"z", b"active")])
    cleaner_for(manager, clock).clean_filthiest()
    assert [value for _, _, value in read_records(log)] == [b"plain", b"active"]
    assert len(log.aborted_transactions(0, log.log_end_offset)) == 1  # the producer's last batch stays, empty


# -- the plain tracker ---------------------------------------------------------------------------------------------

def test_tracker_tells_aborted_batches_and_markers_with_batches_left():
    aborted = AbortedTransaction(producer_id=2, first_offset=10, last_offset=20, last_stable_offset=21)
    tracker = CleanedTransactions([aborted])
    assert not tracker.is_aborted(1, 5, transactional=True)  # producer 1, committed below
    assert not tracker.is_aborted(2, 9, transactional=True)  # producer 2's previous, committed, transaction
    assert tracker.marker_has_batches(2, 9, aborts=False)
    assert tracker.is_aborted(2, 12, transactional=True)
    assert not tracker.is_aborted(3, 13, transactional=False)  # not transactional: never aborted
    assert not tracker.is_aborted(1, 15, transactional=True)  # another producer inside the aborted range
    assert tracker.marker_has_batches(1, 16, aborts=False)
    assert not tracker.marker_has_batches(1, 17, aborts=False)  # a second marker: nothing walked since the first
    assert tracker.take_kept_entries() == []
    assert tracker.marker_has_batches(2, 20, aborts=True)
    assert tracker.take_kept_entries() == [aborted] and tracker.take_kept_entries() == []
    assert not tracker.is_aborted(2, 25, transactional=True)  # its next transaction is not the aborted one


def test_tracker_lets_a_marker_go_and_drops_its_entry_once_the_aborted_batches_are_gone():
    aborted = AbortedTransaction(producer_id=2, first_offset=10, last_offset=20, last_stable_offset=21)
    tracker = CleanedTransactions([aborted])
    assert not tracker.is_aborted(1, 12, transactional=False)
    assert not tracker.marker_has_batches(2, 20, aborts=True)
    assert tracker.take_kept_entries() == []
