"""The authorizer's ACLs in ZooKeeper, in Kafka 2.x's layout, shared by every broker of the cluster.

What this owns: the znodes of Kafka's AclAuthorizer (ZkData.scala's ZkAclStore and ZkAclChangeStore) and each
broker's view of them. A resource pattern's ACLs are one znode, `/kafka-acl/<ResourceType>/<name>` for a literal
pattern and `/kafka-acl-extended/prefixed/<ResourceType>/<name>` for a prefixed one, holding
{"version":1,"acls":[{"principal","permissionType","operation","host"}]} with Kafka's Pascal-case names (Topic, Read,
Allow). Every change is written conditionally on the version read (two brokers changing one resource at once both
land) and followed by a sequential notification, `/kafka-acl-changes/acl_changes_<n>` holding `TOPIC:<name>` (literal)
or `/kafka-acl-extended-changes/acl_changes_<n>` holding {"version":1,"resourceType","name","patternType"}.

Every broker reads all ACLs at start and follows both change paths (odradek.cluster.zk_changes, Kafka's
ZkNodeChangeNotificationListener): each new notification makes it read that one resource's znode again. So an ACL
created through any broker (or by Kafka's own kafka-acls.sh --authorizer-properties zookeeper.connect=...) is
enforced by every broker once the watch fires. The view is replaced whole (a new list) at every change, never
mutated, so the event loop's authorizer reads it without locks while kazoo's threads update it.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from odradek.cluster.zk_changes import change_path, follow_changes
from odradek.protocol.acl import AclOperation, ResourceType
from odradek.security.acl import AclBinding, AclFilter, PatternType, Permission

log = logging.getLogger("odradek.zookeeper")

ACL_ROOTS = {PatternType.LITERAL: "/kafka-acl", PatternType.PREFIXED: "/kafka-acl-extended/prefixed"}
ACL_CHANGES = {PatternType.LITERAL: "/kafka-acl-changes", PatternType.PREFIXED: "/kafka-acl-extended-changes"}
CHANGE_PREFIX = "acl_changes_"
ACL_VERSION = 1

Resource = tuple[ResourceType, str, PatternType]  # a resource pattern: type, name, LITERAL or PREFIXED


def pascal_case(name: str) -> str:
    """Kafka's SecurityUtils.toPascalCase: CLUSTER_ACTION -> ClusterAction."""
    return "".join(word.capitalize() for word in name.split("_"))


def named(kind, text: str):
    """The member of `kind` Kafka's SecurityUtils finds for `text`: its Pascal-case name, or any case without
    underscores' difference (Topic, TOPIC, ClusterAction, CLUSTER_ACTION)."""
    wanted = text.replace("_", "").upper()
    for member in kind:
        if member.name.replace("_", "") == wanted:
            return member
    raise ValueError(f"unknown {kind.__name__} {text!r}")


def resource_of(binding: AclBinding) -> Resource:
    return binding.resource_type, binding.resource_name, binding.pattern_type


def resource_path(resource: Resource) -> str:
    resource_type, name, pattern_type = resource
    return f"{ACL_ROOTS[pattern_type]}/{pascal_case(resource_type.name)}/{name}"


def encode_acls(bindings: Iterable[AclBinding]) -> bytes:
    """A resource znode, as AclEntry.toJsonCompatibleMap writes it."""
    return json.dumps({"version": ACL_VERSION, "acls": [
        {"principal": b.principal, "permissionType": pascal_case(b.permission.name),
         "operation": pascal_case(b.operation.name), "host": b.host}
        for b in sorted(bindings, key=lambda b: (b.principal, b.host, b.operation, b.permission))]},
        separators=(",", ":")).encode()


def decode_acls(resource: Resource, data: bytes | None) -> frozenset[AclBinding]:
    """A resource znode's bindings (none for an empty or missing znode, as AclEntry.fromBytes)."""
    if not data:
        return frozenset()
    body = json.loads(data)
    if body.get("version") != ACL_VERSION:
        raise ValueError(f"ACL znode version {body.get('version')!r}, expected {ACL_VERSION}")
    return frozenset(AclBinding(*resource, entry["principal"], entry["host"], named(AclOperation, entry["operation"]),
                                named(Permission, entry["permissionType"])) for entry in body["acls"])


def encode_change(resource: Resource) -> bytes:
    """A change notification: `TOPIC:<name>` for a literal pattern (LiteralAclChangeStore writes the Java enum's
    name), ExtendedAclChangeEvent's JSON for any other."""
    resource_type, name, pattern_type = resource
    if pattern_type == PatternType.LITERAL:
        return f"{resource_type.name}:{name}".encode()
    return json.dumps({"version": 1, "resourceType": resource_type.name, "name": name,
                       "patternType": pattern_type.name}, separators=(",", ":")).encode()


