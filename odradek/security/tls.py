"""TLS contexts for SSL and SASL_SSL listeners, built from Kafka's PEM settings (the server's, and the client's a
broker connects to other brokers with), and the principal a client certificate names.

Kafka's PEM keystore: ssl.keystore.type=PEM with ssl.keystore.location (a file holding the private key and the
certificate chain; the key may be encrypted under ssl.key.password), or the same inline in
ssl.keystore.key / ssl.keystore.certificate.chain. The trust store: ssl.truststore.type=PEM with
ssl.truststore.location or inline ssl.truststore.certificates. ssl.client.auth=required|requested|none. Each key can
be given per listener as listener.name.<name>.<key>. Java's JKS/PKCS12 stores are not read: PEM only.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from collections.abc import Mapping
from typing import Any

from odradek.config import Listener
from odradek.errors import ErrorCode, KafkaError

_CLIENT_AUTH = {"required": ssl.CERT_REQUIRED, "requested": ssl.CERT_OPTIONAL, "none": ssl.CERT_NONE}
_PROTOCOL_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}

# Java's X500Principal.getName() (RFC 2253) keyword for each attribute Python names; others keep Python's name.
_DN_KEYWORDS = {"commonName": "CN", "organizationalUnitName": "OU", "organizationName": "O", "localityName": "L",
                "stateOrProvinceName": "ST", "countryName": "C", "streetAddress": "STREET",
                "domainComponent": "DC", "userId": "UID", "emailAddress": "EMAILADDRESS"}


def _config_error(listener: Listener, message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, f"listener {listener.name}: {message}")


def server_context(listener: Listener, props: Mapping[str, Any]) -> ssl.SSLContext:
    """The server-side SSLContext of one TLS listener from its ssl.* settings."""
    context = _context(listener, props, ssl.PROTOCOL_TLS_SERVER, keystore_required=True)
    client_auth = str(listener.setting(props, "ssl.client.auth", "none")).lower()
    if client_auth not in _CLIENT_AUTH:
        raise _config_error(listener, f"ssl.client.auth={client_auth} is not one of required, requested, none")
    context.verify_mode = _CLIENT_AUTH[client_auth]
    return context


def client_context(listener: Listener, props: Mapping[str, Any]) -> ssl.SSLContext:
    """The SSLContext a broker connects to other brokers' TLS listener `listener` with (inter.broker.listener.name):
    the same listener's trust store verifies them (the system's CAs without one), its keystore, if any, is this
    broker's client certificate (for ssl.client.auth=required), and ssl.endpoint.identification.algorithm (Kafka's
    default https; empty turns it off) checks that their certificate names the address they are reached at."""
    context = _context(listener, props, ssl.PROTOCOL_TLS_CLIENT, keystore_required=False)
    trusted = listener.setting(props, "ssl.truststore.location") or listener.setting(props,
                                                                                     "ssl.truststore.certificates")
    if not trusted:
        context.load_default_certs()
    context.check_hostname = bool(str(listener.setting(props, "ssl.endpoint.identification.algorithm", "https")))
    return context


def _context(listener: Listener, props: Mapping[str, Any], protocol: int, *, keystore_required: bool
             ) -> ssl.SSLContext:
    """An SSLContext with the listener's protocol versions, keystore and trust store."""
    def setting(key: str, default: Any = None) -> Any:
        return listener.setting(props, key, default)

    for key in ("ssl.keystore.type", "ssl.truststore.type"):
        if str(setting(key, "PEM")).upper() != "PEM":
            raise _config_error(listener, f"{key}={setting(key)} is not supported, only PEM")
    context = ssl.SSLContext(protocol)
    versions = [_PROTOCOL_VERSIONS[v.strip()] for v in str(setting("ssl.enabled.protocols", "TLSv1.2,TLSv1.3"))
                .split(",") if v.strip() in _PROTOCOL_VERSIONS]
    if not versions:
        raise _config_error(listener, "ssl.enabled.protocols names none of TLSv1.2, TLSv1.3")
    context.minimum_version, context.maximum_version = min(versions), max(versions)
    password = setting("ssl.key.password")
    location, inline_key = setting("ssl.keystore.location"), setting("ssl.keystore.key")
    try:
        if inline_key:
            load_inline_cert_chain(context, inline_key, setting("ssl.keystore.certificate.chain", ""), password)
        elif location:
            context.load_cert_chain(location, password=password)
        elif keystore_required:
            raise _config_error(listener, "a TLS listener needs ssl.keystore.location or ssl.keystore.key")
        trusted_file, trusted_inline = setting("ssl.truststore.location"), setting("ssl.truststore.certificates")
        if trusted_file:
            context.load_verify_locations(cafile=trusted_file)
        if trusted_inline:
            context.load_verify_locations(cadata=trusted_inline)
    except (OSError, ssl.SSLError) as exc:
        raise _config_error(listener, f"cannot load its keys or certificates: {exc}") from None
    return context


def load_inline_cert_chain(context: ssl.SSLContext, key: str, chain: str, password: str | None) -> None:
    """ssl.keystore.key / ssl.keystore.certificate.chain: ssl loads keys only from files, so through a private
    temporary file removed at once."""
    descriptor, path = tempfile.mkstemp(suffix=".pem")
    try:
        with os.fdopen(descriptor, "w") as pem:
            pem.write(key.strip() + "\n" + chain.strip() + "\n")
        context.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _escape(value: str) -> str:
    """RFC 2253 escaping as Java writes it: the special characters, a leading '#' or space, a trailing space."""
    escaped = "".join("\\" + ch if ch in ',+"\\<>;' else ch for ch in value)
    if escaped.endswith(" "):
        escaped = escaped[:-1] + "\\ "
    return "\\" + escaped if escaped.startswith(("#", " ")) else escaped


def principal_of_certificate(certificate: Mapping[str, Any]) -> str:
    """"User:<subject DN>" as Kafka's default SSL principal builder writes it (X500Principal.getName():
    RFC 2253, last RDN first, e.g. "User:CN=alice,OU=eng,O=acme,C=DE")."""
    names = [
        "+".join(f"{_DN_KEYWORDS.get(attribute, attribute)}={_escape(value)}" for attribute, value in rdn)
        for rdn in reversed(certificate.get("subject", ()))
    ]
    return "User:" + ",".join(names)
