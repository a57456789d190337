"""How a share-partition's leader and the group coordinator reach the share state, wherever it is kept: Kafka's
Persister (DefaultStatePersister) for this broker.

Each operation names one share-partition (group, topic id, partition). The state lives with the broker leading the
__share_group_state partition the key hashes to (share_state_coordinator.py): this broker's own ShareStateCoordinator
is called directly when that is this broker (always on a single node), else the request (InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState, ReadShareGroupStateSummary) goes to that broker
over one kept inter-broker connection per broker (odradek.cluster.peer's PeerPool, which the caller owns). Answers that
say the state partition is moving or loading (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE,
COORDINATOR_LOAD_IN_PROGRESS, NOT_LEADER_OR_FOLLOWER, a broken connection) are tried again, the leader looked up
afresh, until request.timeout.ms; any other error (FENCED_LEADER_EPOCH, FENCED_STATE_EPOCH, NOT_ENOUGH_REPLICAS,
REQUEST_TIMED_OUT) is the caller's, as a KafkaError.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from typing import NamedTuple

from odradek.cluster.peer import PeerPool
from odradek.coordinator.share_state import SHARE_STATE_TOPIC
from odradek.coordinator.share_state_coordinator import Batches, ShareStateCoordinator, StoredState
from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api

log = logging.getLogger(__name__)

Key = tuple[str, uuid.UUID, int]


class Summary(NamedTuple):
    state_epoch: int
    start_offset: int
    delivery_complete_count: int  # records past the start offset acknowledged or archived


RETRIABLE = {ErrorCode.NOT_COORDINATOR, ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
             ErrorCode.NOT_LEADER_OR_FOLLOWER}
RETRY_BACKOFF_S = 0.1

INITIALIZE, READ, WRITE = api("InitializeShareGroupState"), api("ReadShareGroupState"), api("WriteShareGroupState")
DELETE, SUMMARY = api("DeleteShareGroupState"), api("ReadShareGroupStateSummary")


class SharePersister:
    def __init__(self, broker, local: ShareStateCoordinator, peers: PeerPool):
        self.broker = broker
        self.local = local
        self.peers = peers

    # ------------------------------------------------------------------------------------------ operations
    async def read(self, key: Key, leader_epoch: int) -> StoredState | None:
        async def here():
            stored, pending = self.local.read(key, leader_epoch)
            await _settled(pending)
            return stored

        def answer(p):
            return None if p.start_offset < 0 else StoredState(p.state_epoch, leader_epoch, p.start_offset, [
                (b.first_offset, b.last_offset, b.delivery_state, b.delivery_count) for b in p.state_batches])

        return await self._call(key, here, READ, 0, lambda: dict(leader_epoch=leader_epoch), answer)

    async def summary(self, key: Key) -> Summary | None:
        async def here():
            stored = self.local.summary(key)
            return None if stored is None else Summary(stored.state_epoch, stored.start_offset,
                                                       stored.delivery_complete_count)

        def answer(p):
            return None if p.start_offset < 0 else Summary(p.state_epoch, p.start_offset, p.delivery_complete_count)

        return await self._call(key, here, SUMMARY, 1, lambda: dict(leader_epoch=-1), answer)

    async def write(self, key: Key, *, state_epoch: int, leader_epoch: int, start_offset: int,
                    batches: Batches) -> None:
        async def here():
            await _settled(self.local.write(key, state_epoch=state_epoch, leader_epoch=leader_epoch,
                                            start_offset=start_offset, batches=batches))

        def fields():  # the wire form, made only for a remote share coordinator
            Batch = WRITE.request.StateBatch
            return dict(state_epoch=state_epoch, leader_epoch=leader_epoch, start_offset=start_offset,
                        state_batches=[Batch(first_offset=f, last_offset=la, delivery_state=s, delivery_count=c)
                                       for f, la, s, c in batches])

        await self._call(key, here, WRITE, 0, fields, lambda p: None)

    async def initialize(self, key: Key, *, state_epoch: int, start_offset: int) -> None:
        async def here():
            await _settled(self.local.initialize(key, state_epoch=state_epoch, start_offset=start_offset))

        await self._call(key, here, INITIALIZE, 0, lambda: dict(state_epoch=state_epoch, start_offset=start_offset),
                         lambda p: None)

    async def delete(self, key: Key) -> None:
        async def here():
            await _settled(self.local.delete(key))

        await self._call(key, here, DELETE, 0, dict, lambda p: None)

    # ---------------------------------------------------------------------------------------------- routing
    async def _call(self, key: Key, here, spec, version: int, partition_fields, answer):
        """`here()` when this broker leads the key's state partition, else `spec` to the broker that does (its
        partition's fields from `partition_fields()`), its partition's answer through `answer`; retried while the
        state partition moves or loads."""
        deadline = time.monotonic() + self.broker.config["request.timeout.ms"] / 1000
        while True:
            try:
                self.local.ensure_topic()
                leader = self._leader(key)
                if leader == self.broker.node_id:
                    return await here()
                return answer(await self._remote(leader, key, spec, version, partition_fields))
            except (KafkaError, OSError, asyncio.TimeoutError) as exc:
                code = exc.code if isinstance(exc, KafkaError) else ErrorCode.COORDINATOR_NOT_AVAILABLE
                if code not in RETRIABLE or time.monotonic() + RETRY_BACKOFF_S >= deadline or self.broker.stopping:
                    if isinstance(exc, KafkaError):
                        raise
                    raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"The share coordinator is not "
                                     f"reachable: {exc}") from None
                await asyncio.sleep(RETRY_BACKOFF_S)

    def _leader(self, key: Key) -> int:
        topic = self.broker.metadata.topics.get(SHARE_STATE_TOPIC)
        if topic is None:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, f"{SHARE_STATE_TOPIC} is being created.")
        leader = topic.partitions[self.local.partition_for(key)].leader
        if leader < 0:
            raise KafkaError(ErrorCode.COORDINATOR_NOT_AVAILABLE, "The state partition has no leader.")
        return leader

    async def _remote(self, node_id: int, key: Key, spec, version: int, partition_fields):
        group_id, topic_id, index = key
        Request = spec.request
        request = Request(group_id=group_id, topics=[Request.StateData(topic_id=topic_id, partitions=[
            Request.PartitionData(partition=index, **partition_fields())])])
        result = (await self.peers.request(node_id, spec, version, request)).results[0].partitions[0]
        if result.error_code != ErrorCode.NONE:
            raise KafkaError(ErrorCode(result.error_code), result.error_message)
        return result


async def _settled(pending) -> None:
    """Await what a state operation left pending (None: nothing); its error raised."""
    if pending is None:
        return
    error = await pending
    if error is not None:
        raise error
