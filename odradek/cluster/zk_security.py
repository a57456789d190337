"""Protecting the cluster's ZooKeeper: how a client authenticates to it and which ACL every znode we create gets.

What this owns: reading Kafka's ZooKeeper client settings (zookeeper.set.acl, zookeeper.sasl.client,
zookeeper.sasl.clientconfig, zookeeper.ssl.*) and the JAAS file a Kafka user already has, turning them into
kazoo's arguments, and the one choice of ACL per path (`ZooKeeperSecurity.acl_for`), made as Kafka's
ZkData.defaultAcls makes it. Every ZooKeeper client Odradek opens (brokers, `odradek zk`, the seeds' ZooKeeper
connectors) is built by odradek/cluster/zookeeper.py's connect_client from one of these, so nothing else picks ACLs.

SASL is DIGEST-MD5 with the username and password of the JAAS file's `Client` section (or the section
zookeeper.sasl.clientconfig names), found as Kafka finds it: `-Djava.security.auth.login.config=PATH` in
$KAFKA_OPTS; the `java.security.auth.login.config` setting names it too. TLS takes PEM files (kazoo's format):
zookeeper.ssl.keystore.type=PEM with the keystore location holding the certificate and its key; the truststore is
the CA certificate(s) in PEM. With zookeeper.set.acl=true every znode gets `auth` ALL (ZooKeeper turns it into the
creating client's identities: sasl:<username>, or x509:<certificate subject>) plus world READ, except
/config/users (SCRAM credentials), /config/brokers and /delegation_token/tokens (readable only by the brokers) and
/consumers (left open: old consumers write their offsets there); without it every znode is world ALL.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Any, Mapping

from kazoo.client import KazooClient, TransactionRequest
from kazoo.security import CREATOR_ALL_ACL, OPEN_ACL_UNSAFE, READ_ACL_UNSAFE

from odradek.cluster.membership import ClusterMembershipError
from odradek.security.sasl import jaas_options

JAAS_PROPERTY = "java.security.auth.login.config"
SYSTEM_PROPERTIES = (JAAS_PROPERTY, "zookeeper.sasl.client", "zookeeper.sasl.clientconfig")  # also read from -D
SENSITIVE_ROOTS = ("/config/users", "/config/brokers", "/delegation_token/tokens")  # ZkData.sensitiveRootPaths
OPEN_PATHS = ("/consumers",)  # ZkData.defaultAcls leaves the old consumers' path open
SECURE_ACL = CREATOR_ALL_ACL + READ_ACL_UNSAFE
SENSITIVE_ACL = CREATOR_ALL_ACL
# kazoo reads PEM only; Kafka's other keystore types are refused with this advice
_PEM_ADVICE = ("convert it to PEM (openssl pkcs12 -in store.p12 -out store.pem -nodes; keytool -importkeystore "
               "to PKCS12 first for JKS) and set the type to PEM")
_JAAS_SECTION = re.compile(r'([\w.-]+)\s*\{((?:[^}"]|"(?:[^"\\]|\\.)*")*)\}\s*;')
_JAAS_COMMENT = re.compile(r'"(?:[^"\\]|\\.)*"|//[^\n]*|/\*.*?\*/', re.S)  # quoted strings kept


def is_sensitive(path: str) -> bool:
    return any(path == root or path.startswith(root + "/") for root in SENSITIVE_ROOTS)


def jaas_section(text: str, name: str) -> dict[str, str] | None:
    """The options of section `name` in a JAAS file (`Name { Module flag k="v" ...; };`), None without one."""
    text = _JAAS_COMMENT.sub(lambda match: match.group(0) if match.group(0).startswith('"') else "", text)
    for match in _JAAS_SECTION.finditer(text):
        if match.group(1) == name:
            return jaas_options(match.group(2))
    return None


def java_property(java_options: str, name: str) -> str | None:
    """-D<name>=VALUE in a JVM option string such as $KAFKA_OPTS."""
    for word in shlex.split(java_options or ""):
        if word.startswith(f"-D{name}="):
            return word.split("=", 1)[1]
    return None


@dataclass(frozen=True)
class ZooKeeperSecurity:
    """How to reach ZooKeeper and what ACLs to write (see the module docstring); the default is Kafka's: no
    authentication, every znode open."""

    set_acl: bool = False
    sasl_username: str | None = None
    sasl_password: str | None = None
    use_ssl: bool = False
    certfile: str | None = None
    keyfile: str | None = None
    keyfile_password: str | None = None
    ca: str | None = None
    verify_hostname: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any], environ: Mapping[str, str] = os.environ) -> "ZooKeeperSecurity":
        """From broker (or client) settings with Kafka's names and defaults; a missing key takes its default. The
        JAAS file and zookeeper.sasl.* may also be JVM system properties in $KAFKA_OPTS, as Kafka reads them."""
        java_options = environ.get("KAFKA_OPTS", "")

        def get(key: str, default: Any = None) -> Any:
            value = config.get(key)
            if value in (None, "") and key in SYSTEM_PROPERTIES:
                value = java_property(java_options, key)
            return default if value in (None, "") else value

        def flag(key: str, default: bool) -> bool:
            value = get(key, default)
            return value if isinstance(value, bool) else str(value).strip().lower() == "true"

        username = password = None
        jaas_file = get(JAAS_PROPERTY)
        section_name = get("zookeeper.sasl.clientconfig", "Client")
        if jaas_file and flag("zookeeper.sasl.client", True):
            try:
                with open(jaas_file, encoding="utf-8") as file:
                    text = file.read()
            except OSError as exc:
                raise ClusterMembershipError(f"cannot read the JAAS file {jaas_file} ({JAAS_PROPERTY}): {exc}") from None
            section = jaas_section(text, section_name)
            if section is not None:
                username, password = section.get("username"), section.get("password")
                if username is None or password is None:
                    raise ClusterMembershipError(f"JAAS section {section_name} in {jaas_file} has no username and "
                                                 "password (DigestLoginModule required username=\"...\" "
                                                 "password=\"...\";)")
        use_ssl = flag("zookeeper.ssl.client.enable", False)
        certfile = keyfile = ca = None
        if use_ssl:
            for kind in ("keystore", "truststore"):
                kind_type = str(get(f"zookeeper.ssl.{kind}.type", "PEM")).upper()
                if get(f"zookeeper.ssl.{kind}.location") and kind_type != "PEM":
                    raise ClusterMembershipError(f"zookeeper.ssl.{kind}.type={kind_type}: ZooKeeper's client here "
                                                 f"reads PEM files only; {_PEM_ADVICE}")
            certfile = keyfile = get("zookeeper.ssl.keystore.location")
            ca = get("zookeeper.ssl.truststore.location")
        security = cls(set_acl=flag("zookeeper.set.acl", False), sasl_username=username, sasl_password=password,
                       use_ssl=use_ssl, certfile=certfile, keyfile=keyfile,
                       keyfile_password=get("zookeeper.ssl.keystore.password"), ca=ca,
                       verify_hostname=str(config.get("zookeeper.ssl.endpoint.identification.algorithm", "HTTPS")
                                           or "").upper() == "HTTPS")
        if security.set_acl and not security.authenticates:
            raise ClusterMembershipError(
                f"zookeeper.set.acl is true, but neither a JAAS file with a {section_name} section "
                f"(-D{JAAS_PROPERTY}=PATH in KAFKA_OPTS) nor a client certificate (zookeeper.ssl.client.enable, "
                "zookeeper.ssl.keystore.location) says who this client is to ZooKeeper")
        return security

    @property
    def authenticates(self) -> bool:
        return self.sasl_username is not None or (self.use_ssl and self.certfile is not None)

    def acl_for(self, path: str) -> list:
        """The ACL a znode at this path (inside the chroot, or the chroot itself) is created with."""
        if not self.set_acl or path in OPEN_PATHS:
            return list(OPEN_ACL_UNSAFE)
        return list(SENSITIVE_ACL if is_sensitive(path) else SECURE_ACL)

    def kazoo_arguments(self) -> dict[str, Any]:
        """KazooClient's keyword arguments for authenticating (SASL DIGEST-MD5) and TLS."""
        arguments: dict[str, Any] = {}
        if self.sasl_username is not None:
            arguments["sasl_options"] = {"mechanism": "DIGEST-MD5", "username": self.sasl_username,
                                         "password": self.sasl_password}
        if self.use_ssl:
            arguments.update(use_ssl=True, certfile=self.certfile, keyfile=self.keyfile,
                             keyfile_password=self.keyfile_password, ca=self.ca, verify_certs=True,
                             check_hostname=self.verify_hostname)
        return arguments


class SecuredKazooClient(KazooClient):
    """A kazoo client whose creates without an explicit ACL (create, ensure_path, transactions) take
    `security.acl_for(path)`, and which authenticates as `security` says."""

    def __init__(self, security: ZooKeeperSecurity, **arguments: Any):
        super().__init__(**arguments, **security.kazoo_arguments())
        self.security = security

    def create_async(self, path, value=b"", acl=None, *args, **kwargs):
        return super().create_async(path, value, acl or self.security.acl_for(path), *args, **kwargs)

    def transaction(self) -> TransactionRequest:
        return _SecuredTransaction(self)


class _SecuredTransaction(TransactionRequest):
    def create(self, path, value=b"", acl=None, ephemeral=False, sequence=False):
        return super().create(path, value, acl or self.client.security.acl_for(path), ephemeral, sequence)
