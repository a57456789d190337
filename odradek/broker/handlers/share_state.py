"""The share coordinator's state APIs, asked by other brokers (share_persister.py): InitializeShareGroupState,
ReadShareGroupState, WriteShareGroupState, DeleteShareGroupState and ReadShareGroupStateSummary.

Wire translation around the broker's ShareStateCoordinator (odradek/coordinator/share_state_coordinator.py), one
share-partition at a time, each partition's KafkaError its own error code: NOT_COORDINATOR when another broker leads
its state partition, the fencing errors, and a write's replication errors. The requester needs CLUSTER_ACTION on the
cluster, as Kafka's KafkaApis asks of these inter-broker requests; without it every partition is
CLUSTER_AUTHORIZATION_FAILED.
"""

from __future__ import annotations

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation

INITIALIZE = api("InitializeShareGroupState")
READ = api("ReadShareGroupState")
WRITE = api("WriteShareGroupState")
DELETE = api("DeleteShareGroupState")
SUMMARY = api("ReadShareGroupStateSummary")


def handlers(broker) -> dict:
    state = broker.share_coordinator.state

    def serve(spec, operation):
        """A handler answering each partition with `operation(key, partition request, partition answer)`, which
        may return an awaitable of the error (a write waiting for its replicas)."""
        Response = spec.response

        async def answer(connection, header, request):
            allowed = broker.access(connection).allows_cluster(AclOperation.CLUSTER_ACTION)
            results = []
            for topic in request.topics:
                result = Response.StateResult(topic_id=topic.topic_id)
                results.append(result)
                for p in topic.partitions:
                    out = Response.PartitionResult(partition=p.partition, error_code=ErrorCode.NONE)
                    result.partitions.append(out)
                    try:
                        if not allowed:
                            raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
                        pending = operation((request.group_id, topic.topic_id, p.partition), p, out)
                        error = await pending if pending is not None else None
                        if error is not None:
                            raise error
                    except KafkaError as exc:
                        out.error_code, out.error_message = exc.code, exc.message
            return Response(results=results)

        return answer

    def initialize(key, p, out):
        return state.initialize(key, state_epoch=p.state_epoch, start_offset=p.start_offset)

    def read(key, p, out):
        stored, pending = state.read(key, p.leader_epoch)
        out.state_epoch, out.start_offset = (stored.state_epoch, stored.start_offset) if stored else (0, -1)
        out.state_batches = [READ.response.StateBatch(first_offset=f, last_offset=la, delivery_state=s,
                                                      delivery_count=c) for f, la, s, c in (stored.batches
                                                                                           if stored else [])]
        return pending

    def write(key, p, out):
        return state.write(key, state_epoch=p.state_epoch, leader_epoch=p.leader_epoch, start_offset=p.start_offset,
                           batches=[(b.first_offset, b.last_offset, b.delivery_state, b.delivery_count)
                                    for b in p.state_batches])

    def delete(key, p, out):
        return state.delete(key)

    def summary(key, p, out):
        stored = state.summary(key)
        out.state_epoch, out.leader_epoch = (stored.state_epoch, stored.leader_epoch) if stored else (0, -1)
        out.start_offset = stored.start_offset if stored else -1
        out.delivery_complete_count = stored.delivery_complete_count if stored else -1

    return {INITIALIZE.key: serve(INITIALIZE, initialize), READ.key: serve(READ, read),
            WRITE.key: serve(WRITE, write), DELETE.key: serve(DELETE, delete), SUMMARY.key: serve(SUMMARY, summary)}
