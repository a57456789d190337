"""The REST proxy's v2 API with httpx against a real broker: produce (binary, JSON, to a partition) with offsets per
record, what a native consumer reads of it, the listings, consumer instances (subscribe, assign, seek, records
within max_bytes, commit and committed offsets, delete, idle expiry), and the error codes of bad requests."""

from __future__ import annotations

import base64
import json
import time

import confluent_kafka
import pytest

from odradek.client import Admin
from tests.http_services import http_client, served
from tests.restproxy.conftest import BINARY, JSON, V2, proxy_on

pytestmark = pytest.mark.timeout(120)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.fixture(scope="module")
def admin(broker) -> Admin:
    return Admin(broker.bootstrap_servers)


def topic_of(admin: Admin, name: str, partitions: int = 1) -> str:
    admin.create_topic(name, partitions)
    return name


def produce(http, path: str, records: list, content_type: str = BINARY):
    return http.post(path, headers={"Content-Type": content_type}, json={"records": records})


def read_natively(broker, topic: str, count: int) -> list:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "native",
                                         "auto.offset.reset": "earliest", "enable.auto.commit": False})
    consumer.subscribe([topic])
    found = []
    try:
        while len(found) < count:
            message = consumer.poll(10)
            assert message is not None, f"only {len(found)} of {count} records came"
            assert message.error() is None, message.error()
            found.append(message)
    finally:
        consumer.close()
    return found


def test_binary_and_json_records_are_produced_with_their_offsets_and_read_by_a_native_consumer(
        http, broker, admin, topic_name):
    topic = topic_of(admin, topic_name, 3)
    answer = produce(http, f"/topics/{topic}", [{"key": b64(b"k1"), "value": b64(b"\x00\xffbinary")},
                                                {"value": b64(b"to two"), "partition": 2}])
    assert answer.status_code == 200 and answer.headers["content-type"] == V2
    offsets = answer.json()["offsets"]
    assert answer.json()["key_schema_id"] is None
    assert [entry["error_code"] for entry in offsets] == [None, None] and offsets[1]["partition"] == 2
    answer = produce(http, f"/topics/{topic}/partitions/1", [{"value": {"a": [1, "x"]}, "key": "id-7"}], JSON)
    assert answer.json()["offsets"] == [{"partition": 1, "offset": 0, "error_code": None, "error": None}]
    found = {(m.partition(), m.offset()): (m.key(), m.value()) for m in read_natively(broker, topic, 3)}
    assert found[(offsets[0]["partition"], offsets[0]["offset"])] == (b"k1", b"\x00\xffbinary")
    assert found[(2, offsets[1]["offset"])] == (None, b"to two")
    assert json.loads(found[(1, 0)][1]) == {"a": [1, "x"]} and found[(1, 0)][0] == b'"id-7"'


def test_a_keyed_record_goes_to_the_partition_the_java_client_picks(http, admin, topic_name):
    topic = topic_of(admin, topic_name, 5)
    native = confluent_kafka.Producer({"bootstrap.servers": admin.bootstrap_servers, "partitioner": "murmur2_random"})
    delivered = []
    native.produce(topic, b"v", b"the-key", on_delivery=lambda error, message: delivered.append(message.partition()))
    native.flush(10)
    answer = produce(http, f"/topics/{topic}", [{"key": b64(b"the-key"), "value": b64(b"v")}])
    assert answer.json()["offsets"][0]["partition"] == delivered[0]


def test_listings_of_topics_partitions_offsets_and_brokers(http, admin, topic_name):
    topic = topic_of(admin, topic_name, 2)
    produce(http, f"/topics/{topic}/partitions/1", [{"value": b64(b"one")}, {"value": b64(b"two")}])
    assert topic in http.get("/topics").json()
    described = http.get(f"/topics/{topic}").json()
    assert described["name"] == topic and described["configs"]["cleanup.policy"] == "delete"
    assert [p["partition"] for p in described["partitions"]] == [0, 1]
    assert described["partitions"][0]["replicas"] == [{"broker": 1, "leader": True, "in_sync": True}]
    assert http.get(f"/topics/{topic}/partitions").json() == described["partitions"]
    assert http.get(f"/topics/{topic}/partitions/1").json()["leader"] == 1
    assert http.get(f"/topics/{topic}/partitions/1/offsets").json() == {"beginning_offset": 0, "end_offset": 2}
    assert http.get("/brokers").json() == {"brokers": [1]}


