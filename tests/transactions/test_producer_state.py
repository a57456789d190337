"""Producer state on a real log through Partition.append: sequence and epoch rules, retries answered from the cache,
transactions and the last stable offset, the aborted-transaction index, snapshots and recovery."""

from __future__ import annotations

import uuid

import pytest

from odradek.cluster.metadata import PartitionAssignment
from odradek.cluster.partition import Partition
from odradek.config import LogConfig
from odradek.errors import ErrorCode, KafkaError
from odradek.records.batch import Record, encode_batch, validate_batches
from odradek.storage.log import Log
from odradek.storage.producer_state import INT32_MAX, AppendOrigin
from odradek.storage.transaction_index import AbortedTransaction

PID = 4000


def open_partition(directory, clean_shutdown=True, **config) -> Partition:
    log = Log.open(directory, LogConfig(**config), clean_shutdown=clean_shutdown)
    return Partition("t", 0, uuid.uuid4(), log, PartitionAssignment(0, 0, [0], [0]), 0)


@pytest.fixture
def partition(tmp_path):
    partition = open_partition(tmp_path / "t-0")
    yield partition
    partition.log.close()


def produce(partition, sequence, *, count=2, epoch=0, pid=PID, transactional=False, origin=AppendOrigin.CLIENT):
    data = encode_batch([Record(i, 1000, None, b"v%d" % (sequence + i)) for i in range(count)],
                        producer_id=pid, producer_epoch=epoch, base_sequence=sequence, transactional=transactional)
    result = partition.append(data, validate_batches(data), origin=origin)
    return result.first_offset, result.last_offset


def error_of(call, *args, **kwargs) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call(*args, **kwargs)
    return raised.value.code


def test_sequences_must_follow_and_retries_get_their_original_offsets(partition):
    assert produce(partition, 0) == (0, 1)
    assert produce(partition, 2) == (2, 3)
    assert produce(partition, 0) == (0, 1)  # a retry of a cached batch
    assert produce(partition, 2) == (2, 3)
    assert partition.log.log_end_offset == 4
    assert error_of(produce, partition, 5) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert error_of(produce, partition, 1) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER  # overlaps, not a retry
    assert produce(partition, 4) == (4, 5)


def test_only_the_last_five_batches_are_remembered(partition):
    for sequence in range(0, 12, 2):
        produce(partition, sequence)
    assert produce(partition, 2) == (2, 3)
    assert error_of(produce, partition, 0) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_epochs(partition):
    produce(partition, 0, epoch=3)
    assert error_of(produce, partition, 2, epoch=2) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert error_of(produce, partition, 2, epoch=4) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(partition, 0, epoch=4) == (2, 3)  # a new epoch starts at 0
    assert produce(partition, 0, epoch=4) == (2, 3)


def test_unknown_producers_may_start_anywhere_and_sequences_wrap(partition):
    produce(partition, INT32_MAX - 1)  # sequences INT32_MAX - 1, INT32_MAX
    assert produce(partition, 0) == (2, 3)
    produce(partition, INT32_MAX, pid=PID + 1)  # INT32_MAX, 0 (wraps inside the batch)
    assert produce(partition, INT32_MAX, pid=PID + 1) == (4, 5)
    assert produce(partition, 1, pid=PID + 1) == (6, 7)


def test_coordinator_appends_are_checked_for_epoch_only(partition):
    produce(partition, 0, epoch=2)
    assert produce(partition, 7, epoch=2, origin=AppendOrigin.COORDINATOR) == (2, 3)
    assert error_of(produce, partition, 0, epoch=1, origin=AppendOrigin.COORDINATOR) == \
        ErrorCode.INVALID_PRODUCER_EPOCH


def test_transactions_hold_the_last_stable_offset_and_aborts_are_indexed(partition):
    produce(partition, 0, pid=1)  # offsets 0-1, not transactional
    produce(partition, 0, transactional=True)  # 2-3: opens PID's transaction
    produce(partition, 0, pid=2, transactional=True)  # 4-5
    assert partition.high_watermark == 6 and partition.last_stable_offset == 2
    assert error_of(produce, partition, 2) == ErrorCode.INVALID_TXN_STATE
    partition.write_transaction_marker(PID, 0, False, 0)  # offset 6
    assert partition.last_stable_offset == 4
    assert partition.log.aborted_transactions(0, 100) == [AbortedTransaction(PID, 2, 6, 4)]
    assert partition.log.aborted_transactions(7, 100) == []
    partition.write_transaction_marker(2, 0, True, 0)  # offset 7
    assert partition.last_stable_offset == partition.high_watermark == 8
    assert partition.log.aborted_transactions(0, 100) == [AbortedTransaction(PID, 2, 6, 4)]
    assert error_of(partition.write_transaction_marker, PID, 0, True, -1) == ErrorCode.TRANSACTION_COORDINATOR_FENCED


def test_a_fencing_marker_bumps_the_epoch(partition):
    produce(partition, 0, transactional=True)
    partition.write_transaction_marker(PID, 1, False, 0)
    assert error_of(produce, partition, 2, transactional=True) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert error_of(produce, partition, 2, epoch=1) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce(partition, 0, epoch=1) == (3, 4)


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_state_survives_a_restart(tmp_path, clean_shutdown):
    directory = tmp_path / "t-0"
    partition = open_partition(directory, segment_bytes=1024)
    for sequence in range(0, 40, 2):
        produce(partition, sequence)  # rolls several segments, each with a snapshot
    produce(partition, 0, pid=7, transactional=True)
    produce(partition, 0, pid=8, transactional=True)
    partition.write_transaction_marker(7, 0, False, 0)
    produce(partition, 40)
    lso, end = partition.last_stable_offset, partition.log.log_end_offset
    aborted = partition.log.aborted_transactions(0, end)
    if clean_shutdown:
        partition.log.close()
    else:
        partition.log.flush()
        for segment in partition.log.segments:
            segment.close()
    snapshots = sorted(path.name for path in directory.glob("*.snapshot"))
    assert len(snapshots) >= 2
    partition = open_partition(directory, clean_shutdown=clean_shutdown, segment_bytes=1024)
    try:
        assert partition.last_stable_offset == lso and partition.log.log_end_offset == end
        assert partition.log.aborted_transactions(0, end) == aborted
        assert produce(partition, 40) == (end - 2, end - 1)  # the last batch is still known as a retry
        assert error_of(produce, partition, 44) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
        partition.write_transaction_marker(8, 0, True, 0)
        assert partition.last_stable_offset == partition.high_watermark
    finally:
        partition.log.close()


def test_a_damaged_snapshot_falls_back_to_an_older_one_or_the_log(tmp_path):
    directory = tmp_path / "t-0"
    partition = open_partition(directory, segment_bytes=1024)
    for sequence in range(0, 40, 2):
        produce(partition, sequence)
    partition.log.close()
    newest = sorted(directory.glob("*.snapshot"))[-1]
    newest.write_bytes(newest.read_bytes()[:-1] + b"\x00")
    partition = open_partition(directory, segment_bytes=1024)
    try:
        assert not newest.exists()
        assert produce(partition, 38) == (38, 39)
        assert produce(partition, 40) == (40, 41)
    finally:
        partition.log.close()


def test_expired_producers_are_forgotten(partition):
    produce(partition, 0)
    produce(partition, 0, pid=9, transactional=True)
    assert partition.log.producer_state.remove_expired(now_ms=10_000, expiration_ms=1000) == 1
    assert set(partition.log.producer_state.producers) == {9}
