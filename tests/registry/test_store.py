"""The `_schemas` topic as the registry's only storage: Confluent's key and value JSON in a compacted one-partition
topic, schemas and ids surviving a restart of the registry (ids go on from the highest), and two `odradek
schema-registry` processes on one cluster writing at once and one of them killed: no id is given twice."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import threading
import uuid

import httpx
from confluent_kafka import Consumer, TopicPartition

from odradek.client import Admin
from odradek.registry import SchemaRegistry, SchemaRegistrySettings


def avro(name: str) -> str:
    return json.dumps({"type": "record", "name": name, "fields": [{"name": "a", "type": "string"}]})


def register(url: str, subject: str, schema: str) -> int:
    answer = httpx.post(f"{url}/subjects/{subject}/versions", json={"schema": schema}, timeout=60)
    assert answer.status_code == 200, answer.text
    return answer.json()["id"]


def records(bootstrap: str, topic: str) -> list[tuple[dict, dict | None]]:
    """The committed records of the (idle) topic, keys and values parsed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "t", "isolation.level": "read_committed"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    found = []
    try:
        while (message := consumer.poll(1.0)) is not None:
            assert message.error() is None
            found.append((json.loads(message.key()), json.loads(message.value()) if message.value() else None))
    finally:
        consumer.close()
    return found


def test_restart_keeps_schemas_and_ids_in_confluents_format(broker):
    topic = f"_schemas_{uuid.uuid4().hex[:6]}"
    first = SchemaRegistry(SchemaRegistrySettings(broker.bootstrap_servers, port=0, topic=topic, group_id=topic))
    url = first.start_thread()
    ids = [register(url, "s", avro("A")), register(url, "t", avro("B"))]
    assert httpx.put(f"{url}/config/s", json={"compatibility": "NONE"}).status_code == 200
    first.stop()

    admin = Admin(broker.bootstrap_servers)
    assert admin.partition_count(topic) == 1 and admin.topic_configs(topic)["cleanup.policy"] == "compact"
    written = records(broker.bootstrap_servers, topic)
    assert ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
            {"subject": "s", "version": 1, "id": ids[0], "schema": avro("A").replace(" ", ""), "deleted": False}) \
        in written
    assert ({"keytype": "CONFIG", "subject": "s", "magic": 0}, {"compatibilityLevel": "NONE"}) in written

    again = SchemaRegistry(SchemaRegistrySettings(broker.bootstrap_servers, port=0, topic=topic, group_id=topic))
    url = again.start_thread()
    try:
        assert httpx.get(f"{url}/subjects").json() == ["s", "t"]
        assert json.loads(httpx.get(f"{url}/schemas/ids/{ids[1]}").json()["schema"]) == json.loads(avro("B"))
        assert httpx.get(f"{url}/config/s").json()["compatibilityLevel"] == "NONE"
        assert register(url, "u", avro("C")) == max(ids) + 1
    finally:
        again.stop()


def start_process(bootstrap: str, topic: str) -> tuple[subprocess.Popen, str]:
    process = subprocess.Popen([sys.executable, "-m", "odradek", "schema-registry", "-b", bootstrap, "--port", "0",
                                "--topic", topic, "--group-id", topic], stdout=subprocess.PIPE, text=True)
    line = process.stdout.readline()
    found = re.search(r"ready on (http://\S+)", line)
    assert found, line
    return process, found.group(1)


def test_two_registries_never_give_an_id_twice_across_a_kill(broker):
    topic = f"_schemas_{uuid.uuid4().hex[:6]}"
    (one, one_url), (two, two_url) = (start_process(broker.bootstrap_servers, topic) for _ in range(2))
    try:
        given: dict[str, int] = {}

        def writer(url: str, prefix: str, count: int) -> None:
            for n in range(count):
                given[f"{prefix}{n}"] = register(url, f"{prefix}{n}", avro(f"{prefix}{n}"))

        threads = [threading.Thread(target=writer, args=(url, prefix, 6))
                   for url, prefix in ((one_url, "x"), (two_url, "y"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert len(given) == 12 and len(set(given.values())) == 12  # fenced writers retried: no id twice
        one.kill()
        one.wait()
        writer(two_url, "z", 3)  # the one left takes over the writes at once
        assert len(set(given.values())) == 15
        for subject, schema_id in given.items():
            assert httpx.get(f"{two_url}/subjects/{subject}/versions/1").json()["id"] == schema_id
    finally:
        for process in (one, two):
            process.kill()
            process.wait()
