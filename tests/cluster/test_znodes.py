"""The znode formats and zookeeper.connect parsing, as plain functions (no ZooKeeper needed)."""

from __future__ import annotations

import json

import pytest

from odradek.cluster.membership import BrokerEndpoint
from odradek.config import Listener
from odradek.cluster.zookeeper import (decode_broker, decode_cluster_id, decode_controller, encode_broker,
                                       encode_cluster_id, encode_controller, split_connect_string)


@pytest.mark.parametrize("connect, expected", [
    ("127.0.0.1:2181", ("127.0.0.1:2181", "")),
    ("a:2181,b:2181/kafka/prod", ("a:2181,b:2181", "/kafka/prod")),
    ("a:2181/odradek/", ("a:2181", "/odradek")),
    ("a:2181/", ("a:2181", "")),
])
def test_connect_string_splits_hosts_and_chroot(connect, expected):
    assert split_connect_string(connect) == expected


def test_a_connect_string_without_a_server_is_refused():
    with pytest.raises(ValueError, match="names no ZooKeeper server"):
        split_connect_string("/chroot")


def test_broker_registration_round_trips_with_and_without_a_rack():
    plaintext = (Listener("PLAINTEXT", "PLAINTEXT", "127.0.0.1", 9092),)
    several = (Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "10.0.0.7", 9094), Listener("CLIENT", "SSL", "::1", 9095),
               Listener("INTERNAL", "PLAINTEXT", "10.0.0.7", 9093))
    for endpoint in (BrokerEndpoint.of(3, "eu-1a", several), BrokerEndpoint.of(1, None, plaintext)):
        data = encode_broker(endpoint, 1700000000000)
        assert decode_broker(endpoint.node_id, data) == endpoint
        assert ("rack" in json.loads(data)) == (endpoint.rack is not None)


def test_a_registration_carries_every_listener_as_kafka_writes_it():
    """Kafka's BrokerIdZNode: every endpoint by listener name with its protocol in the map; the legacy host and
    port are the PLAINTEXT listener's (null and -1 without one)."""
    listeners = (Listener("SASL_PLAINTEXT", "SASL_PLAINTEXT", "h", 9094), Listener("CLIENT", "SSL", "::1", 9095),
                 Listener("INTERNAL", "PLAINTEXT", "h", 9093))
    body = json.loads(encode_broker(BrokerEndpoint.of(3, None, listeners), 1))
    assert body["endpoints"] == ["SASL_PLAINTEXT://h:9094", "CLIENT://[::1]:9095", "INTERNAL://h:9093"]
    assert body["listener_security_protocol_map"] == {"SASL_PLAINTEXT": "SASL_PLAINTEXT", "CLIENT": "SSL",
                                                      "INTERNAL": "PLAINTEXT"}
    assert (body["host"], body["port"]) == ("h", 9093)
    body = json.loads(encode_broker(BrokerEndpoint.of(3, None, listeners[:2]), 1))
    assert (body["host"], body["port"]) == (None, -1)
    endpoint = decode_broker(3, encode_broker(BrokerEndpoint.of(3, None, listeners[:2]), 1))
    assert endpoint.address("CLIENT") == ("::1", 9095) and endpoint.address("INTERNAL") is None


def test_a_registration_written_by_an_old_kafka_is_read():
    """Kafka 0.9's version 1 has host and port only; version 4 lists endpoints with named listeners."""
    assert decode_broker(5, b'{"jmx_port":-1,"timestamp":"1","host":"h","version":1,"port":9092}') == \
        BrokerEndpoint(5, "h", 9092, None, (Listener("PLAINTEXT", "PLAINTEXT", "h", 9092),))
    v4 = (b'{"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT"},"endpoints":["INTERNAL://[::1]:9093"],'
          b'"rack":"r","jmx_port":-1,"host":null,"timestamp":"1","port":-1,"version":4}')
    assert decode_broker(6, v4) == BrokerEndpoint(6, "::1", 9093, "r", (Listener("INTERNAL", "PLAINTEXT", "::1", 9093),))


def test_controller_and_cluster_id_round_trip():
    assert decode_controller(encode_controller(7, 1)) == 7
    assert decode_cluster_id(encode_cluster_id("AbCdEfGhIjKlMnOpQrStUv")) == "AbCdEfGhIjKlMnOpQrStUv"
