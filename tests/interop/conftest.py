"""What the Java-ecosystem tests share: Odradek three ways a Java user meets it (the module's single broker is
tests/conftest.py's `broker`), a three-broker cluster with replication factor 3 and a broker whose only client
listener is SASL_SSL with ACLs enforced, and the client properties file a Java client or tool is given for it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.embedded import BrokerProcess
from tests.cluster.conftest import new_cluster, python_defects
from tests.security.conftest import certificates, free_port  # noqa: F401 (certificates: a fixture used here)

RF3_SETTINGS = {"default.replication.factor": 3, "min.insync.replicas": 2, "offsets.topic.replication.factor": 3,
                "transaction.state.log.replication.factor": 3, "transaction.state.log.min.isr": 2,
                "num.partitions": 3}


@pytest.fixture(scope="module")
def cluster3(odradek_zookeeper, tmp_path_factory):
    """Three `odradek serve` brokers, topics made with replication factor 3 and min.insync.replicas 2 by default."""
    with new_cluster(odradek_zookeeper, tmp_path_factory, "interop-cluster", settings=RF3_SETTINGS) as cluster:
        yield cluster
    assert not python_defects(cluster)


SCRAM_USERS = {"admin": "admin-secret", "alice": "alice-secret"}


@dataclass
class SecuredBroker:
    """A broker whose clients come over SASL_SSL with SCRAM-SHA-512, ACLs enforced and User:admin the super user.
    SASL_PLAINTEXT with PLAIN (admin's password in the broker's JAAS config) is how the set-up made the SCRAM users;
    PLAINTEXT is there for the fixture's ready line and, being User:ANONYMOUS, may do nothing."""

    process: BrokerProcess
    sasl_ssl_port: int
    ca: Path

    @property
    def bootstrap_servers(self) -> str:
        return f"127.0.0.1:{self.sasl_ssl_port}"

    def client_properties(self, user: str) -> dict[str, str]:
        """Java client properties of `user` for the SASL_SSL listener."""
        return {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                                    f'username="{user}" password="{SCRAM_USERS[user]}";',
                "ssl.truststore.type": "PEM", "ssl.truststore.location": str(self.ca)}

    def librdkafka_config(self, user: str) -> dict[str, str]:
        """`user`'s settings for a confluent-kafka client of the SASL_SSL listener (bootstrap.servers included)."""
        return {"bootstrap.servers": self.bootstrap_servers, "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": user, "sasl.password": SCRAM_USERS[user],
                "ssl.ca.location": str(self.ca)}

    def properties_file(self, directory: Path, user: str) -> Path:
        """client_properties(user) as the --command-config file Kafka's tools take."""
        path = directory / f"{user}.properties"
        path.write_text("".join(f"{key}={value}\n" for key, value in self.client_properties(user).items()))
        return path


@pytest.fixture(scope="module")
def secured_broker(tmp_path_factory, certificates) -> SecuredBroker:
    """SASL_SSL with SCRAM users admin and alice made at start (odradek users add before serving), ACLs enforced
    with allow.everyone.if.no.acl.found=false."""
    import subprocess
    import sys

    data_dir = tmp_path_factory.mktemp("interop-secured") / "data"
    port, setup_port = free_port(), free_port()
    settings = {
        "group.initial.rebalance.delay.ms": 0,
        "listeners": f"PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:{port},SASL_PLAINTEXT://127.0.0.1:{setup_port}",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": certificates.path("broker-keystore.pem"),
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            f'org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="{SCRAM_USERS["admin"]}";',
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "super.users": "User:admin", "allow.everyone.if.no.acl.found": "false",
    }
    process = BrokerProcess(data_dir, settings=settings)
    process.start()
    setup = data_dir.parent / "setup.properties"
    setup.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                     f"sasl.username=admin\nsasl.password={SCRAM_USERS['admin']}\n")
    try:
        for user, password in SCRAM_USERS.items():
            subprocess.run([sys.executable, "-m", "odradek", "users", "add", user, "--password", password,
                            "--mechanism", "SCRAM-SHA-512", "--bootstrap-server", f"127.0.0.1:{setup_port}",
                            "--command-config", setup], check=True, capture_output=True, text=True, timeout=60)
        yield SecuredBroker(process, port, Path(certificates.path("ca.pem")))
    finally:
        process.stop()
