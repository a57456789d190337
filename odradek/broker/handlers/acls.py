"""CreateAcls, DescribeAcls and DeleteAcls: the authorizer's bindings, kept in the catalogue.

As Kafka's AclApis: with no authorizer configured every answer is SECURITY_DISABLED; creating and deleting need
ALTER on the cluster, describing DESCRIBE on it (CLUSTER_AUTHORIZATION_FAILED otherwise). A creation Kafka cannot
store (unknown or ANY values, an operation the resource type lacks) fails alone with INVALID_REQUEST; a filter with
an unknown value fails alone too. DescribeAcls groups the matching bindings by resource pattern.
"""

from __future__ import annotations

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol import api
from odradek.protocol.acl import AclOperation
from odradek.security.acl import AclBinding, AclFilter

CREATE_ACLS = api("CreateAcls")
DESCRIBE_ACLS = api("DescribeAcls")
DELETE_ACLS = api("DeleteAcls")

_DISABLED = (ErrorCode.SECURITY_DISABLED, "No Authorizer is configured.")
_NOT_ALLOWED = (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed.")


def _refusal(broker, connection, operation: AclOperation):
    """(code, message) when this request may not touch ACLs at all, else None."""
    if broker.authorizer is None:
        return _DISABLED
    if not broker.access(connection).allows_cluster(operation):
        return _NOT_ALLOWED
    return None


def _filter(request_part) -> AclFilter:
    return AclFilter(request_part.resource_type_filter, request_part.resource_name_filter,
                     request_part.pattern_type_filter, request_part.principal_filter, request_part.host_filter,
                     request_part.operation, request_part.permission_type)


def handlers(broker) -> dict:
    async def answer_create_acls(connection, header, request):
        Response = CREATE_ACLS.response
        refusal = _refusal(broker, connection, AclOperation.ALTER)
        if refusal is not None:
            return Response(throttle_time_ms=0, results=[
                Response.AclCreationResult(error_code=refusal[0], error_message=refusal[1])
                for _ in request.creations])
        results, valid = [], []
        for creation in request.creations:
            try:
                binding = AclBinding.checked(creation.resource_type, creation.resource_name,
                                             creation.resource_pattern_type, creation.principal, creation.host,
                                             creation.operation, creation.permission_type)
                broker.metadata.check_acl(binding)
                valid.append(binding)
            except KafkaError as exc:
                results.append(Response.AclCreationResult(error_code=exc.code, error_message=exc.message))
            else:
                results.append(Response.AclCreationResult(error_code=ErrorCode.NONE, error_message=None))
        if valid:
            await broker.catalogue_write(broker.metadata.add_acls, valid)
        return Response(throttle_time_ms=0, results=results)

    def answer_describe_acls(connection, header, request):
        Response = DESCRIBE_ACLS.response
        refusal = _refusal(broker, connection, AclOperation.DESCRIBE)
        acl_filter = _filter(request)
        if refusal is None:
            try:
                acl_filter.check()
            except KafkaError as exc:
                refusal = (exc.code, exc.message)
        if refusal is not None:
            return Response(throttle_time_ms=0, error_code=refusal[0], error_message=refusal[1], resources=[])
        by_pattern: dict = {}
        for acl in broker.metadata.acls:
            if acl_filter.matches(acl):
                by_pattern.setdefault((acl.resource_type, acl.resource_name, acl.pattern_type), []).append(
                    Response.AclDescription(principal=acl.principal, host=acl.host, operation=acl.operation,
                                            permission_type=acl.permission))
        return Response(throttle_time_ms=0, error_code=ErrorCode.NONE, error_message=None, resources=[
            Response.DescribeAclsResource(resource_type=kind, resource_name=name, pattern_type=pattern, acls=acls)
            for (kind, name, pattern), acls in by_pattern.items()])

    async def answer_delete_acls(connection, header, request):
        Response = DELETE_ACLS.response
        refusal = _refusal(broker, connection, AclOperation.ALTER)
        if refusal is not None:
            return Response(throttle_time_ms=0, filter_results=[
                Response.DeleteAclsFilterResult(error_code=refusal[0], error_message=refusal[1], matching_acls=[])
                for _ in request.filters])
        filters, failures = [], {}
        for position, part in enumerate(request.filters):
            acl_filter = _filter(part)
            try:
                acl_filter.check()
            except KafkaError as exc:
                failures[position] = exc
            filters.append(acl_filter)
        matched = await broker.catalogue_write(broker.metadata.remove_acls,
                                               [f for i, f in enumerate(filters) if i not in failures])
        results = []
        for position in range(len(filters)):
            if position in failures:
                results.append(Response.DeleteAclsFilterResult(
                    error_code=failures[position].code, error_message=failures[position].message, matching_acls=[]))
                continue
            results.append(Response.DeleteAclsFilterResult(error_code=ErrorCode.NONE, error_message=None,
                                                           matching_acls=[
                Response.DeleteAclsMatchingAcl(
                    error_code=ErrorCode.NONE, error_message=None, resource_type=acl.resource_type,
                    resource_name=acl.resource_name, pattern_type=acl.pattern_type, principal=acl.principal,
                    host=acl.host, operation=acl.operation, permission_type=acl.permission)
                for acl in matched.pop(0)]))
        return Response(throttle_time_ms=0, filter_results=results)

    return {CREATE_ACLS.key: answer_create_acls, DESCRIBE_ACLS.key: answer_describe_acls,
            DELETE_ACLS.key: answer_delete_acls}
