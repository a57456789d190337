"""A share group member speaking the protocol itself over one connection (odradek.client.connection): the
ShareGroupHeartbeat that joins, ShareFetch and ShareAcknowledge with their session epochs counted, and the whole
answers returned, for tests that look at what a client library would hide (the records an answer carries, the error
of one acknowledgement)."""

from __future__ import annotations

import uuid

from odradek.client.connection import Connection
from odradek.embedded import wait_until
from odradek.errors import ErrorCode
from odradek.protocol import api

VERSIONS = {"ShareGroupHeartbeat": (1, 1), "ShareFetch": (1, 1), "ShareAcknowledge": (1, 1), "Metadata": (12, 12),
            "DescribeShareGroupOffsets": (1, 1)}
FETCH, ACKNOWLEDGE = api("ShareFetch").request, api("ShareAcknowledge").request
DESCRIBE_OFFSETS = api("DescribeShareGroupOffsets").request


class RawShareMember:
    def __init__(self, port: int, group: str, topic: str):
        self.connection = Connection(("127.0.0.1", port), 30, "raw-share-member", VERSIONS)
        self.group, self.topic = group, topic
        self.member_id = uuid.uuid4().hex
        self.epoch = 0  # the share session's next epoch
        self.topic_id = next(t.topic_id for t in self.metadata().topics if t.name == topic)

    def metadata(self):
        return self.connection.call("Metadata", topics=None, allow_auto_topic_creation=False)

    def join(self) -> None:
        """Heartbeat until the member is assigned a partition."""
        def assigned():
            answer = self.connection.call("ShareGroupHeartbeat", group_id=self.group, member_id=self.member_id,
                                          member_epoch=0, subscribed_topic_names=[self.topic])
            assert answer.error_code == 0, answer
            return answer.assignment is not None and answer.assignment.topic_partitions
        assert wait_until(assigned, 30)

    def fetch(self, wait_ms: int, max_records: int = 100):
        """ShareFetch of partition 0 (the first opens the share session); the partition's answer, None when the
        answer leaves it out (nothing to say about it)."""
        answer = self.connection.call(
            "ShareFetch", group_id=self.group, member_id=self.member_id, share_session_epoch=self.epoch,
            max_wait_ms=wait_ms, min_bytes=1, max_records=max_records, batch_size=max_records, topics=[
                FETCH.FetchTopic(topic_id=self.topic_id, partitions=[FETCH.FetchPartition(partition_index=0)])])
        self.epoch += 1
        assert answer.error_code == 0, answer
        return answer.responses[0].partitions[0] if answer.responses else None

    def acknowledge(self, first: int, last: int, kind: int) -> ErrorCode:
        """ShareAcknowledge of offsets first..last of partition 0; the partition's error."""
        answer = self.connection.call(
            "ShareAcknowledge", group_id=self.group, member_id=self.member_id, share_session_epoch=self.epoch,
            topics=[ACKNOWLEDGE.AcknowledgeTopic(topic_id=self.topic_id, partitions=[
                ACKNOWLEDGE.AcknowledgePartition(partition_index=0, acknowledgement_batches=[
                    ACKNOWLEDGE.AcknowledgementBatch(first_offset=first, last_offset=last,
                                                     acknowledge_types=[kind])])])])
        self.epoch += 1
        assert answer.error_code == 0, answer
        return ErrorCode(answer.responses[0].partitions[0].error_code)

    def lag(self) -> int:
        answer = self.connection.call("DescribeShareGroupOffsets", groups=[
            DESCRIBE_OFFSETS.DescribeShareGroupOffsetsRequestGroup(group_id=self.group, topics=[
                DESCRIBE_OFFSETS.DescribeShareGroupOffsetsRequestTopic(topic_name=self.topic, partitions=[0])])])
        return answer.groups[0].topics[0].partitions[0].lag

    def close(self) -> None:
        self.connection.close()