def decode_change(pattern_type: PatternType, data: bytes) -> Resource:
    if pattern_type == PatternType.LITERAL:
        type_name, name = data.decode().split(":", 1)
        return named(ResourceType, type_name), name, PatternType.LITERAL
    body = json.loads(data)
    return named(ResourceType, body["resourceType"]), body["name"], named(PatternType, body["patternType"])


class ZooKeeperAcls:
    """Every broker's copy of the cluster's ACLs, kept current by the change notifications; and the writes
    CreateAcls/DeleteAcls make through this broker (see the module docstring). `on_change` gets the whole new list
    of bindings after every change (on a kazoo thread or the caller's)."""

    def __init__(self, client, on_change: Callable[[list[AclBinding]], None]):
        self._client = client
        self._on_change = on_change
        self._lock = threading.RLock()
        self._by_resource: dict[Resource, frozenset[AclBinding]] = {}

    def follow(self) -> None:
        """Read every ACL now, then follow the notifications (the watches' first calls are synchronous)."""
        for path in ACL_ROOTS.values():
            self._client.ensure_path(path)
        with self._lock:
            for pattern_type, root in ACL_ROOTS.items():
                for type_name in self._client.get_children(root):
                    try:
                        resource_type = named(ResourceType, type_name)
                    except ValueError:
                        log.warning("ignoring ACLs of unknown resource type %s/%s", root, type_name)
                        continue
                    for name in self._client.get_children(f"{root}/{type_name}"):
                        self._read((resource_type, name, pattern_type))
            self._publish()
        for pattern_type, path in ACL_CHANGES.items():
            follow_changes(self._client, path, CHANGE_PREFIX,
                           lambda data, p=pattern_type: self._read(decode_change(p, data)), self._publish, self._lock)

    def _read(self, resource: Resource) -> None:
        try:
            data, _ = self._client.get(resource_path(resource))
            bindings = decode_acls(resource, data)
        except NoNodeError:
            bindings = frozenset()
        except (ValueError, KeyError, TypeError) as exc:
            log.warning("ignoring unreadable %s: %s", resource_path(resource), exc)
            return
        self._set(resource, bindings)

    def _set(self, resource: Resource, bindings: frozenset[AclBinding]) -> None:
        if bindings:
            self._by_resource[resource] = bindings
        else:
            self._by_resource.pop(resource, None)

    def _publish(self) -> None:
        self._on_change([b for resource in sorted(self._by_resource, key=lambda r: (r[0], r[1], r[2]))
                         for b in self._by_resource[resource]])

    # ------------------------------------------------------------------------------------------ the writes
    def _update(self, resource: Resource, change: Callable[[frozenset[AclBinding]], frozenset[AclBinding]]
                ) -> tuple[frozenset[AclBinding], frozenset[AclBinding]]:
        """AclAuthorizer.updateResourceAcls: apply `change` to the znode's current bindings and write the result
        conditionally on the version read (again from a fresh read if another writer came first), deleting the
        znode when none are left; then the notification. (bindings before, bindings after)."""
        path = resource_path(resource)
        while True:
            try:
                data, stat = self._client.get(path)
                current, version = decode_acls(resource, data), stat.version
            except NoNodeError:
                current, version = frozenset(), None
            wanted = change(current)
            if wanted == current:
                return current, wanted
            try:
                if version is None:
                    self._client.create(path, encode_acls(wanted), makepath=True)
                elif wanted:
                    self._client.set(path, encode_acls(wanted), version=version)
                else:
                    self._client.delete(path, version=version)
                break
            except (BadVersionError, NodeExistsError, NoNodeError):
                continue  # another broker changed it meanwhile: read again
        self._client.create(change_path(ACL_CHANGES[resource[2]], CHANGE_PREFIX), encode_change(resource),
                            sequence=True)
        with self._lock:
            self._set(resource, wanted)
            self._publish()
        return current, wanted

    def add(self, bindings: list[AclBinding]) -> None:
        by_resource: dict[Resource, set[AclBinding]] = {}
        for binding in bindings:
            by_resource.setdefault(resource_of(binding), set()).add(binding)
        for resource, added in by_resource.items():
            self._update(resource, lambda current, added=added: current | added)

    def remove(self, filters: list[AclFilter]) -> list[list[AclBinding]]:
        """Remove every binding some filter matches, resource by resource as the znodes hold them now; per filter,
        the bindings it removed."""
        with self._lock:
            resources = [resource for resource, bindings in self._by_resource.items()
                         if any(f.matches(b) for f in filters for b in bindings)]
        removed: list[AclBinding] = []
        for resource in resources:
            before, after = self._update(resource, lambda current: frozenset(
                b for b in current if not any(f.matches(b) for f in filters)))
            removed.extend(before - after)
        return [[b for b in removed if f.matches(b)] for f in filters]
