"""Security of client connections: TLS contexts from PEM files (tls), the SCRAM credential format (scram) and the
server side of the SASL mechanisms we serve (sasl).

Plain code with no sockets or event loop: the network shell (odradek.broker.network) and the SaslHandshake /
SaslAuthenticate handlers feed it bytes and act on what it answers, so every mechanism is testable on its own.
"""
