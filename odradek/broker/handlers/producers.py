"""InitProducerId: gives an idempotent producer its id and epoch.

Producers without a transactional id get a fresh id at epoch 0 (kafka-python enables idempotence by default, so
this is on every such client's path). Transactional ids are the transaction coordinator's to answer.
"""

from __future__ import annotations

from odradek.cluster.producer_ids import ProducerIdManager
from odradek.errors import ErrorCode
from odradek.protocol import api

INIT_PRODUCER_ID = api("InitProducerId")
InitProducerIdResponse = INIT_PRODUCER_ID.response


def handlers(broker) -> dict:
    producer_ids = ProducerIdManager(broker.metadata)
    broker.producer_ids = producer_ids

    def answer_init_producer_id(connection, header, request):
        if request.transactional_id is not None:
            return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.COORDINATOR_NOT_AVAILABLE,
                                          producer_id=-1, producer_epoch=-1)
        return InitProducerIdResponse(throttle_time_ms=0, error_code=ErrorCode.NONE,
                                      producer_id=producer_ids.next_id(), producer_epoch=0)

    return {INIT_PRODUCER_ID.key: answer_init_producer_id}
