"""How this broker connects to the other brokers of its cluster: Kafka's inter-broker listener and its security.

Kafka's settings: `inter.broker.listener.name` names the listener (each broker reaches the others at that listener's
registered endpoint); without it, `security.inter.broker.protocol` (default PLAINTEXT) names it, as Kafka takes the
listener of that name; giving both is an error, as in Kafka. On a TLS listener the connection is made with the
listener's own trust store (and its keystore as the client certificate; odradek.security.tls.client_context). On a
SASL listener the broker logs in with `sasl.mechanism.inter.broker.protocol` (Kafka's default GSSAPI is not served:
set PLAIN or SCRAM-SHA-256/512) as the `username`/`password` of the listener's JAAS entry for that mechanism,
`listener.name.<listener>.<mechanism>.sasl.jaas.config` (or the same key without the listener prefix), as Kafka's
broker does; the receiving broker then authorizes it as that user, which needs super.users or CLUSTER_ACTION.
Everything is checked at start, so a broker that could not reach its peers does not start. Plain code: the
connecting itself is odradek.cluster.peer's.
"""

from __future__ import annotations

import dataclasses
import ssl
from collections.abc import Mapping, Sequence
from typing import Any

from odradek.config import Listener
from odradek.errors import ErrorCode, KafkaError
from odradek.security.sasl import SERVED_MECHANISMS, jaas_options

DEFAULT_INTER_BROKER_PROTOCOL = "PLAINTEXT"
DEFAULT_INTER_BROKER_MECHANISM = "GSSAPI"  # Kafka's default; not served here


@dataclasses.dataclass(frozen=True)
class InterBrokerSecurity:
    """The listener brokers talk to each other on, and what a connection to it needs."""

    listener_name: str
    tls: ssl.SSLContext | None = None
    mechanism: str | None = None  # None: no SASL
    username: str = ""
    password: str = ""


def _config_error(message: str) -> KafkaError:
    return KafkaError(ErrorCode.INVALID_CONFIG, message)


def inter_broker_listener(listeners: Sequence[Listener], props: Mapping[str, Any]) -> Listener:
    named = str(props.get("inter.broker.listener.name", "")).strip().upper()
    protocol = str(props.get("security.inter.broker.protocol", "")).strip().upper()
    if named and protocol:
        raise _config_error("Only one of inter.broker.listener.name and security.inter.broker.protocol should be "
                            "set.")
    name = named or protocol or DEFAULT_INTER_BROKER_PROTOCOL
    listener = next((entry for entry in listeners if entry.name == name), None)
    if listener is None:
        raise _config_error(f"inter.broker.listener.name must be a listener name defined in advertised.listeners. "
                            f"The valid options based on currently configured listeners are "
                            f"{','.join(entry.name for entry in listeners)} (it is {name}"
                            f"{'' if named or protocol else ', from the default security.inter.broker.protocol'})")
    return listener


def inter_broker_security(listeners: Sequence[Listener], props: Mapping[str, Any]) -> InterBrokerSecurity:
    """What connecting to the other brokers takes, or INVALID_CONFIG saying which setting is wrong."""
    from odradek.security.tls import client_context

    listener = inter_broker_listener(listeners, props)
    tls = client_context(listener, props) if listener.uses_tls else None
    if not listener.uses_sasl:
        return InterBrokerSecurity(listener.name, tls)
    mechanism = str(props.get("sasl.mechanism.inter.broker.protocol", DEFAULT_INTER_BROKER_MECHANISM)).strip()
    if mechanism.upper() not in SERVED_MECHANISMS:
        raise _config_error(f"sasl.mechanism.inter.broker.protocol={mechanism} is not served: the inter-broker "
                            f"listener {listener.name} is {listener.security_protocol}, so set it to one of "
                            f"{', '.join(SERVED_MECHANISMS)}")
    mechanism = mechanism.upper()
    key = f"{mechanism.lower()}.sasl.jaas.config"
    options = jaas_options(str(listener.setting(props, key, "")))
    if not options.get("username") or "password" not in options:
        raise _config_error(f"the inter-broker listener {listener.name} uses SASL {mechanism}: "
                            f"listener.name.{listener.name.lower()}.{key} needs this broker's own username=\"...\" "
                            f"password=\"...\"")
    return InterBrokerSecurity(listener.name, tls, mechanism, options["username"], options["password"])
