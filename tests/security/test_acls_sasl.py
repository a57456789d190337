"""ACLs end to end with SASL/PLAIN users: a broker whose SASL_PLAINTEXT listener knows admin and alice, with
super.users=User:admin and allow.everyone.if.no.acl.found=false. The admin (a super user, so nothing is seeded into
the catalogue) grants alice Write on one topic with `odradek acls add` over the SASL listener (--command-config);
alice then produces there with confluent-kafka and is refused on another topic, and may not manage ACLs herself."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import BrokerProcess
from tests.cli.run import odradek
from tests.security.conftest import free_port

PASSWORDS = {"admin": "admin-secret", "alice": "alice-secret"}


class SaslBroker:
    def __init__(self, process: BrokerProcess, sasl_port: int):
        self.process = process
        self.bootstrap_servers = f"127.0.0.1:{sasl_port}"  # what tests.cli.run.odradek passes as --bootstrap-server

    def client_config(self, user: str) -> dict[str, str]:
        return {"bootstrap.servers": self.bootstrap_servers, "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": PASSWORDS[user]}


def start_sasl_broker(data_dir) -> SaslBroker:
    """A broker whose SASL_PLAINTEXT listener knows PASSWORDS' users, with ACLs on and User:admin a super user
    (tests/registry uses it too; tests/console and tests/restproxy the sasl_broker fixture)."""
    sasl_port = free_port()
    users = " ".join(f'user_{user}="{password}"' for user, password in PASSWORDS.items())
    process = BrokerProcess(data_dir, settings={
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{sasl_port}",
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f"org.apache.kafka.common.security.plain.PlainLoginModule required {users};",
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false"})
    process.start()
    return SaslBroker(process, sasl_port)


@pytest.fixture(scope="module")
def sasl_broker(tmp_path_factory):
    """The module's SASL broker (tests/console and tests/restproxy import this fixture)."""
    sasl = start_sasl_broker(tmp_path_factory.mktemp("sasl") / "data")
    yield sasl
    sasl.process.stop()


@pytest.fixture(scope="module")
def broker(sasl_broker):
    return sasl_broker


def properties_file(tmp_path, broker: SaslBroker, user: str):
    path = tmp_path / f"{user}.properties"
    path.write_text("".join(f"{key}={value}\n" for key, value in broker.client_config(user).items()
                            if key != "bootstrap.servers"))
    return path


def produce_error(broker: SaslBroker, user: str, topic: str):
    delivered = []
    producer = Producer({**broker.client_config(user), "message.timeout.ms": 5000})
    producer.produce(topic, b"from " + user.encode(), on_delivery=lambda err, msg: delivered.append(err))
    producer.flush(15)
    return delivered[0].code() if delivered[0] is not None else None


def test_admin_grants_alice_write_on_one_topic_over_sasl(broker, tmp_path):
    admin = AdminClient(broker.client_config("admin"))
    for future in admin.create_topics([NewTopic("alice-topic", 1, 1), NewTopic("other-topic", 1, 1)]).values():
        future.result(10)
    assert produce_error(broker, "alice", "alice-topic") == KafkaError.TOPIC_AUTHORIZATION_FAILED

    as_alice = odradek(broker, "acls", "add", "--allow-principal", "User:alice", "--operation", "Write", "--topic",
                       "alice-topic", "--command-config", str(properties_file(tmp_path, broker, "alice")))
    assert as_alice.returncode != 0 and "CLUSTER_AUTHORIZATION_FAILED" in as_alice.stderr

    added = odradek(broker, "acls", "add", "--allow-principal", "User:alice", "--operation", "Write", "--topic",
                    "alice-topic", "--command-config", str(properties_file(tmp_path, broker, "admin")))
    assert added.returncode == 0, added.stderr
    assert produce_error(broker, "alice", "alice-topic") is None
    assert produce_error(broker, "alice", "other-topic") == KafkaError.TOPIC_AUTHORIZATION_FAILED
    assert produce_error(broker, "admin", "other-topic") is None  # the super user needs no ACL
