"""A follower's fetch answer is for the position it was asked at: one that arrives after the partition moved on (a
new leader epoch, or its log end moved) is dropped and asked again, never appended below the log end (issue 15:
"Batch at offset 114 is below the next offset 122" during controlled shutdowns)."""
import asyncio
from types import SimpleNamespace

import pytest

from odradek.broker.replica_fetcher import ReplicaFetchers

LEADER = 1


class FollowerPartition:
    def __init__(self):
        self.topic, self.index = "t", 0
        self.is_leader, self.needs_truncation = False, False
        self.assignment = SimpleNamespace(leader=LEADER, leader_epoch=3)
        self.log = SimpleNamespace(log_end_offset=114, log_start_offset=0)
        self.appended: list[int] = []  # the log end each append was made at

    @property
    def leader_epoch(self) -> int:
        return self.assignment.leader_epoch

    def append_replicated(self, records, headers, high_watermark) -> None:
        self.appended.append(self.log.log_end_offset)


def fetcher_whose_fetch_meanwhile(move_on) -> tuple[ReplicaFetchers, FollowerPartition]:
    partition = FollowerPartition()
    broker = SimpleNamespace(node_id=2, partitions={("t", 0): partition}, config={
        "replica.fetch.max.bytes": 1 << 20, "replica.fetch.wait.max.ms": 500, "replica.fetch.min.bytes": 1,
        "replica.fetch.response.max.bytes": 10 << 20})
    fetcher = ReplicaFetchers.__new__(ReplicaFetchers)
    fetcher.broker, fetcher._polling = broker, {}
    fetcher._held_back = lambda partitions: []
    fetcher._record_throttled = lambda partitions, response: None

    async def round_trip(leader_id, reader, writer, spec, version, request, wait_s=0.0):
        move_on(partition)  # while the answer is on its way
        answer = SimpleNamespace(partition_index=0, error_code=0, records=None, high_watermark=130,
                                 log_start_offset=0)
        return SimpleNamespace(responses=[SimpleNamespace(topic="t", partitions=[answer])])
    fetcher._round_trip = round_trip
    return fetcher, partition


def advance_log_end(partition):
    partition.log.log_end_offset = 122


def new_leader_epoch(partition):
    partition.assignment = SimpleNamespace(leader=LEADER, leader_epoch=4)


@pytest.mark.parametrize("move_on", [advance_log_end, new_leader_epoch])
def test_an_answer_for_an_older_fetch_position_is_dropped(move_on):
    fetcher, partition = fetcher_whose_fetch_meanwhile(move_on)
    asyncio.run(fetcher._fetch_once(LEADER, None, None))
    assert partition.appended == []


def test_an_answer_for_the_current_position_is_appended():
    fetcher, partition = fetcher_whose_fetch_meanwhile(lambda partition: None)
    asyncio.run(fetcher._fetch_once(LEADER, None, None))
    assert partition.appended == [114]