@pytest.mark.parametrize("path, status, code", [("/topics/no-such-topic", 404, 40401),
                                                ("/topics/no-such-topic/partitions", 404, 40401),
                                                ("/topics/{topic}/partitions/7", 404, 40402),
                                                ("/topics/{topic}/partitions/7/offsets", 404, 40402)])
def test_missing_topics_and_partitions_are_answered_with_confluents_codes(http, admin, topic_name, path, status,
                                                                          code):
    topic = topic_of(admin, topic_name)
    answer = http.get(path.format(topic=topic))
    assert (answer.status_code, answer.json()["error_code"]) == (status, code)


def test_bad_produce_requests_get_the_proxys_error_codes_never_a_500(http, admin, topic_name):
    topic = topic_of(admin, topic_name, 2)
    cases = [
        (http.post(f"/topics/{topic}", headers={"Content-Type": BINARY}, content=b'{"records": [{"val'), 400, 400),
        (http.post(f"/topics/{topic}", headers={"Content-Type": "text/plain"}, content=b"{}"), 415, 415),
        (http.post(f"/topics/{topic}", headers={"Content-Type": "application/json"}, json={"records": []}),
         415, 415),
        (http.post(f"/topics/{topic}", headers={"Content-Type": BINARY, "Accept": "text/html"},
                   json={"records": [{"value": "eA=="}]}), 406, 406),
        (produce(http, f"/topics/{topic}", [{"value": "not base64!"}]), 422, 42203),
        (produce(http, f"/topics/{topic}", [{"value": 5}]), 422, 42203),
        (produce(http, f"/topics/{topic}", []), 422, 422),
        (http.post(f"/topics/{topic}", headers={"Content-Type": BINARY}, json=["records"]), 422, 422),
        (produce(http, f"/topics/{topic}", [{"value": "eA==", "partition": "0"}]), 422, 422),
        (produce(http, f"/topics/{topic}", [{"value": "eA==", "partition": 2}]), 404, 40402),
        (produce(http, f"/topics/{topic}/partitions/9", [{"value": "eA=="}]), 404, 40402),
        (produce(http, "/topics/no-such-topic", [{"value": "eA=="}]), 404, 40401),
        (produce(http, f"/topics/{topic}", [{"value": {"f": 1}}], "application/vnd.kafka.avro.v2+json"),
         422, 42206),
        (http.get("/no/such/path"), 404, 404),
        (http.delete(f"/topics/{topic}"), 405, 405),
    ]
    for answer, status, code in cases:
        assert (answer.status_code, answer.json()["error_code"]) == (status, code), answer.text
    # nothing of the refused requests was written
    assert http.get(f"/topics/{topic}/partitions/0/offsets").json()["end_offset"] == 0


def test_a_request_body_over_the_limit_is_refused_with_413(broker, admin, topic_name):
    topic = topic_of(admin, topic_name)
    with served(proxy_on(broker.bootstrap_servers, max_request_bytes=1000)) as proxy, http_client(proxy) as http:
        answer = produce(http, f"/topics/{topic}", [{"value": b64(b"x" * 2000)}])
        assert (answer.status_code, answer.json()["error_code"]) == (413, 413)
        assert produce(http, f"/topics/{topic}", [{"value": b64(b"x" * 100)}]).status_code == 200


# ------------------------------------------------------------------------------------- consumer instances
def create(http, group: str, **body):
    return http.post(f"/consumers/{group}", headers={"Content-Type": V2}, json=body)


def call(http, method: str, path: str, body=None):
    return http.request(method, path, headers={"Content-Type": V2}, json=body)


