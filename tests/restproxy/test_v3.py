"""The REST proxy's v3 API with httpx against a real broker: the cluster and its brokers, topics created, altered,
configured and deleted, partitions and their replicas, a consumer group's consumers and lag, records produced one
at a time, streamed and in batches (read back by a native consumer), with the resource shapes (kind, metadata.self,
resource_name, relationships) and error codes of Confluent's OpenAPI document."""

from __future__ import annotations

import base64
import json

import confluent_kafka
import pytest

from odradek.client import Admin

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(http) -> str:
    """The v3 base path of the broker's cluster."""
    listing = http.get("/v3/clusters").json()
    assert listing["kind"] == "KafkaClusterList" and len(listing["data"]) == 1
    return f"/v3/clusters/{listing['data'][0]['cluster_id']}"


def url(http, path: str) -> str:
    return f"{str(http.base_url).rstrip('/')}{path}"


def test_the_cluster_and_its_brokers_link_to_each_other(http, cluster):
    answer = http.get(cluster)
    assert answer.status_code == 200 and answer.headers["content-type"] == "application/json"
    data = answer.json()
    cluster_id = cluster.rsplit("/", 1)[1]
    assert data["kind"] == "KafkaCluster" and data["metadata"] == {"self": url(http, cluster),
                                                                   "resource_name": f"crn:///kafka={cluster_id}"}
    assert data["brokers"] == {"related": url(http, f"{cluster}/brokers")}
    assert data["controller"] == {"related": url(http, f"{cluster}/brokers/1")}
    brokers = http.get(data["brokers"]["related"]).json()
    assert brokers["kind"] == "KafkaBrokerList" and [b["broker_id"] for b in brokers["data"]] == [1]
    broker = http.get(brokers["data"][0]["metadata"]["self"]).json()
    assert broker["kind"] == "KafkaBroker" and broker["host"] == "127.0.0.1" and broker["port"] > 0
    configs = http.get(broker["configs"]["related"]).json()
    assert configs["kind"] == "KafkaBrokerConfigList"
    by_name = {entry["name"]: entry for entry in configs["data"]}
    assert by_name["num.partitions"]["kind"] == "KafkaBrokerConfig" and by_name["num.partitions"]["broker_id"] == 1
    assert http.get("/v3/clusters/not-this-one").json() == {"error_code": 404,
                                                            "message": "Cluster not-this-one not found"}
    assert http.get(f"{cluster}/brokers/99").status_code == 404


