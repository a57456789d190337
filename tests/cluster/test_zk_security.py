"""Protecting ZooKeeper (odradek/cluster/zk_security.py, docs/security.md): against a real ZooKeeper that takes SASL
DIGEST-MD5 logins, brokers with zookeeper.set.acl=true and a Kafka JAAS `Client` section create every znode
writable only by themselves and the SCRAM credentials readable only by themselves, while they work as usual;
`odradek zk set-acls` secures (and opens again) a tree made without set.acl; a wrong password stops a broker at
start with a clear error; the seeds' ZooKeeper clients log in with the same settings. Over TLS (a PEM client
certificate) the brokers' identity is the certificate's subject."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.admin import (AdminClient, NewTopic, ScramCredentialInfo, ScramMechanism,
                                   UserScramCredentialUpsertion)
from kazoo.client import KazooClient
from kazoo.exceptions import NoAuthError
from kazoo.security import ACL, Id, Permissions

from odradek.cluster.membership import ClusterMembershipError
from odradek.cluster.zk_security import ZooKeeperSecurity, jaas_section, java_property
from odradek.config import resolve_broker_config
from odradek.embedded import Cluster, ZooKeeperServer, free_port, zookeeper_available

BROKERS_PASSWORD = "kafka-secret"
ONE_BROKER = {"offsets.topic.replication.factor": 1, "transaction.state.log.replication.factor": 1}
CLIENT_JAAS = """// the brokers' login, as a Kafka user writes it
Client {{
    org.apache.zookeeper.server.auth.DigestLoginModule required
    username="kafka"
    password="{password}";
}};
"""


@pytest.fixture(scope="module")
def sasl_zookeeper(tmp_path_factory):
    """A ZooKeeper taking DIGEST-MD5 logins of kafka (the brokers) and other (someone else) from its JAAS Server
    section; clients that do not log in connect too, so what stops them is the ACLs."""
    if not zookeeper_available():
        pytest.skip("no ZooKeeper server here (Debian's zookeeper package)")
    directory = tmp_path_factory.mktemp("sasl-zookeeper")
    server_jaas = directory / "server.jaas"
    server_jaas.write_text('Server {\n  org.apache.zookeeper.server.auth.DigestLoginModule required\n'
                           f'  user_kafka="{BROKERS_PASSWORD}"\n  user_other="other-secret";\n}};\n')
    with ZooKeeperServer(directory / "zk",
                         extra_config={"authProvider.1": "org.apache.zookeeper.server.auth.SASLAuthenticationProvider"},
                         jvm_options=[f"-Djava.security.auth.login.config={server_jaas}"]) as server:
        yield server


def client_jaas(tmp_path_factory, password: str = BROKERS_PASSWORD) -> str:
    path = tmp_path_factory.mktemp("jaas") / "kafka_client_jaas.conf"
    path.write_text(CLIENT_JAAS.format(password=password))
    return str(path)


def anonymous(connect: str, **login) -> KazooClient:
    client = KazooClient(hosts=connect, **login)
    client.start(timeout=15)
    return client


def as_brokers(connect: str) -> KazooClient:
    """Logged in as the brokers: only they may read the ACLs of the paths only they can read."""
    return anonymous(connect, sasl_options={"mechanism": "DIGEST-MD5", "username": "kafka",
                                            "password": BROKERS_PASSWORD})


def secured_settings(jaas: str) -> dict:
    return {"zookeeper.set.acl": "true", "java.security.auth.login.config": jaas, **ONE_BROKER}


@pytest.fixture(scope="module")
def secured_cluster(sasl_zookeeper, tmp_path_factory):
    jaas = client_jaas(tmp_path_factory)
    with Cluster(1, zookeeper=f"{sasl_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}",
                 data_dir=tmp_path_factory.mktemp("secured"), settings=secured_settings(jaas)) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def guarded(secured_cluster):
    """Topic `guarded` with one record, and SCRAM user alice, made through the secured broker."""
    admin = AdminClient({"bootstrap.servers": secured_cluster.bootstrap_servers})
    admin.create_topics([NewTopic("guarded", 1, 1)])["guarded"].result(15)
    producer = Producer({"bootstrap.servers": secured_cluster.bootstrap_servers, "message.timeout.ms": 10000})
    producer.produce("guarded", b"kept")
    assert producer.flush(15) == 0
    upsertion = UserScramCredentialUpsertion("alice", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, 4096),
                                             b"alice-secret")
    for future in admin.alter_user_scram_credentials([upsertion]).values():
        future.result(15)
    return secured_cluster


def test_brokers_with_set_acl_work_as_usual(guarded):
    consumer = Consumer({"bootstrap.servers": guarded.bootstrap_servers, "group.id": "g",
                         "auto.offset.reset": "earliest"})
    consumer.subscribe(["guarded"])
    try:
        message = None
        for _ in range(30):
            message = consumer.poll(1)
            if message is not None and not message.error():
                break
        assert message is not None and message.value() == b"kept"
    finally:
        consumer.close()
    admin = AdminClient({"bootstrap.servers": guarded.bootstrap_servers})
    described = admin.describe_user_scram_credentials(["alice"])
    assert described["alice"].result(15).scram_credential_infos[0].mechanism == ScramMechanism.SCRAM_SHA_256


def test_a_client_that_is_not_a_broker_cannot_write_nor_read_secrets(guarded):
    zk = anonymous(guarded.zookeeper_connect)
    try:
        assert zk.get("/brokers/topics/guarded")[0]  # readable by all
        with pytest.raises(NoAuthError):
            zk.get("/config/users/alice")  # SCRAM credentials: the brokers only
        with pytest.raises(NoAuthError):
            zk.create("/config/users/mallory", b'{"version":1,"config":{}}')
        with pytest.raises(NoAuthError):
            zk.create("/admin/delete_topics/guarded")
        with pytest.raises(NoAuthError):
            zk.set("/config/topics/guarded", b'{"version":1,"config":{"retention.ms":"1"}}')
        with pytest.raises(NoAuthError):
            zk.delete("/brokers/topics/guarded/partitions/0/state")
    finally:
        zk.stop()
        zk.close()
    other = anonymous(guarded.zookeeper_connect,
                      sasl_options={"mechanism": "DIGEST-MD5", "username": "other", "password": "other-secret"})
    try:
        with pytest.raises(NoAuthError):  # logged in, but not as the brokers
            other.create("/admin/delete_topics/guarded")
    finally:
        other.stop()
        other.close()


def test_znode_acls_are_kafkas(guarded):
    """ZkData.defaultAcls: the brokers' identity ALL plus world READ; sensitive paths without world READ;
    /consumers open."""
    zk = as_brokers(guarded.zookeeper_connect)
    try:
        brokers_all = ACL(Permissions.ALL, Id("sasl", "kafka"))
        world_read = ACL(Permissions.READ, Id("world", "anyone"))
        assert zk.get_acls("/brokers/ids")[0] == [brokers_all, world_read]
        assert zk.get_acls("/config/users")[0] == [brokers_all]
        assert zk.get_acls("/config/brokers")[0] == [brokers_all]
        assert zk.get_acls("/consumers")[0] == [ACL(Permissions.ALL, Id("world", "anyone"))]
        assert zk.get_acls("/brokers/ids/1")[0] == [brokers_all, world_read]  # ephemeral too
    finally:
        zk.stop()
        zk.close()


def test_a_wrong_password_stops_the_broker_with_a_clear_error(sasl_zookeeper, tmp_path_factory):
    cluster = Cluster(1, zookeeper=f"{sasl_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}",
                      data_dir=tmp_path_factory.mktemp("wrong"),
                      settings=secured_settings(client_jaas(tmp_path_factory, "not-the-password")))
    with pytest.raises(RuntimeError) as failure:
        cluster.start(timeout=30)
    cluster.stop()
    assert "refused SASL user 'kafka'" in str(failure.value)


def test_set_acls_secures_a_tree_made_without_set_acl(sasl_zookeeper, tmp_path_factory):
    jaas = client_jaas(tmp_path_factory)
    connect = f"{sasl_zookeeper.connect}/odradek-{uuid.uuid4().hex[:8]}"
    with Cluster(1, zookeeper=connect, data_dir=tmp_path_factory.mktemp("open"),
                 settings={"java.security.auth.login.config": jaas, **ONE_BROKER}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("opened", 1, 1)])["opened"].result(15)
    zk = anonymous(connect)
    try:
        zk.create("/admin/delete_topics/unsafe")  # open: anyone may
        zk.delete("/admin/delete_topics/unsafe")

        def set_acls(mode: str) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "odradek", "zk", "set-acls", "--zookeeper", connect,
                                   "--zookeeper.acl", mode], capture_output=True, text=True, timeout=60,
                                  env={**os.environ, "KAFKA_OPTS": f"-Djava.security.auth.login.config={jaas}"})

        done = set_acls("secure")
        assert done.returncode == 0, done.stderr
        with pytest.raises(NoAuthError):
            zk.create("/admin/delete_topics/opened")
        with pytest.raises(NoAuthError):
            zk.set("/brokers/topics/opened", b"{}")
        assert zk.get("/brokers/topics/opened")[0]
        brokers = as_brokers(connect)
        assert brokers.get_acls("/config/users")[0] == [ACL(Permissions.ALL, Id("sasl", "kafka"))]
        brokers.stop()
        brokers.close()
        assert zk.get_acls("/")[0] == [ACL(Permissions.ALL, Id("sasl", "kafka")),  # the chroot
                                       ACL(Permissions.READ, Id("world", "anyone"))]
        root = anonymous(sasl_zookeeper.connect)
        assert root.get_acls("/")[0] == [ACL(Permissions.ALL, Id("world", "anyone"))]  # outside it: untouched
        root.stop()
        root.close()

        done = set_acls("unsecure")
        assert done.returncode == 0, done.stderr
        zk.create("/admin/delete_topics/opened")
        assert zk.get_acls("/config/users")[0] == [ACL(Permissions.ALL, Id("world", "anyone"))]
    finally:
        zk.stop()
        zk.close()


def test_the_seeds_zookeeper_connector_logs_in(secured_cluster, tmp_path_factory):
    """odradek/client/zookeeper.py's connect takes the same settings as a broker and can then write as one."""
    from odradek.client.zookeeper import connect

    client = connect(secured_cluster.zookeeper_connect, secured_settings(client_jaas(tmp_path_factory)))
    try:
        client.create("/consumers/seeds/ids/x", b"{}", makepath=True)
        assert client.get_acls("/config/users")[0]
        assert client.get("/config/users")[1] is not None  # readable: it is the brokers' identity
    finally:
        client.stop()
        client.close()


