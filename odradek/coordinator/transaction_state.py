"""Transactions as the coordinator keeps them: one TransactionMetadata per transactional id, its state machine, and
its record in __transaction_state.

Plain code with explicit `now_ms`: every request becomes a transition that either raises the error Kafka answers
with or returns the metadata to persist (the coordinator writes it, then keeps it), so the rules are testable without
a broker. The states and checks are Kafka's TransactionCoordinator/TransactionMetadata for transaction version 1:
InitProducerId bumps the epoch (a new producer id once it is exhausted; a KIP-360 retry of a bump answers the bumped
epoch again) and fences an open transaction by aborting it; AddPartitionsToTxn/AddOffsetsToTxn open a transaction; EndTxn moves Ongoing to PrepareCommit/PrepareAbort, and
once every marker is written the transaction is CompleteCommit/CompleteAbort. A retried EndTxn of a completed
transaction succeeds again. Records are Kafka's TransactionLogKey v0 / TransactionLogValue v0, so the topic reads
the same to Kafka's tools.
"""

from __future__ import annotations

import dataclasses
import enum

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.internal import TransactionLogKey, TransactionLogValue, decode_versioned, encode_versioned

TRANSACTION_STATE_TOPIC = "__transaction_state"
NO_PRODUCER_ID = -1
MAX_EPOCH = 32767  # Kafka's Short.MAX_VALUE

TopicPartition = tuple[str, int]


class TransactionState(enum.IntEnum):
    """Kafka's states, by the id its log records carry."""

    EMPTY = 0
    ONGOING = 1
    PREPARE_COMMIT = 2
    PREPARE_ABORT = 3
    COMPLETE_COMMIT = 4
    COMPLETE_ABORT = 5
    DEAD = 6
    PREPARE_EPOCH_FENCE = 7

    @property
    def display_name(self) -> str:
        """The name DescribeTransactions/ListTransactions use: "PrepareCommit" and so on."""
        return "".join(part.capitalize() for part in self.name.split("_"))


COMPLETED = (TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT)
PREPARED = (TransactionState.PREPARE_COMMIT, TransactionState.PREPARE_ABORT)


@dataclasses.dataclass(frozen=True)
class TransactionMetadata:
    transactional_id: str
    producer_id: int
    producer_epoch: int
    timeout_ms: int
    state: TransactionState
    partitions: frozenset[TopicPartition] = frozenset()
    start_ms: int = -1
    last_update_ms: int = -1
    # The epoch a KIP-360 InitProducerId bumped from (-1: none, or fenced since): a retry naming it, whose answer
    # was lost, gets the current epoch again rather than PRODUCER_FENCED. In memory only, as Kafka's lastProducerEpoch
    # (its TransactionLogValue has no field for it): a retry across a coordinator move is fenced, in Kafka too.
    last_producer_epoch: int = -1

    def expired(self, now_ms: int) -> bool:
        return self.state is TransactionState.ONGOING and self.start_ms + self.timeout_ms < now_ms


