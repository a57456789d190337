"""Kafka's authorizer: ACL bindings, filters over them, and the decision whether a principal may do an operation.

Semantics are AclAuthorizer's/StandardAuthorizer's: an ACL names a resource pattern (type, name, LITERAL or
PREFIXED; the literal name '*' is every resource of the type), a principal ('User:*' is everyone), a host ('*' is
every host), an operation (ALL is every one) and ALLOW or DENY. A super user may do anything. Otherwise, with no ACL
at all on the resource, allow.everyone.if.no.acl.found decides; a matching DENY wins over any ALLOW; an ALLOW of
READ, WRITE, DELETE or ALTER also allows DESCRIBE, and ALTER_CONFIGS allows DESCRIBE_CONFIGS. Plain code: the broker
keeps the bindings in its catalogue and asks `Authorizer` per request, with the connection's principal and host.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Iterable

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.acl import (SUPPORTED_OPERATIONS, AclOperation, ResourceType, authorized_operations,
                                  operations_bit_field)

AUTHORIZER_CLASS_NAMES = frozenset({"kafka.security.authorizer.AclAuthorizer",
                                    "org.apache.kafka.metadata.authorizer.StandardAuthorizer"})
WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"


class PatternType(enum.IntEnum):
    """org.apache.kafka.common.resource.PatternType codes."""
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class Permission(enum.IntEnum):
    """org.apache.kafka.common.acl.AclPermissionType codes."""
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


_O = AclOperation
IMPLIED_BY = {_O.DESCRIBE: frozenset({_O.DESCRIBE, _O.READ, _O.WRITE, _O.DELETE, _O.ALTER}),
              _O.DESCRIBE_CONFIGS: frozenset({_O.DESCRIBE_CONFIGS, _O.ALTER_CONFIGS})}


def principal_of(connection) -> str:
    """The connection's authenticated principal ("User:ANONYMOUS" until SASL or TLS names one)."""
    return connection.principal


