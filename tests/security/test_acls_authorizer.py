"""The authorizer's decisions as plain code, with principals other than ANONYMOUS: Kafka's matching rules (literal,
prefixed, wildcard resource, principal and host), deny winning, implied operations, super.users,
allow.everyone.if.no.acl.found, KIP-679's any-resource question and the authorized-operations sets."""

from __future__ import annotations

import pytest

from odradek.errors import ErrorCode, KafkaError
from odradek.protocol.acl import AclOperation as Op
from odradek.protocol.acl import ResourceType as Res
from odradek.security.acl import AclBinding, AclFilter, Authorizer, PatternType, Permission

LIT, PRE = PatternType.LITERAL, PatternType.PREFIXED
ALICE, BOB = "User:alice", "User:bob"


def acl(resource_type, name, operation, permission=Permission.ALLOW, principal=ALICE, pattern=LIT, host="*"):
    return AclBinding(resource_type, name, pattern, principal, host, operation, permission)


def test_literal_prefixed_and_wildcard_resources():
    authorizer = Authorizer(lambda: [acl(Res.TOPIC, "orders", Op.READ), acl(Res.TOPIC, "logs-", Op.WRITE, pattern=PRE),
                             acl(Res.GROUP, "*", Op.READ)], [], False)
    assert authorizer.authorize(ALICE, "1.2.3.4", Op.READ, Res.TOPIC, "orders")
    assert not authorizer.authorize(ALICE, "1.2.3.4", Op.READ, Res.TOPIC, "orders2")
    assert authorizer.authorize(ALICE, "1.2.3.4", Op.WRITE, Res.TOPIC, "logs-app")
    assert not authorizer.authorize(ALICE, "1.2.3.4", Op.WRITE, Res.TOPIC, "log")
    assert authorizer.authorize(ALICE, "1.2.3.4", Op.READ, Res.GROUP, "anything")
    assert not authorizer.authorize(BOB, "1.2.3.4", Op.READ, Res.GROUP, "anything")


def test_deny_wins_and_is_not_widened_by_implication():
    authorizer = Authorizer(lambda: [acl(Res.TOPIC, "*", Op.ALL), acl(Res.TOPIC, "secret", Op.READ, Permission.DENY)],
                            [], False)
    assert not authorizer.authorize(ALICE, "h", Op.READ, Res.TOPIC, "secret")
    assert authorizer.authorize(ALICE, "h", Op.DESCRIBE, Res.TOPIC, "secret")  # a READ deny does not deny DESCRIBE
    denied_all = Authorizer(lambda: [acl(Res.TOPIC, "t", Op.WRITE), acl(Res.TOPIC, "t", Op.ALL, Permission.DENY,
                                                                principal="User:*")], [], False)
    assert not denied_all.authorize(ALICE, "h", Op.WRITE, Res.TOPIC, "t")


def test_implied_operations():
    authorizer = Authorizer(lambda: [acl(Res.TOPIC, "t", Op.WRITE), acl(Res.TOPIC, "c", Op.ALTER_CONFIGS)], [], False)
    assert authorizer.authorize(ALICE, "h", Op.DESCRIBE, Res.TOPIC, "t")
    assert not authorizer.authorize(ALICE, "h", Op.READ, Res.TOPIC, "t")
    assert authorizer.authorize(ALICE, "h", Op.DESCRIBE_CONFIGS, Res.TOPIC, "c")
    assert not authorizer.authorize(ALICE, "h", Op.DESCRIBE, Res.TOPIC, "c")


def test_hosts_principals_super_users_and_no_acl_found():
    authorizer = Authorizer(lambda: [acl(Res.TOPIC, "t", Op.READ, host="10.0.0.1")], ["User:admin"], True)
    assert authorizer.authorize(ALICE, "10.0.0.1", Op.READ, Res.TOPIC, "t")
    assert not authorizer.authorize(ALICE, "10.0.0.2", Op.READ, Res.TOPIC, "t")
    assert not authorizer.authorize(BOB, "10.0.0.1", Op.READ, Res.TOPIC, "t")  # the topic has ACLs: not everyone
    assert authorizer.authorize(BOB, "h", Op.WRITE, Res.TOPIC, "no-acls-here")
    assert authorizer.authorize("User:admin", "h", Op.DELETE, Res.TOPIC, "t")
    assert not Authorizer(lambda: [], [], False).authorize(BOB, "h", Op.WRITE, Res.TOPIC, "no-acls-here")


def test_authorize_any_resource_of_a_type_kip_679():
    allowed = Authorizer(lambda: [acl(Res.TOPIC, "t-", Op.WRITE, pattern=PRE)], [], False)
    assert allowed.authorize_any(ALICE, "h", Op.WRITE, Res.TOPIC)
    assert not allowed.authorize_any(BOB, "h", Op.WRITE, Res.TOPIC)
    covered = Authorizer(lambda: [acl(Res.TOPIC, "t-x", Op.WRITE), acl(Res.TOPIC, "t-", Op.WRITE, Permission.DENY,
                                                                    pattern=PRE)], [], False)
    assert not covered.authorize_any(ALICE, "h", Op.WRITE, Res.TOPIC)


def test_authorized_operations_of_a_principal():
    authorizer = Authorizer(lambda: [acl(Res.GROUP, "g", Op.READ)], ["User:admin"], False)
    assert authorizer.authorized_operations(ALICE, "h", Res.GROUP, "g") == {Op.READ, Op.DESCRIBE}
    assert authorizer.authorized_operations("User:admin", "h", Res.GROUP, "g") == {
        Op.READ, Op.DESCRIBE, Op.DELETE, Op.DESCRIBE_CONFIGS, Op.ALTER_CONFIGS}


def test_filters_match_as_describe_and_delete_acls_do():
    stored = [acl(Res.TOPIC, "a-", Op.READ, pattern=PRE), acl(Res.TOPIC, "a-b", Op.WRITE),
              acl(Res.TOPIC, "*", Op.DESCRIBE), acl(Res.GROUP, "a-b", Op.READ)]
    match = AclFilter(Res.TOPIC, "a-b", PatternType.MATCH, None, None, Op.ANY, Permission.ANY)
    assert [a for a in stored if match.matches(a)] == stored[:3]
    literal = AclFilter(1, "a-b", PatternType.LITERAL, ALICE, None, Op.ANY, Permission.ALLOW)
    assert [a for a in stored if literal.matches(a)] == [stored[1], stored[3]]
    with pytest.raises(KafkaError) as raised:
        AclFilter(9, None, PatternType.ANY, None, None, Op.ANY, Permission.ANY).check()
    assert raised.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("fields", [
    (Res.TOPIC, "t", PatternType.ANY, ALICE, "*", Op.READ, Permission.ALLOW),
    (Res.TOPIC, "t", LIT, ALICE, "*", Op.READ, Permission.ANY),
    (Res.GROUP, "g", LIT, ALICE, "*", Op.WRITE, Permission.ALLOW),
    (Res.TOPIC, "t", LIT, "alice", "*", Op.READ, Permission.ALLOW),
    (Res.CLUSTER, "other", LIT, ALICE, "*", Op.ALTER, Permission.ALLOW),
    (9, "t", LIT, ALICE, "*", Op.READ, Permission.ALLOW),
])
def test_creations_kafka_cannot_store_are_invalid_requests(fields):
    with pytest.raises(KafkaError) as raised:
        AclBinding.checked(*fields)
    assert raised.value.code == ErrorCode.INVALID_REQUEST