def _check_producer(current: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> TransactionMetadata:
    if current is None or current.producer_id != producer_id:
        raise KafkaError(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    if producer_epoch != current.producer_epoch:
        raise KafkaError(ErrorCode.PRODUCER_FENCED)
    return current


def check_producer(current: TransactionMetadata | None, producer_id: int, producer_epoch: int) -> None:
    """The producer id and epoch are the transactional id's current ones (TxnOffsetCommit's check)."""
    _check_producer(current, producer_id, producer_epoch)


def init_producer(current: TransactionMetadata | None, transactional_id: str, timeout_ms: int, now_ms: int,
                  new_producer_id, expected_producer_id: int = NO_PRODUCER_ID,
                  expected_epoch: int = -1) -> TransactionMetadata:
    """InitProducerId for a transactional id in a completed state (or a new one): the next epoch, Empty.
    `new_producer_id` is called when a new id is needed. An open transaction must be fenced first
    (`fence_epoch` + abort); a prepared one is still completing: CONCURRENT_TRANSACTIONS."""
    if current is None:
        return TransactionMetadata(transactional_id, new_producer_id(), 0, timeout_ms, TransactionState.EMPTY,
                                   last_update_ms=now_ms)
    if current.state not in COMPLETED:
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
    bumping = expected_producer_id != NO_PRODUCER_ID  # KIP-360: the producer names the id and epoch it has
    if bumping and expected_producer_id != current.producer_id:
        raise KafkaError(ErrorCode.PRODUCER_FENCED)
    if bumping and expected_epoch != current.producer_epoch:
        if expected_epoch != current.last_producer_epoch or current.last_producer_epoch < 0:
            raise KafkaError(ErrorCode.PRODUCER_FENCED)
        return dataclasses.replace(current, timeout_ms=timeout_ms, last_update_ms=now_ms)  # a retry: the same epoch
    if current.producer_epoch >= MAX_EPOCH - 1:
        producer_id, epoch = new_producer_id(), 0
    else:
        producer_id, epoch = current.producer_id, current.producer_epoch + 1
    return dataclasses.replace(current, producer_id=producer_id, producer_epoch=epoch, timeout_ms=timeout_ms,
                               state=TransactionState.EMPTY, partitions=frozenset(), start_ms=-1,
                               last_update_ms=now_ms,
                               last_producer_epoch=current.producer_epoch if bumping else -1)


def fence_epoch(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Bump the epoch of an open transaction before the coordinator aborts it (a new producer with the same
    transactional id, or a timeout): the old producer's writes and markers are refused from then on."""
    return dataclasses.replace(current, producer_epoch=min(current.producer_epoch + 1, MAX_EPOCH),
                               last_update_ms=now_ms, last_producer_epoch=-1)


def add_partitions(current: TransactionMetadata | None, producer_id: int, producer_epoch: int,
                   partitions: frozenset[TopicPartition], now_ms: int) -> TransactionMetadata | None:
    """AddPartitionsToTxn/AddOffsetsToTxn: the transaction is Ongoing with these partitions; None if it already
    was (nothing to write)."""
    current = _check_producer(current, producer_id, producer_epoch)
    if current.state in PREPARED:
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
    if current.state not in COMPLETED and current.state is not TransactionState.ONGOING:
        raise KafkaError(ErrorCode.INVALID_TXN_STATE)
    if current.state is TransactionState.ONGOING and partitions <= current.partitions:
        return None
    starting = current.state is not TransactionState.ONGOING
    return dataclasses.replace(current, state=TransactionState.ONGOING, partitions=current.partitions | partitions,
                               start_ms=now_ms if starting else current.start_ms, last_update_ms=now_ms)


def prepare_end(current: TransactionMetadata | None, producer_id: int, producer_epoch: int, commit: bool,
                now_ms: int) -> TransactionMetadata | None:
    """EndTxn: Ongoing becomes PrepareCommit/PrepareAbort; None when the transaction already ended that way (a
    retry). Ending the other way, or a transaction never begun, is INVALID_TXN_STATE."""
    current = _check_producer(current, producer_id, producer_epoch)
    state = current.state
    if state is TransactionState.ONGOING:
        return dataclasses.replace(current, state=TransactionState.PREPARE_COMMIT if commit
                                   else TransactionState.PREPARE_ABORT, last_update_ms=now_ms)
    if state is (TransactionState.COMPLETE_COMMIT if commit else TransactionState.COMPLETE_ABORT):
        return None
    if state is (TransactionState.PREPARE_COMMIT if commit else TransactionState.PREPARE_ABORT):
        raise KafkaError(ErrorCode.CONCURRENT_TRANSACTIONS)
    raise KafkaError(ErrorCode.INVALID_TXN_STATE,
                     f"Cannot {'commit' if commit else 'abort'} a transaction in state {state.display_name}")


def begin_abort(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """The coordinator's own abort of an open transaction (after `fence_epoch`)."""
    return dataclasses.replace(current, state=TransactionState.PREPARE_ABORT, last_update_ms=now_ms)


def complete(current: TransactionMetadata, now_ms: int) -> TransactionMetadata:
    """Every marker of a prepared transaction is written."""
    state = (TransactionState.COMPLETE_COMMIT if current.state is TransactionState.PREPARE_COMMIT
             else TransactionState.COMPLETE_ABORT)
    return dataclasses.replace(current, state=state, partitions=frozenset(), last_update_ms=now_ms)


# -- __transaction_state records -------------------------------------------------------------------------------

def transaction_record(metadata: TransactionMetadata) -> tuple[bytes, bytes]:
    key = encode_versioned(TransactionLogKey, 0, TransactionLogKey(transactional_id=metadata.transactional_id))
    by_topic: dict[str, list[int]] = {}
    for topic, index in sorted(metadata.partitions):
        by_topic.setdefault(topic, []).append(index)
    partitions = None if metadata.state is TransactionState.EMPTY else [
        TransactionLogValue.PartitionsSchema(topic=topic, partition_ids=indexes) for topic, indexes in by_topic.items()]
    value = TransactionLogValue(producer_id=metadata.producer_id, producer_epoch=metadata.producer_epoch,
                                transaction_timeout_ms=metadata.timeout_ms, transaction_status=int(metadata.state),
                                transaction_partitions=partitions,
                                transaction_last_update_timestamp_ms=metadata.last_update_ms,
                                transaction_start_timestamp_ms=metadata.start_ms)
    return key, encode_versioned(TransactionLogValue, 0, value)


def parse_transaction_record(key: bytes, value: bytes | None) -> tuple[str, TransactionMetadata | None]:
    """(transactional id, its metadata or None for a tombstone)."""
    _, parsed_key = decode_versioned(TransactionLogKey, key)
    transactional_id = parsed_key.transactional_id
    if value is None:
        return transactional_id, None
    _, v = decode_versioned(TransactionLogValue, value)
    partitions = frozenset((p.topic, index) for p in v.transaction_partitions or () for index in p.partition_ids)
    return transactional_id, TransactionMetadata(
        transactional_id, v.producer_id, v.producer_epoch, v.transaction_timeout_ms,
        TransactionState(v.transaction_status), partitions, v.transaction_start_timestamp_ms,
        v.transaction_last_update_timestamp_ms)
