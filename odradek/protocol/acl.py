"""ACL operations and resource types as Kafka numbers them, and which operations each resource type supports.

Kafka answers `include_*_authorized_operations` (Metadata v8+, DescribeGroups v3+, DescribeCluster,
DescribeTopicPartitions, ConsumerGroupDescribe) with a 32-bit field holding bit `1 << code` for every operation the
principal may perform on the resource. With no authorizer that is every operation the resource type supports
(KafkaApis.authorizedOperations over AclEntry.supportedOperations); without the flag it is INT32_MIN. The table lives
here, apart from any handler, so the ACL work can narrow it to a principal's real set in one place.
"""

from __future__ import annotations

import enum


class AclOperation(enum.IntEnum):
    """org.apache.kafka.common.acl.AclOperation codes."""
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14


class ResourceType(enum.IntEnum):
    """org.apache.kafka.common.resource.ResourceType codes."""
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


_O = AclOperation
SUPPORTED_OPERATIONS: dict[ResourceType, frozenset[AclOperation]] = {
    ResourceType.TOPIC: frozenset({_O.READ, _O.WRITE, _O.CREATE, _O.DESCRIBE, _O.DELETE, _O.ALTER,
                                   _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.GROUP: frozenset({_O.READ, _O.DESCRIBE, _O.DELETE, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS}),
    ResourceType.CLUSTER: frozenset({_O.CREATE, _O.CLUSTER_ACTION, _O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS,
                                     _O.IDEMPOTENT_WRITE, _O.ALTER, _O.DESCRIBE}),
    ResourceType.TRANSACTIONAL_ID: frozenset({_O.DESCRIBE, _O.WRITE}),
    ResourceType.DELEGATION_TOKEN: frozenset({_O.DESCRIBE}),
    ResourceType.USER: frozenset({_O.CREATE_TOKENS, _O.DESCRIBE_TOKENS}),
}

OPERATIONS_NOT_REQUESTED = -2147483648  # INT32_MIN: the client did not ask for authorized operations


def operations_bit_field(operations) -> int:
    """Kafka's Utils.to32BitField: bit `1 << code` for each operation, as a signed int32."""
    bits = 0
    for operation in operations:
        bits |= 1 << operation
    return bits - (1 << 32) if bits >= 1 << 31 else bits


def authorized_operations(resource_type: ResourceType, requested: bool) -> int:
    """What an `authorized_operations` field says for a resource of this type: INT32_MIN unless the client asked;
    with no authorizer, every operation the type supports."""
    return _SUPPORTED_BIT_FIELDS[resource_type] if requested else OPERATIONS_NOT_REQUESTED


_SUPPORTED_BIT_FIELDS = {kind: operations_bit_field(ops) for kind, ops in SUPPORTED_OPERATIONS.items()}