@dataclasses.dataclass(frozen=True)
class AclBinding:
    """One ACL, as CreateAcls carries it and the catalogue stores it."""
    resource_type: ResourceType
    resource_name: str
    pattern_type: PatternType
    principal: str
    host: str
    operation: AclOperation
    permission: Permission

    def to_json(self) -> dict:
        return {"resource_type": self.resource_type.name, "resource_name": self.resource_name,
                "pattern_type": self.pattern_type.name, "principal": self.principal, "host": self.host,
                "operation": self.operation.name, "permission": self.permission.name}

    @classmethod
    def from_json(cls, data: dict) -> "AclBinding":
        return cls(ResourceType[data["resource_type"]], data["resource_name"], PatternType[data["pattern_type"]],
                   data["principal"], data["host"], AclOperation[data["operation"]], Permission[data["permission"]])

    @classmethod
    def checked(cls, resource_type: int, resource_name: str, pattern_type: int, principal: str, host: str,
                operation: int, permission: int) -> "AclBinding":
        """A binding from CreateAcls' fields, refused (INVALID_REQUEST) as Kafka refuses a creation it cannot
        store: unknown or ANY/MATCH values, a non-"Type:name" principal, an operation the type does not support."""
        try:
            binding = cls(ResourceType(resource_type), resource_name, PatternType(pattern_type), principal, host,
                          AclOperation(operation), Permission(permission))
        except ValueError as exc:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid ACL creation: {exc}") from None
        if binding.pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid ACL creation: the pattern type must be LITERAL or "
                             f"PREFIXED, not {binding.pattern_type.name}")
        if binding.permission not in (Permission.ALLOW, Permission.DENY):
            raise KafkaError(ErrorCode.INVALID_REQUEST, "Invalid ACL creation: the permission type must be ALLOW "
                             f"or DENY, not {binding.permission.name}")
        if binding.operation != _O.ALL and binding.operation not in SUPPORTED_OPERATIONS[binding.resource_type]:
            raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid ACL creation: {binding.operation.name} is not a "
                             f"valid operation for a {binding.resource_type.name} resource")
        if ":" not in principal or not resource_name:
            raise KafkaError(ErrorCode.INVALID_REQUEST,
                             f"Invalid ACL creation: principal {principal!r} is not of the form Type:name"
                             if ":" not in principal else "Invalid ACL creation: the resource name is empty")
        if binding.resource_type == ResourceType.CLUSTER and resource_name != "kafka-cluster":
            raise KafkaError(ErrorCode.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster")
        return binding


@dataclasses.dataclass(frozen=True)
class AclFilter:
    """DescribeAcls'/DeleteAcls' filter: ANY (1) or None matches everything in that field; MATCH (pattern type 2)
    matches every pattern that would apply to the named resource (literal, wildcard, covering prefixes)."""
    resource_type: int
    resource_name: str | None
    pattern_type: int
    principal: str | None
    host: str | None
    operation: int
    permission: int

    def check(self) -> None:
        for value, kind in ((self.resource_type, ResourceType), (self.pattern_type, PatternType),
                            (self.operation, AclOperation), (self.permission, Permission)):
            if value == 0 or value not in {1} | {member.value for member in kind}:
                raise KafkaError(ErrorCode.INVALID_REQUEST, f"Invalid filter: unknown {kind.__name__} {value}")

    def matches(self, acl: AclBinding) -> bool:
        if self.resource_type != 1 and self.resource_type != acl.resource_type:
            return False
        if self.pattern_type == PatternType.MATCH:
            if self.resource_name is not None and not _pattern_applies(acl, self.resource_name):
                return False
        else:
            if self.pattern_type != PatternType.ANY and self.pattern_type != acl.pattern_type:
                return False
            if self.resource_name is not None and self.resource_name != acl.resource_name:
                return False
        return ((self.principal is None or self.principal == acl.principal)
                and (self.host is None or self.host == acl.host)
                and (self.operation == _O.ANY or self.operation == acl.operation)
                and (self.permission == Permission.ANY or self.permission == acl.permission))


def _pattern_applies(acl: AclBinding, name: str) -> bool:
    if acl.pattern_type == PatternType.PREFIXED:
        return name.startswith(acl.resource_name)
    return acl.resource_name == name or acl.resource_name == WILDCARD_RESOURCE


class Authorizer:
    """The decisions over the catalogue's bindings: `bindings()` gives the current list at each question (the
    catalogue replaces it whole on a change, in a ZooKeeper cluster from a watch)."""

    def __init__(self, bindings: Callable[[], list[AclBinding]], super_users: Iterable[str],
                 allow_everyone_if_no_acl_found: bool):
        self._bindings = bindings
        self.super_users = frozenset(super_users)
        self.allow_everyone_if_no_acl_found = allow_everyone_if_no_acl_found

    @property
    def acls(self) -> list[AclBinding]:
        return self._bindings()

    def _applying(self, resource_type: ResourceType, name: str) -> list[AclBinding]:
        return [acl for acl in self.acls if acl.resource_type == resource_type and _pattern_applies(acl, name)]

    def authorize(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType,
                  name: str) -> bool:
        if principal in self.super_users:
            return True
        return self._decide(self._applying(resource_type, name), principal, host, operation)

    def _decide(self, applying: list[AclBinding], principal: str, host: str, operation: AclOperation) -> bool:
        if not applying:
            return self.allow_everyone_if_no_acl_found
        mine = [acl for acl in applying if acl.principal in (principal, WILDCARD_PRINCIPAL)
                and acl.host in (host, WILDCARD_HOST)]
        if any(acl.permission == Permission.DENY and acl.operation in (operation, _O.ALL) for acl in mine):
            return False
        allowing = IMPLIED_BY.get(operation, frozenset({operation}))
        return any(acl.permission == Permission.ALLOW and (acl.operation in allowing or acl.operation == _O.ALL)
                   for acl in mine)

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str
                              ) -> set[AclOperation]:
        """Every supported operation on the resource this principal may perform (include_*_authorized_operations)."""
        if principal in self.super_users:
            return set(SUPPORTED_OPERATIONS[resource_type])
        applying = self._applying(resource_type, name)
        return {op for op in SUPPORTED_OPERATIONS[resource_type] if self._decide(applying, principal, host, op)}

    def authorize_any(self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType) -> bool:
        """Kafka's authorizeByResourceType (KIP-679): may the principal do the operation on at least one resource
        of the type? True when an ALLOW of it (or ALL) for this principal and host is not undone by a DENY covering
        that pattern (a DENY on the wildcard, on the same literal name, or on a prefix of it)."""
        if principal in self.super_users:
            return True
        acls = self.acls
        mine = [acl for acl in acls if acl.resource_type == resource_type
                and acl.principal in (principal, WILDCARD_PRINCIPAL) and acl.host in (host, WILDCARD_HOST)
                and acl.operation in (operation, _O.ALL)]
        if not mine and self.allow_everyone_if_no_acl_found and not any(
                acl.resource_type == resource_type for acl in acls):
            return True
        denies = [acl for acl in mine if acl.permission == Permission.DENY]
        for allow in (acl for acl in mine if acl.permission == Permission.ALLOW):
            if not any(deny.resource_name == WILDCARD_RESOURCE and deny.pattern_type == PatternType.LITERAL
                       or (deny.pattern_type == PatternType.PREFIXED and allow.resource_name.startswith(
                           deny.resource_name))
                       or (deny.pattern_type == allow.pattern_type and deny.resource_name == allow.resource_name)
                       for deny in denies):
                return True
        return False


