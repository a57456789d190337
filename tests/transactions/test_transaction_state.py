"""The transaction state machine without a broker: transitions, the errors Kafka answers, records round trip."""

from __future__ import annotations

import pytest

from odradek.coordinator.transaction_state import (
    MAX_EPOCH, TransactionMetadata, TransactionState, add_partitions, begin_abort, complete, fence_epoch,
    init_producer, parse_transaction_record, prepare_end, transaction_record,
)
from odradek.errors import ErrorCode, KafkaError

S = TransactionState


def error_of(call, *args) -> ErrorCode:
    with pytest.raises(KafkaError) as raised:
        call(*args)
    return raised.value.code


def fresh(producer_id: int = 7) -> TransactionMetadata:
    return init_producer(None, "tx", 60_000, 1, lambda: producer_id)


def test_a_transaction_from_init_to_commit_and_again():
    metadata = fresh()
    assert (metadata.producer_id, metadata.producer_epoch, metadata.state) == (7, 0, S.EMPTY)
    ongoing = add_partitions(metadata, 7, 0, frozenset({("t", 0)}), 10)
    assert (ongoing.state, ongoing.partitions, ongoing.start_ms) == (S.ONGOING, {("t", 0)}, 10)
    assert add_partitions(ongoing, 7, 0, frozenset({("t", 0)}), 11) is None  # nothing new
    wider = add_partitions(ongoing, 7, 0, frozenset({("t", 1)}), 12)
    assert wider.partitions == {("t", 0), ("t", 1)} and wider.start_ms == 10
    prepared = prepare_end(wider, 7, 0, True, 13)
    assert prepared.state is S.PREPARE_COMMIT
    assert error_of(prepare_end, prepared, 7, 0, True, 1) == ErrorCode.CONCURRENT_TRANSACTIONS
    assert error_of(prepare_end, prepared, 7, 0, False, 1) == ErrorCode.INVALID_TXN_STATE
    done = complete(prepared, 14)
    assert (done.state, done.partitions) == (S.COMPLETE_COMMIT, frozenset())
    assert prepare_end(done, 7, 0, True, 15) is None  # a retried EndTxn
    assert error_of(prepare_end, done, 7, 0, False, 1) == ErrorCode.INVALID_TXN_STATE
    again = add_partitions(done, 7, 0, frozenset({("t", 2)}), 16)
    assert (again.state, again.start_ms) == (S.ONGOING, 16)


def test_producer_checks():
    metadata = fresh()
    assert error_of(add_partitions, None, 7, 0, frozenset({("t", 0)}), 1) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert error_of(add_partitions, metadata, 8, 0, frozenset({("t", 0)}), 1) == ErrorCode.INVALID_PRODUCER_ID_MAPPING
    assert error_of(add_partitions, metadata, 7, 1, frozenset({("t", 0)}), 1) == ErrorCode.PRODUCER_FENCED
    assert error_of(prepare_end, metadata, 7, 0, True, 1) == ErrorCode.INVALID_TXN_STATE  # never begun


def test_init_bumps_the_epoch_and_fences_open_transactions():
    metadata = fresh()
    bumped = init_producer(metadata, "tx", 30_000, 5, lambda: 99)
    assert (bumped.producer_id, bumped.producer_epoch, bumped.timeout_ms) == (7, 1, 30_000)
    ongoing = add_partitions(bumped, 7, 1, frozenset({("t", 0)}), 6)
    assert error_of(init_producer, ongoing, "tx", 30_000, 7, lambda: 99) == ErrorCode.CONCURRENT_TRANSACTIONS
    aborting = begin_abort(fence_epoch(ongoing, 7), 7)
    assert (aborting.state, aborting.producer_epoch) == (S.PREPARE_ABORT, 2)
    assert error_of(add_partitions, aborting, 7, 1, frozenset({("t", 0)}), 8) == ErrorCode.PRODUCER_FENCED
    successor = init_producer(complete(aborting, 8), "tx", 30_000, 9, lambda: 99)
    assert (successor.producer_id, successor.producer_epoch, successor.state) == (7, 3, S.EMPTY)
    assert error_of(init_producer, successor, "tx", 30_000, 10, lambda: 99, 7, 2) == ErrorCode.PRODUCER_FENCED
    assert init_producer(successor, "tx", 30_000, 10, lambda: 99, 7, 3).producer_epoch == 4


def test_a_retried_epoch_bump_gets_the_bumped_epoch_again():
    """KIP-360: librdkafka bumps the epoch with InitProducerId naming its id and epoch after an abortable error; a
    retry whose first answer was lost (the connection cut, the write slow to reach the ISR) names the old epoch again
    and gets the bumped one, as Kafka's lastProducerEpoch answers, not PRODUCER_FENCED (fatal to the producer)."""
    done = complete(prepare_end(add_partitions(fresh(), 7, 0, frozenset({("t", 0)}), 2), 7, 0, False, 3), 4)
    bumped = init_producer(done, "tx", 30_000, 5, lambda: 99, 7, 0)
    assert (bumped.producer_epoch, bumped.last_producer_epoch) == (1, 0)
    retried = init_producer(bumped, "tx", 30_000, 6, lambda: 99, 7, 0)
    assert (retried.producer_id, retried.producer_epoch, retried.state) == (7, 1, S.EMPTY)
    assert error_of(init_producer, bumped, "tx", 30_000, 6, lambda: 99, 8, 0) == ErrorCode.PRODUCER_FENCED
    newer = init_producer(bumped, "tx", 30_000, 7, lambda: 99)  # another instance: the old epoch is fenced now
    assert error_of(init_producer, newer, "tx", 30_000, 8, lambda: 99, 7, 0) == ErrorCode.PRODUCER_FENCED
    fenced = fence_epoch(add_partitions(bumped, 7, 1, frozenset({("t", 0)}), 8), 9)
    assert error_of(init_producer, complete(begin_abort(fenced, 9), 10), "tx", 30_000, 11, lambda: 99, 7, 0) \
        == ErrorCode.PRODUCER_FENCED


def test_an_exhausted_epoch_gets_a_new_producer_id():
    exhausted = TransactionMetadata("tx", 7, MAX_EPOCH - 1, 1000, S.COMPLETE_ABORT)
    renewed = init_producer(exhausted, "tx", 1000, 1, lambda: 42)
    assert (renewed.producer_id, renewed.producer_epoch) == (42, 0)


def test_timeouts():
    ongoing = add_partitions(fresh(), 7, 0, frozenset({("t", 0)}), 1000)
    assert not ongoing.expired(61_000) and ongoing.expired(61_001)
    assert not fresh().expired(10**12)


@pytest.mark.parametrize("state", list(S))
def test_records_round_trip(state):
    partitions = frozenset() if state is S.EMPTY else frozenset({("a", 0), ("a", 3), ("b", 1)})
    metadata = TransactionMetadata("tx-1", 12, 3, 5000, state, partitions, 100, 200)
    key, value = transaction_record(metadata)
    assert key[:2] == b"\x00\x00" and value[:2] == b"\x00\x00"
    assert parse_transaction_record(key, value) == ("tx-1", metadata)
    assert parse_transaction_record(key, None) == ("tx-1", None)
    assert state.display_name == {"EMPTY": "Empty", "ONGOING": "Ongoing", "PREPARE_COMMIT": "PrepareCommit",
                                  "PREPARE_ABORT": "PrepareAbort", "COMPLETE_COMMIT": "CompleteCommit",
                                  "COMPLETE_ABORT": "CompleteAbort", "DEAD": "Dead",
                                  "PREPARE_EPOCH_FENCE": "PrepareEpochFence"}[state.name]
