"""The inter-broker listener as Kafka's settings choose it, the refusals a broker starts with when it could not log
in to its peers, and the client side of SCRAM a broker logs in with (against our own server side)."""

from __future__ import annotations

import pytest

from odradek.config import parse_listeners
from odradek.errors import ErrorCode, KafkaError
from odradek.security.inter_broker import inter_broker_security
from odradek.security.scram import ScramClient, ScramError, ScramServer, new_credential

LISTENERS = parse_listeners("CLIENT://127.0.0.1:9092,BROKER://127.0.0.1:9093,PLAINTEXT://127.0.0.1:9094",
                            "CLIENT:SASL_SSL,BROKER:SASL_PLAINTEXT,PLAINTEXT:PLAINTEXT")
BROKER_JAAS = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="kafka" password="s3";'


def refusal(listeners, props) -> str:
    with pytest.raises(KafkaError) as raised:
        inter_broker_security(listeners, props)
    assert raised.value.code == ErrorCode.INVALID_CONFIG
    return raised.value.message


def test_the_listener_named_by_either_setting():
    assert inter_broker_security(LISTENERS, {}).listener_name == "PLAINTEXT"  # security.inter.broker.protocol's
    security = inter_broker_security(LISTENERS, {"inter.broker.listener.name": "broker",
                                                 "sasl.mechanism.inter.broker.protocol": "PLAIN",
                                                 "listener.name.broker.plain.sasl.jaas.config": BROKER_JAAS})
    assert (security.listener_name, security.mechanism, security.username, security.password, security.tls) == \
        ("BROKER", "PLAIN", "kafka", "s3", None)


def test_refusals_at_start():
    assert "Only one of" in refusal(LISTENERS, {"inter.broker.listener.name": "BROKER",
                                                "security.inter.broker.protocol": "SASL_PLAINTEXT"})
    assert "valid options based on currently configured listeners are CLIENT,BROKER" in refusal(LISTENERS[:2], {})
    assert "GSSAPI is not served" in refusal(LISTENERS, {"inter.broker.listener.name": "BROKER"})
    assert "listener.name.broker.scram-sha-256.sasl.jaas.config needs this broker's own username" in refusal(
        LISTENERS, {"inter.broker.listener.name": "BROKER", "sasl.mechanism.inter.broker.protocol": "SCRAM-SHA-256",
                    "listener.name.broker.plain.sasl.jaas.config": BROKER_JAAS})


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_client_against_the_server(mechanism):
    credential = new_credential(mechanism, "pass,word=")

    def exchange(password: str, tamper=lambda final: final):
        client = ScramClient(mechanism, "user=one,", password)
        server = ScramServer(mechanism, lambda user, _: credential if user == "user=one," else None)
        final = server.step(client.final(server.step(client.first())))
        client.verify(tamper(final))
        return server.user

    assert exchange("pass,word=") == "user=one,"
    with pytest.raises(ScramError):
        exchange("wrong")
    with pytest.raises(ScramError):  # a server that does not know the credential cannot sign the exchange
        exchange("pass,word=", tamper=lambda final: final[:-4] + b"AAA=")
