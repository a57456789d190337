"""How the REST proxy is served: beside a broker in its process (`odradek serve --set rest.proxy.port=PORT`, the
schema formats through the registry beside it when `schema.registry.port` is set), and as `odradek rest-proxy` in
front of any cluster; each says where it serves in one line and answers there."""

from __future__ import annotations

import base64
import socket
import subprocess

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition

from odradek.embedded import BrokerProcess
from tests.cli.run import odradek_command
from tests.http_services import line_of
from tests.restproxy.conftest import BINARY
from tests.security.conftest import free_port

pytestmark = pytest.mark.timeout(120)


def test_rest_proxy_port_serves_the_proxy_beside_the_broker_with_its_registry(tmp_path, topic_name):
    port = free_port()
    broker = BrokerProcess(tmp_path / "data", settings={"rest.proxy.port": port,
                                                        "schema.registry.port": free_port()})
    broker.start()
    try:
        assert line_of(broker.process.stdout).startswith("odradek: schema registry on http://127.0.0.1:")
        assert line_of(broker.process.stdout).strip() == f"odradek: rest proxy on http://127.0.0.1:{port}/"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            answer = http.post(f"/topics/{topic_name}", headers={"Content-Type": BINARY},
                               json={"records": [{"value": base64.b64encode(b"beside").decode()}]})
            assert answer.status_code == 404  # the broker auto-creates topics for clients, not for the proxy
            cluster = http.get("/v3/clusters").json()["data"][0]["metadata"]["self"]
            assert http.post(f"{cluster}/topics", json={"topic_name": topic_name}).status_code == 201
            answer = http.post(f"/topics/{topic_name}", headers={"Content-Type": BINARY},
                               json={"records": [{"value": base64.b64encode(b"beside").decode()}]})
            assert answer.json()["offsets"][0]["offset"] == 0
            avro = http.post(f"/topics/{topic_name}", headers={"Content-Type": "application/vnd.kafka.avro.v2+json"},
                             json={"value_schema": '"string"', "records": [{"value": "through the registry"}]})
            assert avro.status_code == 200 and avro.json()["value_schema_id"] >= 1, avro.text
    finally:
        broker.stop()


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback (::1) here")
def test_the_proxy_beside_a_broker_listening_on_ipv6_reaches_it(tmp_path, topic_name):
    """A broker whose listener is on ::1: the proxy beside it bootstraps from [::1]:port (::1:port is no address)
    and produces through it, and the broker's bootstrap_servers reach it too."""
    port = free_port()
    broker = BrokerProcess(tmp_path / "data", settings={"rest.proxy.port": port})
    broker.host = "::1"
    broker.start()
    try:
        assert line_of(broker.process.stdout).strip() == f"odradek: rest proxy on http://127.0.0.1:{port}/"
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as http:
            cluster = http.get("/v3/clusters").json()["data"][0]["metadata"]["self"]
            assert http.post(f"{cluster}/topics", json={"topic_name": topic_name}).status_code == 201
            answer = http.post(f"/topics/{topic_name}", headers={"Content-Type": BINARY},
                               json={"records": [{"value": base64.b64encode(b"over ::1").decode()}]})
            assert answer.status_code == 200 and answer.json()["offsets"][0]["offset"] == 0, answer.text
        assert broker.bootstrap_servers == f"[::1]:{broker.port}"
        consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": topic_name})
        try:
            assert consumer.get_watermark_offsets(TopicPartition(topic_name, 0), timeout=30) == (0, 1)
        finally:
            consumer.close()
    finally:
        broker.stop()


def test_the_rest_proxy_command_serves_any_cluster(broker, topic_name):
    process = subprocess.Popen(odradek_command("rest-proxy", "--port", "0", "--bootstrap-server",
                                               broker.bootstrap_servers), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    try:
        ready = line_of(process.stdout)
        assert ready.startswith("odradek: rest proxy on http://127.0.0.1:"), ready
        with httpx.Client(base_url=ready.split(" on ", 1)[1].strip(), timeout=30) as http:
            assert http.get("/brokers").json() == {"brokers": [1]}
            assert http.get("/v3/clusters").json()["data"][0]["kind"] == "KafkaCluster"
    finally:
        process.terminate()
        process.wait(30)


def test_the_rest_proxy_command_refuses_half_a_tls_setting():
    done = subprocess.run(odradek_command("rest-proxy", "--ssl-certfile", "cert.pem"), capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--ssl-keyfile" in done.stderr
