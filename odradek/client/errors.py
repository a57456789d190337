"""ClientError: any failure reported by librdkafka or a broker, as one exception with one readable line;
LIBRDKAFKA_LOGGER, where every client of this layer sends librdkafka's own log lines (instead of raw stderr), so
applications decide what to show with ordinary logging settings; and ConnectionFailures, the error callback that
spots the failures no retry mends (a refused login, every bootstrap server refusing connections).

Kept free of confluent-kafka imports so the CLI's top level can catch ClientError without loading the client library.
"""

from __future__ import annotations

import logging
import re

LIBRDKAFKA_LOGGER = logging.getLogger("odradek.client.librdkafka")


class ClientError(Exception):
    """`name` is librdkafka's error name (e.g. TOPIC_ALREADY_EXISTS, _TRANSPORT); str() is one line for humans."""

    def __init__(self, message: str, name: str = "", retriable: bool = False):
        super().__init__(message)
        self.name = name
        self.retriable = retriable

    @classmethod
    def of(cls, error) -> "ClientError":
        """From a confluent_kafka.KafkaError (or a KafkaException carrying one)."""
        if isinstance(error, Exception) and error.args and hasattr(error.args[0], "code"):
            error = error.args[0]
        if not hasattr(error, "code"):
            return cls(str(error))
        return cls(f"{error.name()}: {error.str()}", error.name(), error.retriable())


# librdkafka's "<name>/<id>: Connect to <address> failed: Connection refused ..." (name may carry a protocol://)
_REFUSED = re.compile(r"^(?:\w+://)?(?P<broker>[^/\s]+)/\S+: Connect to \S+ failed: Connection refused")
_AUTHENTICATION = re.compile(r"^(?:\w+://)?(?P<broker>[^/\s]+)/\S+: SASL authentication error: (?P<reason>.*?)"
                             r"(?: \(after \d+ms in state \w+\))?$")


class ConnectionFailures:
    """A client's error_cb that tells apart what no retry can mend, for the calls waiting on that client to raise at
    once (as Kafka's Java clients fail a call on SaslAuthenticationException) instead of running out their timeout:
    the broker refused the login, or every bootstrap server refused the connection. `error` is then a ClientError
    with the broker's reason; None while a retry may still succeed. librdkafka calls it from the client's poll.
    Refused connections count only until the client has reached the cluster once (`reached()`): after that a broker
    that restarts is waited for, as Kafka's clients wait for it."""

    def __init__(self, bootstrap_servers: str | None):
        self.bootstrap = {server.strip() for server in (bootstrap_servers or "").split(",") if server.strip()}
        self.refused: set[str] = set()
        self.error: ClientError | None = None
        self.has_reached = False

    def reached(self) -> None:
        """The cluster answered: from now on refused connections are a broker restarting, not a wrong address."""
        self.has_reached = True
        self.forget_refusals()

    def forget_refusals(self) -> None:
        """Count refusals afresh (those served before a call began may be older than the broker's start)."""
        self.refused.clear()
        if self.error is not None and self.error.name == "_TRANSPORT":
            self.error = None

    def __call__(self, error) -> None:
        if self.error is not None:
            return
        text = error.str()
        if error.name() == "_AUTHENTICATION":
            match = _AUTHENTICATION.match(text)
            reason, broker = (match["reason"], match["broker"]) if match else (text, "")
            self.error = ClientError(f"SaslAuthenticationException: {reason}" + (f" ({broker})" if broker else ""),
                                     "_AUTHENTICATION")
        elif error.name() == "_TRANSPORT" and not self.has_reached and (match := _REFUSED.match(text)):
            self.refused.add(match["broker"])
            if self.bootstrap and self.bootstrap <= self.refused:
                self.error = ClientError(f"connection refused: {', '.join(sorted(self.bootstrap))}", "_TRANSPORT")

    def check(self) -> None:
        """Raise the failure, if there is one."""
        if self.error is not None:
            raise self.error
