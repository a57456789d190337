"""SASL on SASL_PLAINTEXT and SASL_SSL: PLAIN users from the JAAS config, SCRAM users made with
AlterUserScramCredentials, with confluent-kafka, kafka-python, aiokafka and kcat; wrong passwords fail with Kafka's
error and message."""

from __future__ import annotations

import json
import subprocess
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import (AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialDeletion,
                                   UserScramCredentialUpsertion)

from odradek.errors import ErrorCode
from odradek.protocol import api
from tests.security.clients import EXPECTED, aiokafka_round_trip, kafka_python_round_trip
from tests.security.conftest import PLAIN_USERS
from tests.security.test_tls import produce_and_consume

SCRAM_USERS = {"bob": "bob-scram-secret"}


def sasl_config(certificates, listener: str, mechanism: str, user: str, password: str) -> dict:
    config = {"security.protocol": listener, "sasl.mechanism": mechanism, "sasl.username": user,
              "sasl.password": password}
    if listener == "SASL_SSL":
        config["ssl.ca.location"] = certificates.path("ca.pem")
    return config


@pytest.fixture(scope="module")
def scram_users(secure_broker):
    admin = AdminClient({"bootstrap.servers": secure_broker.address("PLAINTEXT")})
    upsertions = [UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, 4096), password.encode())
                  for user, password in SCRAM_USERS.items()
                  for mechanism in (ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512)]
    # one change per user and request, as Kafka requires
    for upsertion in upsertions:
        for future in admin.alter_user_scram_credentials([upsertion]).values():
            future.result(10)
    return SCRAM_USERS


@pytest.mark.parametrize("listener", ["SASL_PLAINTEXT", "SASL_SSL"])
@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_the_right_user_writes_and_reads(secure_broker, certificates, scram_users, listener, mechanism):
    user, password = ("alice", PLAIN_USERS["alice"]) if mechanism == "PLAIN" else ("bob", scram_users["bob"])
    config = sasl_config(certificates, listener, mechanism, user, password)
    values = produce_and_consume(secure_broker.address(listener), config, 50)
    assert len(values) == 50


@pytest.mark.parametrize("mechanism, message", [
    ("PLAIN", "Authentication failed: Invalid username or password"),
    ("SCRAM-SHA-256", "Authentication failed during authentication due to invalid credentials with SASL mechanism "
                      "SCRAM-SHA-256"),
])
def test_a_wrong_password_gets_kafkas_error(secure_broker, certificates, scram_users, mechanism, message):
    user = "alice" if mechanism == "PLAIN" else "bob"
    errors = []
    producer = Producer({"bootstrap.servers": secure_broker.address("SASL_PLAINTEXT"),
                         **sasl_config(certificates, "SASL_PLAINTEXT", mechanism, user, "wrong"),
                         "error_cb": errors.append})
    deadline = time.monotonic() + 10
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    assert errors and errors[0].code() == KafkaError._AUTHENTICATION, errors
    assert message in errors[0].str()


def test_scram_credentials_are_described_and_deleted(secure_broker, certificates):
    admin = AdminClient({"bootstrap.servers": secure_broker.address("PLAINTEXT")})
    user = f"carol-{uuid.uuid4().hex[:6]}"
    admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        user, ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 8192), b"carol-secret")])[user].result(10)
    infos = admin.describe_user_scram_credentials([user])[user].result(10).scram_credential_infos
    assert [(info.mechanism, info.iterations) for info in infos] == [(ScramMechanism.SCRAM_SHA_512, 8192)]
    config = sasl_config(certificates, "SASL_PLAINTEXT", "SCRAM-SHA-512", user, "carol-secret")
    assert AdminClient({"bootstrap.servers": secure_broker.address("SASL_PLAINTEXT"), **config}) \
        .list_topics(timeout=10).brokers
    admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, ScramMechanism.SCRAM_SHA_512)])[user] \
        .result(10)
    with pytest.raises(KafkaException, match="does not exist"):
        admin.describe_user_scram_credentials([user])[user].result(10)
    with pytest.raises(KafkaException):
        AdminClient({"bootstrap.servers": secure_broker.address("SASL_PLAINTEXT"), **config}).list_topics(timeout=3)


def test_too_few_iterations_are_refused(secure_broker):
    admin = AdminClient({"bootstrap.servers": secure_broker.address("PLAINTEXT")})
    future = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(
        "dave", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 1000), b"pw")])["dave"]
    with pytest.raises(KafkaException, match="Too few iterations"):
        future.result(10)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
def test_kafka_python_authenticates(secure_broker, scram_users, mechanism):
    user, password = ("alice", PLAIN_USERS["alice"]) if mechanism == "PLAIN" else ("bob", scram_users["bob"])
    config = {"bootstrap_servers": secure_broker.address("SASL_PLAINTEXT"), "security_protocol": "SASL_PLAINTEXT",
              "sasl_mechanism": mechanism, "sasl_plain_username": user, "sasl_plain_password": password}
    assert kafka_python_round_trip(config) == EXPECTED


def test_aiokafka_authenticates_over_sasl_ssl(secure_broker, certificates, scram_users):
    from aiokafka.helpers import create_ssl_context

    config = {"bootstrap_servers": secure_broker.address("SASL_SSL"), "security_protocol": "SASL_SSL",
              "ssl_context": create_ssl_context(cafile=certificates.path("ca.pem")),
              "sasl_mechanism": "SCRAM-SHA-512", "sasl_plain_username": "bob",
              "sasl_plain_password": scram_users["bob"]}
    assert aiokafka_round_trip(config) == EXPECTED


def test_kcat_lists_metadata_over_sasl_ssl(secure_broker, certificates):
    result = subprocess.run(
        ["kcat", "-b", secure_broker.address("SASL_SSL"), "-L", "-J", "-X", "security.protocol=SASL_SSL",
         "-X", "sasl.mechanism=PLAIN", "-X", "sasl.username=alice", "-X", f"sasl.password={PLAIN_USERS['alice']}",
         "-X", f"ssl.ca.location={certificates.path('ca.pem')}", "-m", "10"],
        capture_output=True, text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["brokers"] == [{"id": 1, "name": secure_broker.address("SASL_SSL")}]


def test_a_user_changed_twice_in_one_request_is_refused_and_left_alone(secure_broker):
    from tests.broker.raw_client import RawClient

    client = RawClient(secure_broker.ports["PLAINTEXT"])
    Upsertion = api("AlterUserScramCredentials").request.ScramCredentialUpsertion
    upsertions = [Upsertion(name="gina", mechanism=mechanism, iterations=4096, salt=b"salt", salted_password=b"x" * 32)
                  for mechanism in (1, 2)]
    answer = client.call("AlterUserScramCredentials", 0, deletions=[], upsertions=upsertions)
    assert [(r.user, r.error_code, r.error_message) for r in answer.results] == [
        ("gina", ErrorCode.DUPLICATE_RESOURCE, "A user credential cannot be altered twice in the same request")]
    described = client.call("DescribeUserScramCredentials", 0, users=[api("DescribeUserScramCredentials").request
                                                                      .UserName(name="gina")])
    assert described.results[0].error_code == ErrorCode.RESOURCE_NOT_FOUND