def records(http, base: str, fmt: str = "binary", **params):
    return http.get(f"{base}/records", params=params, headers={"Accept": f"application/vnd.kafka.{fmt}.v2+json"})


def read_until(http, base: str, count: int, fmt: str = "binary") -> list:
    found = []
    for _ in range(20):
        answer = records(http, base, fmt, timeout=1000)
        assert answer.status_code == 200, answer.text
        found += answer.json()
        if len(found) >= count:
            return found
    raise AssertionError(f"{len(found)} of {count} records read")


def test_a_subscribed_instance_reads_commits_and_its_group_resumes_from_the_commit(http, admin, topic_name):
    topic = topic_of(admin, topic_name, 2)
    produce(http, f"/topics/{topic}", [{"value": b64(f"r{i}".encode()), "partition": i % 2} for i in range(6)])
    group = f"g-{topic}"
    made = create(http, group, name="first", format="binary", **{"auto.offset.reset": "earliest",
                                                                   "auto.commit.enable": "false"})
    assert made.status_code == 200
    assert made.json() == {"instance_id": "first", "base_uri": f"{http.base_url}consumers/{group}/instances/first"}
    base = f"/consumers/{group}/instances/first"
    assert call(http, "POST", f"{base}/subscription", {"topics": [topic]}).status_code == 204
    assert call(http, "GET", f"{base}/subscription").json() == {"topics": [topic]}
    found = read_until(http, base, 6)
    assert sorted(base64.b64decode(r["value"]) for r in found) == [f"r{i}".encode() for i in range(6)]
    assert {r["topic"] for r in found} == {topic} and {r["partition"] for r in found} == {0, 1}
    # commit offset 1 of partition 0 (its second record), then everything read
    assert call(http, "POST", f"{base}/offsets", {"offsets": [{"topic": topic, "partition": 0,
                                                                "offset": 1}]}).status_code == 200
    asked = {"partitions": [{"topic": topic, "partition": 0}, {"topic": topic, "partition": 1}]}
    assert [o["offset"] for o in call(http, "GET", f"{base}/offsets", asked).json()["offsets"]] == [2, -1]
    assert call(http, "POST", f"{base}/offsets").status_code == 200
    assert [o["offset"] for o in call(http, "GET", f"{base}/offsets", asked).json()["offsets"]] == [3, 3]
    assert call(http, "DELETE", base).status_code == 204
    assert call(http, "GET", f"{base}/subscription").json()["error_code"] == 40403
    # a new member of the group starts at the commits
    produce(http, f"/topics/{topic}", [{"value": b64(b"after"), "partition": 0}])
    create(http, group, name="second", format="binary")
    base = f"/consumers/{group}/instances/second"
    call(http, "POST", f"{base}/subscription", {"topic_pattern": f"{topic[:-3]}.*"})
    assert [base64.b64decode(r["value"]) for r in read_until(http, base, 1)] == [b"after"]
    call(http, "DELETE", base)


def test_an_assigned_instance_seeks_to_an_offset_the_beginning_and_the_end(http, admin, topic_name):
    topic = topic_of(admin, topic_name, 1)
    produce(http, f"/topics/{topic}", [{"value": {"n": i}} for i in range(5)], JSON)
    group = f"g-{topic}"
    create(http, group, name="reader", format="json")
    base = f"/consumers/{group}/instances/reader"
    assert call(http, "POST", f"{base}/assignments", {"partitions": [{"topic": topic, "partition": 0}]}
                ).status_code == 204
    assert call(http, "GET", f"{base}/assignments").json() == {"partitions": [{"topic": topic, "partition": 0}]}
    partition = [{"topic": topic, "partition": 0}]
    assert call(http, "POST", f"{base}/positions", {"offsets": [{"topic": topic, "partition": 0, "offset": 3}]}
                ).status_code == 204
    assert [r["value"] for r in read_until(http, base, 2, "json")] == [{"n": 3}, {"n": 4}]
    assert call(http, "POST", f"{base}/positions/beginning", {"partitions": partition}).status_code == 204
    found = read_until(http, base, 5, "json")
    assert [(r["offset"], r["value"]) for r in found] == [(i, {"n": i}) for i in range(5)]
    assert call(http, "POST", f"{base}/positions/end", {"partitions": partition}).status_code == 204
    assert records(http, base, "json", timeout=200).json() == []
    # subscribing an instance that has partitions assigned is refused
    answer = call(http, "POST", f"{base}/subscription", {"topics": [topic]})
    assert (answer.status_code, answer.json()["error_code"]) == (409, 40901)
    call(http, "DELETE", base)


