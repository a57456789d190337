"""The transaction coordinator's loading on leadership changes, on a stand-in broker that counts the reads of each
__transaction_state partition: a broker that comes to lead one more partition reads that one only, and the
transactional ids of the partitions it already led stay available meanwhile (no COORDINATOR_LOAD_IN_PROGRESS)."""

from __future__ import annotations

import asyncio
import types
from collections import Counter

import pytest

from odradek.coordinator.offsets_topic import partition_for
from odradek.coordinator.transaction_coordinator import TransactionCoordinator
from odradek.coordinator.transaction_state import TRANSACTION_STATE_TOPIC
from odradek.errors import ErrorCode, KafkaError


class StandInBroker:
    def __init__(self):
        self.config = {"transaction.state.log.num.partitions": 4, "transaction.max.timeout.ms": 900_000,
                       "transaction.abort.timed.out.transaction.cleanup.interval.ms": 10_000,
                       "transaction.state.log.segment.bytes": 104_857_600}
        self.metadata = types.SimpleNamespace(topics={})
        self.controller = None  # a single node: __transaction_state's min.insync.replicas is 1
        self.membership = types.SimpleNamespace(in_session=True)
        self.led: set[int] = set()
        self.reads: Counter = Counter()

    def leads(self, topic: str, index: int) -> bool:
        return topic == TRANSACTION_STATE_TOPIC and index in self.led

    def ensure_internal_topic(self, *args) -> None:
        pass  # it exists

    def check_coordinator_partition(self, topic: str, index: int) -> None:
        pass  # this broker coordinates every id asked here

    def partition(self, topic: str, index: int):
        self.reads[index] += 1
        return types.SimpleNamespace(log=types.SimpleNamespace(iter_batches=lambda: iter(())))


def test_a_gained_transaction_state_partition_is_loaded_alone():
    async def scenario():
        broker = StandInBroker()
        coordinator = TransactionCoordinator(broker)
        coordinator.start()  # no __transaction_state yet
        broker.led = {0, 1}  # created, two of its partitions led here
        coordinator.follow_leadership()
        await coordinator._tasks[-1]
        assert broker.reads == {0: 1, 1: 1}
        broker.led = {0, 1, 2}
        coordinator.follow_leadership()
        loading = coordinator._tasks[-1]
        already_led, gained = (next(f"id-{n}" for n in range(1000) if partition_for(f"id-{n}", 4) == index)
                               for index in (0, 2))
        for transactional_id, answer in ((already_led, ErrorCode.TRANSACTIONAL_ID_NOT_FOUND),
                                         (gained, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)):
            with pytest.raises(KafkaError) as raised:
                coordinator.describe(transactional_id)
            assert raised.value.code == answer, transactional_id
        await loading
        assert broker.reads == {0: 1, 1: 1, 2: 1}
        await coordinator.stop()

    asyncio.run(scenario())