# ------------------------------------------------------------------------------------ settings, no ZooKeeper
def test_the_jaas_file_is_found_as_kafka_finds_it(tmp_path):
    jaas = tmp_path / "jaas.conf"
    jaas.write_text("KafkaServer {\n  org.apache.kafka.common.security.plain.PlainLoginModule required\n"
                    '  username="admin" password="a";\n};\n' + CLIENT_JAAS.format(password="p w;}//\\\"q"))
    options = f"-Xmx1g -Djava.security.auth.login.config={jaas} -Dzookeeper.sasl.client=true"
    assert java_property(options, "java.security.auth.login.config") == str(jaas)
    security = ZooKeeperSecurity.from_config({"zookeeper.set.acl": True}, environ={"KAFKA_OPTS": options})
    assert (security.sasl_username, security.sasl_password) == ("kafka", 'p w;}//"q')
    assert jaas_section(jaas.read_text(), "KafkaServer") == {"username": "admin", "password": "a"}
    assert ZooKeeperSecurity.from_config({"zookeeper.sasl.client": False, "java.security.auth.login.config":
                                          str(jaas)}, environ={}).sasl_username is None
    assert ZooKeeperSecurity.from_config({}, environ={"KAFKA_OPTS": options.replace("=true", "=false")}) \
        .sasl_username is None
    other_section = f"{options} -Dzookeeper.sasl.clientconfig=KafkaServer"
    assert ZooKeeperSecurity.from_config({}, environ={"KAFKA_OPTS": other_section}).sasl_username == "admin"
    broker_defaults = resolve_broker_config({"zookeeper.sasl.clientconfig": "KafkaServer"})
    assert ZooKeeperSecurity.from_config(broker_defaults, environ={"KAFKA_OPTS": options}).sasl_username == "admin"
    assert ZooKeeperSecurity.from_config(resolve_broker_config({}), environ={
        "KAFKA_OPTS": options.replace("=true", "=false")}).sasl_username is None  # the -D, not a default, decides


