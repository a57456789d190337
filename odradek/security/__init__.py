"""Security of client connections: TLS contexts from PEM files (tls), the SCRAM credential format (scram), the
server side of the SASL mechanisms we serve (sasl), and what a connection this process opens as a client needs, with
SASL's client side (client).

Plain code with no sockets or event loop: the network shell (odradek.broker.network) and the SaslHandshake /
SaslAuthenticate handlers feed it bytes and act on what it answers, so every mechanism is testable on its own.
"""
