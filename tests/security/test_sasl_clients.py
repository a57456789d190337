"""The clients that log in with odradek.security.client's SASL exchange, on the security tests' broker's SASL_SSL
listener as SCRAM user bob: SimpleConsumer's direct calls (multifetch, get_offsets_before) secured by the same
confluent-kafka config as its Consumer, a wrong password a ClientError _AUTHENTICATION at once; and a broker's own
connection to another broker (odradek.cluster.peer) set up from a broker's inter-broker settings for SCRAM-SHA-512,
which the clusters of tests/security/test_cluster_inter_broker.py log in to with PLAIN only."""

from __future__ import annotations

import asyncio
import time

import pytest

from odradek.client import Admin, ClientError, Producer, SimpleConsumer
from odradek.client.simple import EARLIEST_TIME, LATEST_TIME, FetchRequest
from odradek.cluster.membership import BrokerEndpoint
from odradek.cluster.peer import PeerAuthenticationFailed, open_peer_connection, round_trip
from odradek.config import Listener
from odradek.protocol import api
from odradek.security.inter_broker import inter_broker_security
from tests.security.test_sasl import sasl_config, scram_users  # noqa: F401 (scram_users: a fixture)

RECORDS = 5


@pytest.fixture(scope="module")
def written(secure_broker) -> str:
    """A topic of RECORDS records, written over the PLAINTEXT listener."""
    topic = "sasl-simple-consumer"
    Admin(secure_broker.address("PLAINTEXT")).create_topic(topic, 1)
    with Producer(secure_broker.address("PLAINTEXT")) as producer:
        for i in range(RECORDS):
            producer.send(topic, f"v{i}", f"k{i}")
    return topic


def test_simple_consumer_reads_over_sasl_ssl_with_scram(secure_broker, certificates, scram_users,  # noqa: F811
                                                        written):
    config = sasl_config(certificates, "SASL_SSL", "SCRAM-SHA-512", "bob", scram_users["bob"])
    with SimpleConsumer(secure_broker.address("SASL_SSL"), written, config=config) as consumer:
        [answer] = consumer.multifetch([FetchRequest(written, 0, 1)])
        assert answer.error is None
        assert [(m.offset, m.key, m.value) for m in answer.messages] == [
            (i, f"k{i}".encode(), f"v{i}".encode()) for i in range(1, RECORDS)]
        assert consumer.get_offsets_before(written, 0, LATEST_TIME, 10)[0] == RECORDS
        assert consumer.get_offsets_before(written, 0, EARLIEST_TIME, 10) == [0]

    wrong = sasl_config(certificates, "SASL_SSL", "SCRAM-SHA-512", "bob", "wrong")
    started = time.monotonic()
    with SimpleConsumer(secure_broker.address("SASL_SSL"), written, config=wrong) as consumer:
        with pytest.raises(ClientError, match="SASL_AUTHENTICATION_FAILED: Authentication failed during "
                                              "authentication due to invalid credentials") as refused:
            consumer.multifetch([FetchRequest(written, 0, 0)])
    assert refused.value.name == "_AUTHENTICATION" and not refused.value.retriable
    assert time.monotonic() - started < 5  # not retried, not waited out


def peer_login(secure_broker, certificates, password: str):
    """What a broker whose inter-broker listener is SASL_SSL with SCRAM-SHA-512 as bob gets from this broker: its
    Metadata's brokers over the peer connection, logged in."""
    listener = Listener("SASL_SSL", "SASL_SSL", "127.0.0.1", secure_broker.ports["SASL_SSL"])
    security = inter_broker_security([listener], {
        "inter.broker.listener.name": "SASL_SSL", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-512",
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config":
            f'org.apache.kafka.common.security.scram.ScramLoginModule required username="bob" password="{password}";',
        "ssl.truststore.type": "PEM", "ssl.truststore.location": certificates.path("ca.pem")})

    async def run():
        connection = await open_peer_connection(security, BrokerEndpoint.of(0, None, (listener,)), client_id="peer")
        try:
            metadata = api("Metadata")
            return await round_trip(connection.reader, connection.writer, metadata, 12,
                                    metadata.request(topics=[], allow_auto_topic_creation=False), client_id="peer",
                                    timeout=10)
        finally:
            connection.close()

    return asyncio.run(run())


def test_a_peer_connection_logs_in_with_scram(secure_broker, certificates, scram_users):  # noqa: F811
    answer = peer_login(secure_broker, certificates, scram_users["bob"])
    assert [broker.port for broker in answer.brokers] == [secure_broker.ports["SASL_SSL"]]
    with pytest.raises(PeerAuthenticationFailed, match="^SASL_AUTHENTICATION_FAILED: Authentication failed during "
                                                       "authentication due to invalid credentials"):
        peer_login(secure_broker, certificates, "wrong")
