"""The REST proxy's v3 configs with httpx against a real broker: a broker's configs, the cluster-wide broker
defaults (broker-configs) and topics' configs listed, read, set, reset and altered in batches, every broker's and
every topic's at once, with the shapes of Confluent's OpenAPI document (kind, metadata.self, resource_name,
source, synonyms) and its 404 for a config the owner does not have. And the proxy's own configs beside a broker:
rest.proxy.authentication.method BASIC and rest.proxy.ssl.certfile / keyfile serve HTTPS with basic auth."""

from __future__ import annotations

import ssl

import httpx
import pytest

from odradek.client import Admin
from odradek.embedded import BrokerProcess
from tests.security.conftest import certificates, free_port  # noqa: F401  (the session's test certificates)
from tests.security.test_acls_sasl import PASSWORDS

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(http) -> str:
    """The v3 base path of the broker's cluster."""
    return f"/v3/clusters/{http.get('/v3/clusters').json()['data'][0]['cluster_id']}"


def url(http, path: str) -> str:
    return f"{str(http.base_url).rstrip('/')}{path}"


def status(answer) -> tuple[int, int | None]:
    return answer.status_code, answer.json()["error_code"] if answer.content else None


def test_a_brokers_configs_are_read_set_reset_and_altered(http, cluster):
    cluster_id = cluster.rsplit("/", 1)[1]
    base = f"{cluster}/brokers/1/configs"
    listing = http.get(base).json()
    assert listing["kind"] == "KafkaBrokerConfigList" and listing["metadata"] == {"self": url(http, base),
                                                                                "next": None}
    assert "num.partitions" in {entry["name"] for entry in listing["data"]}
    assert http.get(f"{base}/compression.type").json() == {
        "kind": "KafkaBrokerConfig",
        "metadata": {"self": url(http, f"{base}/compression.type"),
                     "resource_name": f"crn:///kafka={cluster_id}/broker=1/config=compression.type"},
        "cluster_id": cluster_id, "broker_id": 1, "name": "compression.type", "value": "producer",
        "is_default": True, "is_read_only": False, "is_sensitive": False, "source": "DEFAULT_CONFIG", "synonyms": []}

    assert http.put(f"{base}/compression.type", json={"value": "gzip"}).status_code == 204
    config = http.get(f"{base}/compression.type").json()
    assert (config["value"], config["source"], config["is_default"]) == ("gzip", "DYNAMIC_BROKER_CONFIG", False)
    assert http.delete(f"{base}/compression.type").status_code == 204
    assert http.get(f"{base}/compression.type").json()["value"] == "producer"

    assert http.post(f"{base}:alter", json={"data": [{"name": "compression.type", "value": "lz4"},
                                                     {"name": "log.cleaner.threads", "value": "2"}]}
                     ).status_code == 204
    values = {entry["name"]: entry["value"] for entry in http.get(base).json()["data"]}
    assert (values["compression.type"], values["log.cleaner.threads"]) == ("lz4", "2")
    assert http.post(f"{base}:alter", json={"validate_only": True, "data": [
        {"name": "compression.type", "operation": "DELETE"}]}).status_code == 204
    assert http.get(f"{base}/compression.type").json()["value"] == "lz4"
    assert status(http.post(f"{base}:alter", json={"validate_only": True, "data": [
        {"name": "compression.type", "value": "snappier"}]})) == (400, 40002)
    assert http.post(f"{base}:alter", json={"data": [{"name": "compression.type", "operation": "DELETE"},
                                                     {"name": "log.cleaner.threads", "operation": "DELETE"}]}
                     ).status_code == 204
    assert http.get(f"{base}/compression.type").json()["source"] == "DEFAULT_CONFIG"

    every = http.get(f"{cluster}/brokers/-/configs").json()
    assert every["kind"] == "KafkaBrokerConfigList" and every["metadata"]["self"] == url(
        http, f"{cluster}/brokers/-/configs")
    assert {entry["broker_id"] for entry in every["data"]} == {1} and len(every["data"]) == len(listing["data"])

    for answer, expected in [
            (http.get(f"{base}/no.such.config"), (404, 404)),
            (http.put(f"{base}/no.such.config", json={"value": "1"}), (404, 404)),
            (http.delete(f"{base}/no.such.config"), (404, 404)),
            (http.post(f"{base}:alter", json={"data": [{"name": "no.such.config", "value": "1"}]}), (404, 404)),
            (http.post(f"{base}:alter", json={"data": [{"name": "compression.type", "operation": "APPEND"}]}),
             (400, 400)),
            (http.put(f"{base}/compression.type", json={"value": "snappier"}), (400, 40002)),
            (http.put(f"{base}/compression.type", content=b"{}"), (415, 415)),
            (http.get(f"{cluster}/brokers/99/configs"), (404, 404)),
            (http.put(f"{cluster}/brokers/99/configs/compression.type", json={"value": "gzip"}), (404, 404))]:
        assert status(answer) == expected, answer.text