def test_set_acl_without_an_identity_is_refused():
    with pytest.raises(ClusterMembershipError, match="zookeeper.set.acl is true"):
        ZooKeeperSecurity.from_config({"zookeeper.set.acl": "true"}, environ={})


def test_tls_takes_pem_and_refuses_other_keystore_types():
    security = ZooKeeperSecurity.from_config({"zookeeper.ssl.client.enable": "true", "zookeeper.set.acl": "true",
                                              "zookeeper.ssl.keystore.location": "/k.pem",
                                              "zookeeper.ssl.keystore.type": "PEM",
                                              "zookeeper.ssl.truststore.location": "/ca.pem"}, environ={})
    assert security.kazoo_arguments() == {"use_ssl": True, "certfile": "/k.pem", "keyfile": "/k.pem",
                                          "keyfile_password": None, "ca": "/ca.pem", "verify_certs": True,
                                          "check_hostname": True}
    with pytest.raises(ClusterMembershipError, match="PEM"):
        ZooKeeperSecurity.from_config({"zookeeper.ssl.client.enable": "true",
                                       "zookeeper.ssl.keystore.location": "/k.jks",
                                       "zookeeper.ssl.keystore.type": "JKS"}, environ={})


# ------------------------------------------------------------------------------------------- TLS to ZooKeeper
@pytest.fixture(scope="module")
def tls_zookeeper(tmp_path_factory):
    """A ZooKeeper with a TLS port (Netty, PEM stores) that takes a client certificate of our CA as the client's
    identity (x509:<subject>), and its plain port for clients that show none."""
    from tests.security.certificates import make_certificates

    if not zookeeper_available():
        pytest.skip("no ZooKeeper server here (Debian's zookeeper package)")
    certificates = make_certificates(tmp_path_factory.mktemp("zk-certificates"))
    secure_port = free_port()
    server = ZooKeeperServer(tmp_path_factory.mktemp("tls-zookeeper"), extra_config={
        "secureClientPort": secure_port, "serverCnxnFactory": "org.apache.zookeeper.server.NettyServerCnxnFactory",
        "ssl.keyStore.location": certificates.path("broker-keystore.pem"), "ssl.keyStore.type": "PEM",
        "ssl.trustStore.location": certificates.path("ca.pem"), "ssl.trustStore.type": "PEM",
        "authProvider.x509": "org.apache.zookeeper.server.auth.X509AuthenticationProvider"})
    keystore = certificates.directory / "client-keystore.pem"
    keystore.write_text(Path(certificates.path("client.key")).read_text()
                        + Path(certificates.path("client.pem")).read_text())
    with server:
        yield server, f"127.0.0.1:{secure_port}", {
            "zookeeper.ssl.client.enable": "true",
            "zookeeper.clientCnxnSocket": "org.apache.zookeeper.ClientCnxnSocketNetty",
            "zookeeper.ssl.keystore.location": str(keystore), "zookeeper.ssl.keystore.type": "PEM",
            "zookeeper.ssl.truststore.location": certificates.path("ca.pem"), "zookeeper.ssl.truststore.type": "PEM"}


def test_brokers_over_tls_protect_znodes_with_their_certificate(tls_zookeeper, tmp_path_factory):
    server, secure_connect, tls = tls_zookeeper
    chroot = f"/odradek-{uuid.uuid4().hex[:8]}"
    with Cluster(1, zookeeper=secure_connect + chroot, data_dir=tmp_path_factory.mktemp("tls"),
                 settings={"zookeeper.set.acl": "true", **tls, **ONE_BROKER}) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic("over-tls", 1, 1)])["over-tls"].result(15)
        zk = anonymous(server.connect + chroot)
        try:
            assert zk.get_acls("/brokers/ids")[0] == [
                ACL(Permissions.ALL, Id("x509", "CN=alice,OU=eng,O=acme,C=DE")),
                ACL(Permissions.READ, Id("world", "anyone"))]
            with pytest.raises(NoAuthError):
                zk.create("/admin/delete_topics/over-tls")
            with pytest.raises(NoAuthError):
                zk.get("/config/users")
        finally:
            zk.stop()
            zk.close()
