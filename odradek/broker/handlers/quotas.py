"""DescribeClientQuotas and AlterClientQuotas: the client quotas kept in the catalogue.

As Kafka's: describing needs DESCRIBE_CONFIGS on the cluster, altering ALTER_CONFIGS (CLUSTER_AUTHORIZATION_FAILED);
entities are users and client ids, a null name being the `<default>`; keys are producer_byte_rate,
consumer_byte_rate and request_percentage, each positive. Each altered entity succeeds or fails alone
(INVALID_REQUEST); validate_only checks without storing. A change applies to the next recorded request at once,
through odradek/security/quotas.py.
"""

from __future__ import annotations

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation
from odradek.security.quotas import check_quota_value, entity_of

DESCRIBE_CLIENT_QUOTAS = api("DescribeClientQuotas")
ALTER_CLIENT_QUOTAS = api("AlterClientQuotas")

MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED = 0, 1, 2


def _matches(entity, components, strict: bool) -> bool:
    names = dict(entity)
    for component in components:
        if component.entity_type not in names:
            return False
        name = names[component.entity_type]
        if component.match_type == MATCH_EXACT and name != component.match:
            return False
        if component.match_type == MATCH_DEFAULT and name is not None:
            return False
        if component.match_type == MATCH_SPECIFIED and name is None:
            return False
    return not strict or len(names) == len(components)


def handlers(broker) -> dict:
    def answer_describe_client_quotas(connection, header, request):
        Response = DESCRIBE_CLIENT_QUOTAS.response
        if not broker.access(connection).allows_cluster(AclOperation.DESCRIBE_CONFIGS):
            return Response(throttle_time_ms=0, error_code=ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
                            error_message="Cluster authorization failed.", entries=None)
        try:
            entity_of((c.entity_type, None) for c in request.components) if request.components else None
            for component in request.components:
                if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_SPECIFIED):
                    raise KafkaError(ErrorCode.INVALID_REQUEST, f"Unexpected match type: {component.match_type}")
        except KafkaError as exc:
            return Response(throttle_time_ms=0, error_code=exc.code, error_message=exc.message, entries=None)
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, entries=[
            Response.EntryData(
                entity=[Response.EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
                values=[Response.ValueData(key=key, value=value) for key, value in values.items()])
            for entity, values in broker.metadata.client_quotas.items()
            if _matches(entity, request.components, request.strict)])

    async def answer_alter_client_quotas(connection, header, request):
        Response = ALTER_CLIENT_QUOTAS.response
        allowed = broker.access(connection).allows_cluster(AclOperation.ALTER_CONFIGS)
        results = []
        for entry in request.entries:
            result = Response.EntryData(error_code=ErrorCode.NONE, error_message=None, entity=[
                Response.EntityData(entity_type=e.entity_type, entity_name=e.entity_name)
                for e in entry.entity])
            try:
                if not allowed:
                    raise KafkaError(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")
                entity = entity_of((e.entity_type, e.entity_name) for e in entry.entity)
                values = dict(broker.metadata.client_quotas.get(entity, {}))
                for op in entry.ops:
                    if op.remove:
                        check_quota_value(op.key, 1)
                        values.pop(op.key, None)
                    else:
                        check_quota_value(op.key, op.value)
                        values[op.key] = op.value
                if not request.validate_only:
                    await broker.catalogue_write(broker.metadata.set_client_quotas, entity, values)
            except KafkaError as exc:
                result.error_code, result.error_message = exc.code, exc.message
            results.append(result)
        return Response(throttle_time_ms=0, entries=results)

    return {DESCRIBE_CLIENT_QUOTAS.key: answer_describe_client_quotas,
            ALTER_CLIENT_QUOTAS.key: answer_alter_client_quotas}