def test_cluster_wide_broker_defaults_are_set_listed_and_reset(http, cluster):
    cluster_id = cluster.rsplit("/", 1)[1]
    base = f"{cluster}/broker-configs"
    assert http.get(cluster).json()["broker_configs"] == {"related": url(http, base)}
    assert http.get(base).json() == {"kind": "KafkaClusterConfigList",
                                     "metadata": {"self": url(http, base), "next": None}, "data": []}
    assert status(http.get(f"{base}/log.retention.ms")) == (404, 404)
    assert status(http.delete(f"{base}/log.retention.ms")) == (404, 404)

    assert http.put(f"{base}/log.retention.ms", json={"value": "3600000"}).status_code == 204
    assert http.get(f"{base}/log.retention.ms").json() == {
        "kind": "KafkaClusterConfig",
        "metadata": {"self": url(http, f"{base}/log.retention.ms"),
                     "resource_name": f"crn:///kafka={cluster_id}/broker-config=log.retention.ms"},
        "cluster_id": cluster_id, "config_type": "BROKER", "name": "log.retention.ms", "value": "3600000",
        "is_default": False, "is_read_only": False, "is_sensitive": False, "source": "DYNAMIC_DEFAULT_BROKER_CONFIG",
        "synonyms": [{"name": "log.retention.ms", "value": "3600000", "source": "DYNAMIC_DEFAULT_BROKER_CONFIG"}]}
    # the broker takes the cluster-wide default
    broker = http.get(f"{cluster}/brokers/1/configs/log.retention.ms").json()
    assert (broker["value"], broker["source"]) == ("3600000", "DYNAMIC_DEFAULT_BROKER_CONFIG")

    assert http.post(f"{base}:alter", json={"data": [{"name": "log.retention.ms", "operation": "DELETE"},
                                                     {"name": "compression.type", "value": "zstd"}]}
                     ).status_code == 204
    assert [(c["name"], c["value"]) for c in http.get(base).json()["data"]] == [("compression.type", "zstd")]
    assert http.delete(f"{base}/compression.type").status_code == 204
    assert http.get(base).json()["data"] == []
    assert http.get(f"{cluster}/brokers/1/configs/log.retention.ms").json()["source"] == "DEFAULT_CONFIG"
    assert status(http.put(f"{base}/compression.type", json={"value": "snappier"})) == (400, 40002)
    assert status(http.post(f"{base}:alter", json={"validate_only": True, "data": [
        {"name": "compression.type", "value": "snappier"}]})) == (400, 40002)
    assert http.post(f"{base}:alter", json={"validate_only": True, "data": [
        {"name": "compression.type", "value": "gzip"}]}).status_code == 204
    assert http.get(base).json()["data"] == []


def test_topic_configs_of_one_topic_and_of_every_topic(http, cluster, broker, topic_name):
    admin = Admin(broker.bootstrap_servers)
    admin.create_topic(topic_name, 1, configs={"retention.ms": "60000"})
    admin.create_topic(f"{topic_name}-b", 1)
    base = f"{cluster}/topics/{topic_name}/configs"
    assert status(http.put(f"{base}/no.such.config", json={"value": "1"})) == (404, 404)
    assert status(http.delete(f"{base}/no.such.config")) == (404, 404)
    assert status(http.post(f"{base}:alter", json={"data": [{"name": "no.such.config", "value": "1"}]})) == (404,
                                                                                                              404)
    assert status(http.put(f"{cluster}/topics/nope/configs/retention.ms", json={"value": "1"})) == (404, 40401)
    assert http.post(f"{base}:alter", json={"validate_only": True, "data": [
        {"name": "retention.ms", "value": "1000"}]}).status_code == 204
    assert status(http.post(f"{base}:alter", json={"validate_only": True, "data": [
        {"name": "retention.ms", "value": "soon"}]})) == (400, 40002)
    assert admin.topic_configs(topic_name) == {"retention.ms": "60000"}

    every = http.get(f"{cluster}/topics/-/configs").json()
    assert every["kind"] == "KafkaTopicConfigList" and every["metadata"]["self"] == url(
        http, f"{cluster}/topics/-/configs")
    by_topic = {}
    for entry in every["data"]:
        by_topic.setdefault(entry["topic_name"], {})[entry["name"]] = entry
    retention = by_topic[topic_name]["retention.ms"]
    assert (retention["kind"], retention["value"], retention["source"]) == ("KafkaTopicConfig", "60000",
                                                                            "DYNAMIC_TOPIC_CONFIG")
    assert retention["metadata"]["self"] == url(http, f"{base}/retention.ms")
    assert retention["metadata"]["resource_name"].endswith(f"/topic={topic_name}/config=retention.ms")
    assert by_topic[f"{topic_name}-b"]["retention.ms"]["is_default"] is True


def test_the_proxy_beside_a_broker_takes_basic_auth_and_tls_from_its_configs(tmp_path, certificates):
    port, sasl_port = free_port(), free_port()
    users = " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items())
    broker = BrokerProcess(tmp_path / "data", settings={
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
        "rest.proxy.port": port, "rest.proxy.authentication.method": "BASIC",
        "rest.proxy.ssl.certfile": certificates.path("broker.pem"),
        "rest.proxy.ssl.keyfile": certificates.path("broker.key")})
    broker.start()
    try:
        trusted = ssl.create_default_context(cafile=certificates.path("ca.pem"))
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=trusted, timeout=30) as https:
            refused = https.get("/brokers")
            assert status(refused) == (401, 401) and refused.headers["www-authenticate"].startswith("Basic")
            assert status(https.get("/brokers", auth=("alice", "wrong"))) == (401, 40101)
            assert https.get("/brokers", auth=("alice", PASSWORDS["alice"])).json() == {"brokers": [1]}
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as plain, pytest.raises(httpx.HTTPError):
            plain.get("/brokers")  # HTTPS only
    finally:
        broker.stop()
    unfit = BrokerProcess(tmp_path / "unfit", settings={"rest.proxy.port": free_port(),
                                                        "rest.proxy.authentication.method": "BASIC"})
    with pytest.raises(RuntimeError):
        unfit.start()
    assert "needs a SASL_PLAINTEXT listener" in unfit.log_tail()
