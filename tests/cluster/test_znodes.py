"""The znode formats and zookeeper.connect parsing, as plain functions (no ZooKeeper needed)."""

from __future__ import annotations

import json

import pytest

from odradek.cluster.membership import BrokerEndpoint
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
    for endpoint in (BrokerEndpoint(3, "10.0.0.7", 9094, "eu-1a"), BrokerEndpoint(1, "127.0.0.1", 9092)):
        data = encode_broker(endpoint, 1700000000000)
        assert decode_broker(endpoint.node_id, data) == endpoint
        assert ("rack" in json.loads(data)) == (endpoint.rack is not None)


def test_a_registration_written_by_an_old_kafka_is_read():
    """Kafka 0.9's version 1 has host and port only; version 4 lists endpoints with named listeners."""
    assert decode_broker(5, b'{"jmx_port":-1,"timestamp":"1","host":"h","version":1,"port":9092}') == \
        BrokerEndpoint(5, "h", 9092)
    v4 = (b'{"listener_security_protocol_map":{"INTERNAL":"PLAINTEXT"},"endpoints":["INTERNAL://[::1]:9093"],'
          b'"rack":"r","jmx_port":-1,"host":null,"timestamp":"1","port":-1,"version":4}')
    assert decode_broker(6, v4) == BrokerEndpoint(6, "::1", 9093, "r")


def test_controller_and_cluster_id_round_trip():
    assert decode_controller(encode_controller(7, 1)) == 7
    assert decode_cluster_id(encode_cluster_id("AbCdEfGhIjKlMnOpQrStUv")) == "AbCdEfGhIjKlMnOpQrStUv"