def test_a_topic_is_created_configured_grown_and_deleted(http, cluster, topic_name):
    answer = http.post(f"{cluster}/topics", json={"topic_name": topic_name, "partitions_count": 2,
                                                  "configs": [{"name": "retention.ms", "value": "3600000"}]})
    assert answer.status_code == 201, answer.text
    topic = answer.json()
    assert topic["kind"] == "KafkaTopic" and topic["partitions_count"] == 2 and topic["replication_factor"] == 1
    assert topic["metadata"]["self"] == url(http, f"{cluster}/topics/{topic_name}")
    assert topic["metadata"]["resource_name"].endswith(f"/topic={topic_name}")
    assert topic_name in [t["topic_name"] for t in http.get(f"{cluster}/topics").json()["data"]]
    again = http.post(f"{cluster}/topics", json={"topic_name": topic_name})
    assert (again.status_code, again.json()["error_code"]) == (400, 40002)

    config = http.get(f"{cluster}/topics/{topic_name}/configs/retention.ms").json()
    assert (config["kind"], config["value"], config["is_default"], config["source"]) == (
        "KafkaTopicConfig", "3600000", False, "DYNAMIC_TOPIC_CONFIG")
    assert http.put(f"{cluster}/topics/{topic_name}/configs/retention.ms", json={"value": "7200000"}
                    ).status_code == 204
    assert http.post(f"{cluster}/topics/{topic_name}/configs:alter", json={"data": [
        {"name": "cleanup.policy", "value": "compact"}]}).status_code == 204
    listed = {c["name"]: c for c in http.get(f"{cluster}/topics/{topic_name}/configs").json()["data"]}
    assert listed["retention.ms"]["value"] == "7200000" and listed["cleanup.policy"]["value"] == "compact"
    assert http.delete(f"{cluster}/topics/{topic_name}/configs/retention.ms").status_code == 204
    assert http.get(f"{cluster}/topics/{topic_name}/configs/retention.ms").json()["is_default"] is True

    grown = http.patch(f"{cluster}/topics/{topic_name}", json={"partitions_count": 3})
    assert grown.status_code == 200 and grown.json()["partitions_count"] == 3
    shrunk = http.patch(f"{cluster}/topics/{topic_name}", json={"partitions_count": 1})
    assert (shrunk.status_code, shrunk.json()["error_code"]) == (400, 40002)
    partitions = http.get(f"{cluster}/topics/{topic_name}/partitions").json()
    assert partitions["kind"] == "KafkaPartitionList" and [p["partition_id"] for p in partitions["data"]] == [0, 1, 2]
    one = http.get(f"{cluster}/topics/{topic_name}/partitions/2").json()
    assert one["kind"] == "KafkaPartition" and one["leader"]["related"].endswith("/partitions/2/replicas/1")
    assert http.get(f"{cluster}/topics/{topic_name}/partitions/3").status_code == 404

    assert http.delete(f"{cluster}/topics/{topic_name}").status_code == 204
    gone = http.get(f"{cluster}/topics/{topic_name}")
    assert (gone.status_code, gone.json()["error_code"]) == (404, 404)
    assert http.delete(f"{cluster}/topics/{topic_name}").status_code == 404


def test_bad_v3_requests_get_the_proxys_error_codes_never_a_500(http, cluster, broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 1)
    cases = [
        (http.post(f"{cluster}/topics", content=b"{no", headers={"Content-Type": "application/json"}), 400, 400),
        (http.post(f"{cluster}/topics", content=b"{}", headers={"Content-Type": "text/plain"}), 415, 415),
        (http.post(f"{cluster}/topics", json={"partitions_count": 1}), 422, 422),
        (http.post(f"{cluster}/topics", json={"topic_name": 7}), 422, 422),
        (http.post(f"{cluster}/topics", json={"topic_name": "bad name!"}), 400, 40002),
        (http.post(f"{cluster}/topics", json={"topic_name": f"{topic_name}-2", "partitions_count": "2"}), 422, 422),
        (http.get(f"{cluster}/topics/nope/configs"), 404, 40401),
        (http.get(f"{cluster}/consumer-groups/no-such-group"), 404, 404),
        (http.get(f"{cluster}/acls", params={"operation": "JUMP"}), 400, 400),
        (http.post(f"{cluster}/topics/nope/records", json={"value": {"data": 1}}), 404, 404),
        # what confluent-kafka refuses before asking, as schemathesis found it over Confluent's OpenAPI document
        (http.post(f"{cluster}/topics", json={"topic_name": f"{topic_name}-2", "partitions_count": 2**31}), 400,
         40002),
        (http.post(f"{cluster}/topics", json={"topic_name": f"{topic_name}-2", "replication_factor": -316}), 400,
         40002),
        (http.patch(f"{cluster}/topics/{topic_name}", json={"partitions_count": 2**31}), 400, 40002),
        (http.post(f"{cluster}/topics/{topic_name}/configs:alter", json={"data": [{"name": ""}]}), 404, 404),
        (http.get(f"{cluster}/acls", params={"resource_type": "UNKNOWN"}), 400, 400),
    ]
    for answer, status, code in cases:
        assert (answer.status_code, answer.json()["error_code"]) == (status, code), answer.text


