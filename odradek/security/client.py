"""The client side of TLS and SASL for the Kafka connections this process opens itself as a client
(odradek.client.connection, as the Spark source's read tasks and SimpleConsumer's direct calls do): what a
connection needs, read from the settings a confluent-kafka client of the same cluster takes, and SASL's client
exchange, which a broker's own connections to the other brokers (odradek.cluster.peer) log in with too.

The settings are librdkafka's names, which odradek.client.properties.librdkafka_settings makes from Kafka's Java
client properties (sasl.jaas.config, PEM ssl.truststore.* and ssl.keystore.*), so one properties file or one set
of Spark kafka.* options configures both the confluent-kafka clients and these connections:
- security.protocol: PLAINTEXT (the default), SSL, SASL_PLAINTEXT, SASL_SSL (any case, as both clients take it).
- sasl.mechanism (or librdkafka's sasl.mechanisms): PLAIN, SCRAM-SHA-256 or SCRAM-SHA-512, with sasl.username and
  sasl.password. GSSAPI (the default of both clients) and OAUTHBEARER are not spoken: a ValueError says so.
- TLS: the trust store is ssl.ca.location (a PEM file, or a directory of hashed certificates) and/or ssl.ca.pem
  (inline PEM), the system's CAs without either; a client certificate (for ssl.client.auth=required) is
  ssl.certificate.location with ssl.key.location (one PEM file may hold both, as Kafka's PEM keystore does) or
  inline ssl.certificate.pem with ssl.key.pem, its key under ssl.key.password. ssl.endpoint.identification.algorithm
  is https by default (the broker's certificate must name the host it was reached at) or none;
  enable.ssl.certificate.verification=false accepts any certificate. A PKCS12 keystore (ssl.keystore.location) is
  not read here: a ValueError asks for PEM.
A ValueError's message starts with the setting it is about and never holds a password.

`sasl_tokens` is the client's half of a SASL exchange, sans-IO: a generator that yields each token to carry in a
SaslAuthenticate request and is sent the broker's answer to it, for any SaslLogin (a ClientSecurity, or
odradek.security.inter_broker's InterBrokerSecurity): PLAIN's one message (RFC 4616), SCRAM's client-first and
client-final (odradek.security.scram.ScramClient), the server's final signature checked (ScramError when it does
not prove the server knows the credential).
"""

from __future__ import annotations

import dataclasses
import os
import ssl
from collections.abc import Generator, Mapping
from typing import Protocol

from odradek.security.scram import MECHANISMS as SCRAM_MECHANISMS, ScramClient
from odradek.security.tls import load_inline_cert_chain

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
MECHANISMS = ("PLAIN", *SCRAM_MECHANISMS)


@dataclasses.dataclass(frozen=True)
class ClientSecurity:
    """How to secure one client connection: `tls` (None: plain TCP) and the SASL login (mechanism None: none)."""

    protocol: str = "PLAINTEXT"
    tls: ssl.SSLContext | None = None
    mechanism: str | None = None
    username: str = ""
    password: str = dataclasses.field(default="", repr=False)


PLAINTEXT = ClientSecurity()


class SaslLogin(Protocol):
    """What a SASL exchange needs of a login: its mechanism (PLAIN or SCRAM-SHA-256/512) and credential."""

    mechanism: str | None
    username: str
    password: str


def client_security(settings: Mapping[str, str]) -> ClientSecurity:
    """The ClientSecurity of librdkafka-named settings (other settings are ignored); ValueError for what is wrong
    or cannot be done here."""
    protocol = str(settings.get("security.protocol", "PLAINTEXT")).strip().upper()
    if protocol not in PROTOCOLS:
        raise ValueError(f"security.protocol: {protocol!r} is not one of {', '.join(PROTOCOLS)}")
    tls = _tls_context(settings) if protocol in ("SSL", "SASL_SSL") else None
    if not protocol.startswith("SASL_"):
        return ClientSecurity(protocol, tls)
    mechanism = str(settings.get("sasl.mechanism", settings.get("sasl.mechanisms", "GSSAPI"))).strip().upper()
    if mechanism not in MECHANISMS:
        raise ValueError(f"sasl.mechanism: {mechanism} is not spoken by this client; use one of "
                         f"{', '.join(MECHANISMS)}")
    username, password = str(settings.get("sasl.username", "")), str(settings.get("sasl.password", ""))
    if not username:
        raise ValueError(f"sasl.username: required for {protocol} with {mechanism} (or sasl.jaas.config's "
                         "username and password)")
    return ClientSecurity(protocol, tls, mechanism, username, password)


def _tls_context(settings: Mapping[str, str]) -> ssl.SSLContext:
    def setting(key: str) -> str:
        return str(settings.get(key, "") or "")

    if setting("ssl.keystore.location"):
        raise ValueError("ssl.keystore.location: a PKCS12 keystore cannot be read by this client; give a PEM "
                         "keystore (ssl.keystore.type=PEM) or ssl.certificate.location and ssl.key.location")
    algorithm = setting("ssl.endpoint.identification.algorithm").lower() or "https"
    if algorithm not in ("https", "none"):
        raise ValueError(f"ssl.endpoint.identification.algorithm: {algorithm!r} is not https or none")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    verify = setting("enable.ssl.certificate.verification").lower() != "false"
    context.check_hostname = verify and algorithm == "https"
    context.verify_mode = ssl.CERT_REQUIRED if verify else ssl.CERT_NONE
    location, inline = setting("ssl.ca.location"), setting("ssl.ca.pem")
    if location:
        directory = os.path.isdir(location)
        _load("ssl.ca.location", context.load_verify_locations, cafile=None if directory else location,
              capath=location if directory else None)
    if inline:
        _load("ssl.ca.pem", context.load_verify_locations, cadata=inline)
    if not location and not inline:
        context.load_default_certs()
    password = setting("ssl.key.password") or None
    if setting("ssl.certificate.location"):
        _load("ssl.certificate.location", context.load_cert_chain, setting("ssl.certificate.location"),
              setting("ssl.key.location") or None, password)
    elif setting("ssl.certificate.pem") or setting("ssl.key.pem"):
        _load("ssl.certificate.pem", load_inline_cert_chain, context, setting("ssl.key.pem"),
              setting("ssl.certificate.pem"), password)
    return context


def _load(key: str, load, *args, **kwargs) -> None:
    """One file or PEM text into the context; what cannot be loaded is a ValueError naming its setting."""
    try:
        load(*args, **kwargs)
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"{key}: cannot load it ({exc})") from None


def sasl_tokens(security: SaslLogin) -> Generator[bytes, bytes, None]:
    """The client's tokens of one SASL exchange: each yielded token goes to the broker, whose answer is sent in."""
    if security.mechanism == "PLAIN":
        yield b"\0" + security.username.encode() + b"\0" + security.password.encode()
        return
    scram = ScramClient(security.mechanism, security.username, security.password)
    server_first = yield scram.first()
    server_final = yield scram.final(server_first)
    scram.verify(server_final)
