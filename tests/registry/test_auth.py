"""The registry on a SASL cluster with ACLs (tests/security's broker: PLAIN users admin and alice, admin a super user,
nothing allowed without an ACL): HTTP basic auth against the cluster's users, and the subject's topic ACLs deciding
who reads and who writes, asked of the cluster as the caller; listings show only what the caller may read."""

from __future__ import annotations

import json

import httpx
import pytest
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from odradek.registry import SchemaRegistry, SchemaRegistrySettings
from tests.security.test_acls_sasl import PASSWORDS, start_sasl_broker

SCHEMA = json.dumps({"type": "record", "name": "R", "fields": [{"name": "a", "type": "string"}]})


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    broker = start_sasl_broker(tmp_path_factory.mktemp("registry-sasl") / "data")
    admin = AdminClient(broker.client_config("admin"))
    for future in admin.create_topics([NewTopic(name, 1, 1) for name in ("orders", "events", "secret")]).values():
        future.result(15)
    acls = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", operation,
                       AclPermissionType.ALLOW)
            for topic, operation in (("orders", AclOperation.DESCRIBE), ("events", AclOperation.WRITE))]
    for future in admin.create_acls(acls).values():
        future.result(15)
    config = {key: value for key, value in broker.client_config("admin").items() if key != "bootstrap.servers"}
    registry = SchemaRegistry(SchemaRegistrySettings(broker.bootstrap_servers, port=0, client_config=config))
    url = registry.start_thread()
    yield url
    registry.stop()
    broker.process.stop()


def as_user(url: str, user: str) -> SchemaRegistryClient:
    return SchemaRegistryClient({"url": url, "basic.auth.user.info": f"{user}:{PASSWORDS[user]}"})


def test_basic_auth_against_the_clusters_users(secured):
    assert httpx.get(f"{secured}/subjects").status_code == 401
    answer = httpx.get(f"{secured}/subjects", auth=("alice", "wrong"))
    assert answer.status_code == 401 and answer.json() == {"error_code": 401, "message": "Unauthorized"}
    assert answer.headers["www-authenticate"].startswith("Basic")
    assert httpx.get(f"{secured}/subjects", auth=("alice", PASSWORDS["alice"])).status_code == 200


def test_topic_acls_decide_per_subject(secured):
    admin, alice = as_user(secured, "admin"), as_user(secured, "alice")
    for subject in ("orders-value", "secret-value"):
        admin.register_schema(subject, Schema(SCHEMA, "AVRO"))
    assert alice.get_latest_version("orders-value").version == 1  # DESCRIBE on orders: reads
    with pytest.raises(SchemaRegistryError) as denied:
        alice.register_schema("orders-value", Schema(SCHEMA.replace('"R"', '"S"'), "AVRO"))
    assert (denied.value.http_status_code, denied.value.error_code) == (403, 40301)
    with pytest.raises(SchemaRegistryError) as denied:
        alice.get_latest_version("secret-value")
    assert denied.value.http_status_code == 403
    assert alice.register_schema("events-value", Schema(SCHEMA, "AVRO")) > 0  # WRITE on events
    assert sorted(alice.get_subjects()) == ["events-value", "orders-value"]
    assert sorted(admin.get_subjects()) == ["events-value", "orders-value", "secret-value"]
    assert httpx.put(f"{secured}/config", json={"compatibility": "NONE"},
                     auth=("alice", PASSWORDS["alice"])).status_code == 403
    assert httpx.put(f"{secured}/config", json={"compatibility": "FULL"},
                     auth=("admin", PASSWORDS["admin"])).json() == {"compatibility": "FULL"}