def test_records_are_handed_out_within_max_bytes_and_the_rest_waits(http, admin, topic_name):
    topic = topic_of(admin, topic_name, 1)
    produce(http, f"/topics/{topic}", [{"value": b64(bytes([i]) * 100)} for i in range(10)])
    group = f"g-{topic}"
    create(http, group, name="small", format="binary", **{"auto.offset.reset": "earliest"})
    base = f"/consumers/{group}/instances/small"
    call(http, "POST", f"{base}/assignments", {"partitions": [{"topic": topic, "partition": 0}]})
    seen = []
    for _ in range(20):
        batch = records(http, base, max_bytes=250, timeout=1000).json()
        assert len(batch) <= 2
        seen += [r["offset"] for r in batch]
        if len(seen) == 10:
            break
    assert seen == list(range(10))
    call(http, "DELETE", base)


def test_bad_consumer_requests_get_the_proxys_error_codes(http, admin, topic_name):
    topic = topic_of(admin, topic_name)
    group = f"g-{topic}"
    assert create(http, group, name="dup", format="binary").status_code == 200
    base = f"/consumers/{group}/instances/dup"
    cases = [
        (create(http, group, name="dup"), 409, 40902),
        (create(http, group, name="other", format="xml"), 422, 42204),
        (create(http, group, name="other", format="avro"), 422, 42206),
        (create(http, group, name="other", **{"auto.offset.reset": "sometimes"}), 422, 42204),
        (http.post(f"/consumers/{group}", headers={"Content-Type": V2}, content=b"{oops"), 400, 400),
        (http.post(f"/consumers/{group}", headers={"Content-Type": "text/xml"}, content=b"{}"), 415, 415),
        (records(http, base, "json"), 406, 40601),
        (records(http, base, timeout="soon"), 400, 400),
        (call(http, "POST", f"{base}/subscription", {}), 422, 422),
        (call(http, "POST", f"{base}/subscription", {"topics": [topic], "topic_pattern": "x"}), 422, 422),
        (call(http, "POST", f"{base}/assignments", {"partitions": [{"topic": topic}]}), 422, 422),
        (call(http, "POST", f"{base}/positions", {"offsets": [{"topic": topic, "partition": 0, "offset": -5}]}),
         422, 422),
        (call(http, "GET", f"/consumers/{group}/instances/nobody/subscription"), 404, 40403),
        (call(http, "DELETE", f"/consumers/{group}/instances/nobody"), 404, 40403),
    ]
    for answer, status, code in cases:
        assert (answer.status_code, answer.json()["error_code"]) == (status, code), answer.text
    call(http, "DELETE", base)


def test_an_idle_instance_expires_and_leaves_its_group(broker, admin, topic_name):
    topic = topic_of(admin, topic_name)
    group = f"g-{topic}"
    with served(proxy_on(broker.bootstrap_servers, instance_timeout_ms=1500)) as proxy, http_client(proxy) as http:
        create(http, group, name="idle")
        base = f"/consumers/{group}/instances/idle"
        call(http, "POST", f"{base}/subscription", {"topics": [topic]})
        records(http, base, timeout=1000)
        assert admin.group_member_counts([group]) == {group: 1}
        for _ in range(100):
            if not len(proxy.proxy.instances):
                break
            time.sleep(0.1)
        assert call(http, "GET", f"{base}/subscription").json()["error_code"] == 40403
        assert admin.group_member_counts([group]) == {group: 0}