def test_records_are_produced_one_at_a_time_and_streamed(http, cluster, broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 2)
    path = f"{cluster}/topics/{topic_name}/records"
    one = http.post(path, json={"partition_id": 1, "key": {"type": "STRING", "data": "k"},
                                "value": {"type": "JSON", "data": {"n": 1}},
                                "headers": [{"name": "h", "value": base64.b64encode(b"hv").decode()}],
                                "timestamp": "2026-01-02T03:04:05.678Z"})
    assert one.status_code == 200, one.text
    result = one.json()
    assert (result["error_code"], result["partition_id"], result["offset"], result["topic_name"]) == (
        200, 1, 0, topic_name)
    assert result["key"] == {"type": "STRING", "size": 1} and result["value"] == {"type": "JSON", "size": 7}
    assert result["timestamp"] == "2026-01-02T03:04:05.678Z"

    def stream():
        for index in range(5):
            yield json.dumps({"partition_id": 0, "value": {"type": "BINARY",
                                                           "data": base64.b64encode(b"s%d" % index).decode()}}).encode()
        yield b'{"partition_id": 9, "value": {"type": "STRING", "data": "x"}}'
        yield b'{"value": {"type": "BINARY", "data": "not base64!"}}'
        yield b'{"value": {"type": "STRING", "data": "last"}, "partition_id": 0}'

    streamed = http.post(path, content=stream(), headers={"Content-Type": "application/json"})
    assert streamed.status_code == 200
    results = [json.loads(line) for line in streamed.text.splitlines()]
    assert [r["error_code"] for r in results] == [200] * 5 + [404, 400, 200]
    assert [r["offset"] for r in results if r["error_code"] == 200] == [0, 1, 2, 3, 4, 5]
    bad = http.post(path, json={"value": {"type": "AVRO", "data": {}}})
    assert (bad.status_code, bad.json()["error_code"]) == (422, 42206)

    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "v3-reader"})
    consumer.assign([confluent_kafka.TopicPartition(topic_name, index, 0) for index in (0, 1)])
    found = {}
    while len(found) < 7:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        found[(message.partition(), message.offset())] = message
    consumer.close()
    first = found[(1, 0)]
    assert (first.key(), json.loads(first.value()), first.headers(), first.timestamp()[1]) == (
        b"k", {"n": 1}, [("h", b"hv")], 1767323045678)
    assert [found[(0, i)].value() for i in range(6)] == [b"s0", b"s1", b"s2", b"s3", b"s4", b"last"]


def test_a_consumer_group_shows_its_consumers_and_lag(http, cluster, broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 1)
    for index in range(4):
        http.post(f"{cluster}/topics/{topic_name}/records", json={"value": {"data": index}})
    group = f"g-{topic_name}"
    v2 = {"Content-Type": "application/vnd.kafka.v2+json"}
    http.post(f"/consumers/{group}", headers=v2, json={"name": "lagging", "auto.offset.reset": "earliest"})
    base = f"/consumers/{group}/instances/lagging"
    http.post(f"{base}/subscription", headers=v2, json={"topics": [topic_name]})
    for _ in range(20):
        if http.get(f"{base}/records", headers={"Accept": "application/vnd.kafka.binary.v2+json"}).json():
            break
    http.post(f"{base}/offsets", headers=v2, json={"offsets": [{"topic": topic_name, "partition": 0, "offset": 0}]})
    described = http.get(f"{cluster}/consumer-groups/{group}").json()
    assert (described["kind"], described["state"], described["is_simple"]) == ("KafkaConsumerGroup", "STABLE", False)
    assert described["coordinator"]["related"].endswith("/brokers/1")
    consumers = http.get(described["consumers"]["related"]).json()["data"]
    assert len(consumers) == 1 and consumers[0]["client_id"] == "lagging"
    lags = http.get(f"{cluster}/consumer-groups/{group}/lags").json()
    assert lags["kind"] == "KafkaConsumerLagList"
    assert [(lag["current_offset"], lag["log_end_offset"], lag["lag"], lag["client_id"]) for lag in lags["data"]] == [
        (1, 4, 3, "lagging")]
    summary = http.get(described["lag_summary"]["related"]).json()
    assert (summary["kind"], summary["max_lag"], summary["total_lag"], summary["max_lag_topic_name"]) == (
        "KafkaConsumerGroupLagSummary", 3, 3, topic_name)
    assert group in [g["consumer_group_id"] for g in http.get(f"{cluster}/consumer-groups").json()["data"]]
    http.delete(base)


