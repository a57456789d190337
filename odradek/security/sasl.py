"""The server side of SASL (KIP-152): one SaslSession per connection on a SASL listener, PLAIN and SCRAM.

A session goes handshake (the client names a mechanism) -> tokens (the mechanism's exchange) -> authenticated.
SaslHandshake v1 is followed by SaslAuthenticate requests; v0 (what clients before KIP-152 send) by bare
size-prefixed tokens without any Kafka header, which the network shell hands to `step` directly (`raw_tokens`).
A failure raises SaslAuthenticationFailed carrying Kafka's message: PLAIN's own ("Authentication failed: Invalid
username or password"), for SCRAM and for tokens a mechanism cannot parse the generic "Authentication failed
during authentication due to invalid credentials with SASL mechanism X", which names nothing a prober could use.

PLAIN users come from Kafka's JAAS-style setting (`listener.name.<listener>.plain.sasl.jaas.config`, or the same
key without the listener prefix) with PlainLoginModule's user_<name>="<password>" entries; passwords are compared
with hmac.compare_digest. SCRAM credentials come from a lookup (the catalogue).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Callable, Mapping
from typing import Any

from odradek.config import Listener
from odradek.errors import ErrorCode, KafkaError
from odradek.security.scram import ScramCredential, ScramError, ScramServer

SERVED_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
DEFAULT_ENABLED_MECHANISMS = "GSSAPI"  # Kafka's default sasl.enabled.mechanisms; GSSAPI itself is not served
API_VERSIONS_KEY, SASL_HANDSHAKE_KEY, SASL_AUTHENTICATE_KEY = 18, 17, 36
_JAAS_OPTION = re.compile(r'([A-Za-z0-9_.\-]+)\s*=\s*(?:"((?:[^"\\]|\\.)*)"|([^\s;"]+))')


class SaslAuthenticationFailed(Exception):
    """The exchange failed; str() is the message the client gets with SASL_AUTHENTICATION_FAILED."""


def generic_failure(mechanism: str) -> SaslAuthenticationFailed:
    return SaslAuthenticationFailed(
        f"Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}")


def jaas_options(text: str) -> dict[str, str]:
    """The options of a JAAS login module entry: `Module required key="value" key2=value2;`."""
    return {key: (quoted.replace('\\"', '"').replace("\\\\", "\\") if quoted is not None else bare)
            for key, quoted, bare in _JAAS_OPTION.findall(text)}


def plain_users(listener: Listener, props: Mapping[str, Any]) -> dict[str, str]:
    """PlainLoginModule's user_<name>="<password>" entries for this listener."""
    options = jaas_options(str(listener.setting(props, "plain.sasl.jaas.config", "")))
    return {key[len("user_"):]: value for key, value in options.items() if key.startswith("user_")}


def enabled_mechanisms(listener: Listener, props: Mapping[str, Any]) -> list[str]:
    """sasl.enabled.mechanisms of a SASL listener; a mechanism we cannot serve is a configuration error."""
    text = str(listener.setting(props, "sasl.enabled.mechanisms", DEFAULT_ENABLED_MECHANISMS))
    mechanisms = [m.strip().upper() for m in text.split(",") if m.strip()]
    unknown = [m for m in mechanisms if m not in SERVED_MECHANISMS]
    if unknown or not mechanisms:
        raise KafkaError(ErrorCode.INVALID_CONFIG,
                         f"listener {listener.name}: sasl.enabled.mechanisms {text!r} names {unknown or 'nothing'}; "
                         f"served mechanisms are {', '.join(SERVED_MECHANISMS)}")
    return mechanisms


class PlainServer:
    """RFC 4616: one message, authzid NUL authcid NUL password."""

    def __init__(self, users: Mapping[str, str]):
        self.users = users
        self.user: str | None = None
        self.done = False

    def step(self, message: bytes) -> bytes:
        parts = message.split(b"\0")
        if len(parts) != 3 or self.done:
            raise generic_failure("PLAIN")
        try:
            authzid, user, password = (part.decode() for part in parts)
        except UnicodeDecodeError:
            raise generic_failure("PLAIN") from None
        if not user:
            raise SaslAuthenticationFailed("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationFailed("Authentication failed: password not specified")
        expected = self.users.get(user)
        # compared even for an unknown user, so the answer takes as long either way
        matches = hmac.compare_digest((expected if expected is not None else "\0" + password).encode(),
                                      password.encode())
        if expected is None or not matches:
            raise SaslAuthenticationFailed("Authentication failed: Invalid username or password")
        if authzid and authzid != user:
            raise SaslAuthenticationFailed(
                "Authentication failed: Client requested an authorization id that is different from username")
        self.user, self.done = user, True
        return b""


_HANDSHAKE_KEYS = frozenset({API_VERSIONS_KEY, SASL_HANDSHAKE_KEY})
_TOKEN_KEYS = frozenset({SASL_AUTHENTICATE_KEY})


class SaslSession:
    """The SASL state of one connection. `handshake` answers SaslHandshake with an error code; `step` runs one
    token through the chosen mechanism and returns its answer, and `principal` once the exchange is done."""

    def __init__(self, mechanisms: list[str], users: Mapping[str, str],
                 scram_lookup: Callable[[str, str], ScramCredential | None], lifetime_ms: int = 0):
        self.mechanisms = mechanisms
        self.users = users
        self.scram_lookup = scram_lookup
        self.lifetime_ms = lifetime_ms  # connections.max.reauth.ms (KIP-368); 0: sessions do not expire
        self.mechanism: str | None = None
        self.raw_tokens = False  # after SaslHandshake v0: bare tokens, no Kafka framing
        self.authenticated_as: str | None = None  # while re-authenticating: the principal it must keep
        self._server: PlainServer | ScramServer | None = None

    def reauthenticate(self) -> None:
        """KIP-368: a new exchange on an authenticated connection, which must keep its mechanism and principal."""
        self.authenticated_as, self._server = self.principal, None

    def handshake(self, mechanism: str, version: int) -> ErrorCode:
        if self._server is not None:
            return ErrorCode.ILLEGAL_SASL_STATE
        if mechanism not in self.mechanisms or (self.authenticated_as is not None and mechanism != self.mechanism):
            return ErrorCode.UNSUPPORTED_SASL_MECHANISM
        self.mechanism = mechanism
        self._server = (PlainServer(self.users) if mechanism == "PLAIN"
                        else ScramServer(mechanism, self.scram_lookup))
        self.raw_tokens = version == 0
        return ErrorCode.NONE

    @property
    def allowed_api_keys(self) -> frozenset:
        """What may come now, as Kafka's SaslServerAuthenticator: ApiVersions and SaslHandshake until a mechanism
        is chosen, then SaslAuthenticate only."""
        return _TOKEN_KEYS if self._server is not None else _HANDSHAKE_KEYS

    def step(self, token: bytes) -> bytes:
        try:
            answer = self._server.step(token)
        except ScramError:
            raise generic_failure(self.mechanism) from None
        principal = self.principal
        if principal is not None and self.authenticated_as not in (None, principal):
            raise SaslAuthenticationFailed(
                f"Cannot change principals during re-authentication from {self.authenticated_as}: {principal}")
        return answer

    @property
    def principal(self) -> str | None:
        """"User:<name>" once the exchange has succeeded, else None."""
        server = self._server
        return f"User:{server.user}" if server is not None and server.done else None