def make_authorizer(config, bindings: Callable[[], list[AclBinding]]) -> Authorizer | None:
    """The broker's authorizer over the catalogue's ACL list, or None when authorizer.class.name is unset."""
    class_name = config["authorizer.class.name"].strip()
    if not class_name:
        return None
    if class_name not in AUTHORIZER_CLASS_NAMES:
        raise ValueError(f"authorizer.class.name {class_name!r} is not one this broker provides: use one of "
                         + ", ".join(sorted(AUTHORIZER_CLASS_NAMES)))
    super_users = [name.strip() for name in config["super.users"].split(";") if name.strip()]
    return Authorizer(bindings, super_users, config["allow.everyone.if.no.acl.found"])


_FAILURES = {
    ResourceType.TOPIC: (ErrorCode.TOPIC_AUTHORIZATION_FAILED, "Not authorized to access topics: [{}]"),
    ResourceType.GROUP: (ErrorCode.GROUP_AUTHORIZATION_FAILED, "Not authorized to access group: {}"),
    ResourceType.CLUSTER: (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed."),
    ResourceType.TRANSACTIONAL_ID: (ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                    "Transactional Id authorization failed."),
    ResourceType.DELEGATION_TOKEN: (ErrorCode.DELEGATION_TOKEN_AUTHORIZATION_FAILED,
                                    "Delegation Token authorization failed."),
}


class RequestAuthorizer:
    """One request's questions to the broker's authorizer (yes to everything when none is configured), each
    decision remembered for the rest of the request so a topic's many partitions cost one check. Without an
    authorizer nothing is asked or remembered, so every request shares UNRESTRICTED."""

    __slots__ = ("authorizer", "principal", "host", "_decided")

    def __init__(self, authorizer: Authorizer | None, principal: str | None, host: str | None):
        self.authorizer = authorizer
        self.principal = principal
        self.host = host
        self._decided: dict = {}

    def allows(self, operation: AclOperation, resource_type: ResourceType, name: str) -> bool:
        if self.authorizer is None:
            return True
        key = (operation, resource_type, name)
        decision = self._decided.get(key)
        if decision is None:
            decision = self._decided[key] = self.authorizer.authorize(self.principal, self.host, operation,
                                                                      resource_type, name)
        return decision

    def denied(self, operation: AclOperation, resource_type: ResourceType, names) -> frozenset:
        """Which of `names` this principal may not `operation` (a request's topics, checked once each); with no
        authorizer none, without a call per name: a consumer's Fetch asks this every time."""
        if self.authorizer is None:
            return _NONE_DENIED
        return frozenset(name for name in names if not self.allows(operation, resource_type, name))

    def require(self, operation: AclOperation, resource_type: ResourceType, name: str) -> None:
        """KafkaError with Kafka's *_AUTHORIZATION_FAILED code for the resource type unless allowed."""
        if self.authorizer is not None and not self.allows(operation, resource_type, name):
            code, message = _FAILURES[resource_type]
            raise KafkaError(code, message.format(name))

    def allows_any(self, operation: AclOperation, resource_type: ResourceType) -> bool:
        return self.authorizer is None or self.authorizer.authorize_any(self.principal, self.host, operation,
                                                                        resource_type)

    def allows_cluster(self, operation: AclOperation) -> bool:
        return self.allows(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def require_cluster(self, operation: AclOperation) -> None:
        self.require(operation, ResourceType.CLUSTER, CLUSTER_NAME)

    def operations(self, resource_type: ResourceType, name: str, requested: bool) -> int:
        """An authorized_operations field: INT32_MIN unless asked; every supported operation with no authorizer."""
        if not requested or self.authorizer is None:
            return authorized_operations(resource_type, requested)
        return operations_bit_field(self.authorizer.authorized_operations(self.principal, self.host,
                                                                          resource_type, name))


_NONE_DENIED: frozenset = frozenset()
UNRESTRICTED = RequestAuthorizer(None, None, None)  # every request's, with no authorizer configured