def test_partition_replicas_by_partition_and_by_broker(http, cluster, broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 2)
    cluster_id = cluster.rsplit("/", 1)[1]
    partition = http.get(f"{cluster}/topics/{topic_name}/partitions/1").json()
    leader = http.get(partition["leader"]["related"]).json()
    path = f"{cluster}/topics/{topic_name}/partitions/1/replicas/1"
    assert leader == {"kind": "KafkaReplica",
                      "metadata": {"self": url(http, path), "resource_name":
                                   f"crn:///kafka={cluster_id}/topic={topic_name}/partition=1/replica=1"},
                      "cluster_id": cluster_id, "topic_name": topic_name, "partition_id": 1, "broker_id": 1,
                      "is_leader": True, "is_in_sync": True, "broker": {"related": url(http, f"{cluster}/brokers/1")}}
    listing = http.get(partition["replicas"]["related"]).json()
    assert listing["kind"] == "KafkaReplicaList" and listing["data"] == [leader]
    assert listing["metadata"] == {"self": partition["replicas"]["related"], "next": None}
    by_broker = http.get(http.get(f"{cluster}/brokers/1").json()["partition_replicas"]["related"]).json()
    assert by_broker["kind"] == "KafkaReplicaList"
    assert [(r["topic_name"], r["partition_id"]) for r in by_broker["data"] if r["topic_name"] == topic_name] == [
        (topic_name, 0), (topic_name, 1)]
    for missing in (f"{cluster}/topics/{topic_name}/partitions/1/replicas/2",
                    f"{cluster}/topics/{topic_name}/partitions/2/replicas",
                    f"{cluster}/topics/nope/partitions/0/replicas",
                    f"{cluster}/brokers/2/partition-replicas"):
        assert http.get(missing).status_code == 404, missing


def test_a_batch_of_records_is_answered_by_id(http, cluster, broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 2)
    path = f"{cluster}/topics/{topic_name}/records:batch"
    answer = http.post(path, json={"entries": [
        {"id": "a", "partition_id": 1, "value": {"type": "STRING", "data": "first"}},
        {"id": "b", "partition_id": 9, "value": {"data": 1}},
        {"id": "c", "partition_id": 1, "key": {"type": "STRING", "data": "k"}, "value": {"data": {"n": 2}}}]})
    assert answer.status_code == 207, answer.text
    batch = answer.json()
    assert [(s["id"], s["partition_id"], s["offset"], s["topic_name"]) for s in batch["successes"]] == [
        ("a", 1, 0, topic_name), ("c", 1, 1, topic_name)]
    assert batch["successes"][1]["key"] == {"type": "STRING", "size": 1} and "error_code" not in batch["successes"][0]
    assert [(f["id"], f["error_code"]) for f in batch["failures"]] == [("b", 404)]
    consumer = confluent_kafka.Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": "batch-reader"})
    consumer.assign([confluent_kafka.TopicPartition(topic_name, 1, 0)])
    values = []
    while len(values) < 2:
        message = consumer.poll(10)
        assert message is not None and message.error() is None
        values.append(message.value())
    consumer.close()
    assert values == [b"first", b'{"n":2}']
    for body, expected in [({"entries": [{"id": "x"}, {"id": "x"}]}, (422, 42208)),
                           ({"entries": []}, (422, 42208)),
                           ({"entries": [{"id": str(i)} for i in range(11)]}, (422, 42208)),
                           ({"entries": [{"value": {"data": 1}}]}, (422, 42208)),
                           ({"records": []}, (422, 422))]:
        refused = http.post(path, json=body)
        assert (refused.status_code, refused.json()["error_code"]) == expected, body
    missing = http.post(f"{cluster}/topics/nope/records:batch", json={"entries": [{"id": "a"}]})
    assert (missing.status_code, missing.json()["error_code"]) == (404, 404)
