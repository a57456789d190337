"""The SASL state machine on the wire, with a bare client: what comes before authentication, the pre-KIP-152 bare
tokens after SaslHandshake v0, a client that never finishes, and fuzzed SASL messages (the broker stays up)."""

from __future__ import annotations

import random
import socket
import struct
import time

import pytest

from odradek.embedded import BrokerProcess
from odradek.errors import ErrorCode
from tests.broker.raw_client import RawClient, read_frame
from tests.security.conftest import PLAIN_USERS, free_port


def sasl_client(secure_broker) -> RawClient:
    return RawClient(secure_broker.ports["SASL_PLAINTEXT"])


def assert_closed(client: RawClient) -> None:
    client.sock.settimeout(10)
    with pytest.raises(ConnectionError):
        read_frame(client.sock)


def test_a_request_before_authentication_closes_the_connection(secure_broker):
    client = sasl_client(secure_broker)
    assert client.call("ApiVersions", 3, client_software_name="raw", client_software_version="1").error_code == 0
    header_only = client.call  # Metadata before SaslHandshake: Kafka closes (ILLEGAL_SASL_STATE)
    with pytest.raises(ConnectionError):
        header_only("Metadata", 12, topics=None, allow_auto_topic_creation=False,
                    include_topic_authorized_operations=False)


def test_an_unsupported_mechanism_lists_the_enabled_ones_and_closes(secure_broker):
    client = sasl_client(secure_broker)
    answer = client.call("SaslHandshake", 1, mechanism="GSSAPI")
    assert answer.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
    assert answer.mechanisms == ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
    assert_closed(client)


def test_bare_tokens_after_handshake_v0_authenticate(secure_broker):
    client = sasl_client(secure_broker)
    assert client.call("SaslHandshake", 0, mechanism="PLAIN").error_code == 0
    token = b"\0alice\0" + PLAIN_USERS["alice"].encode()
    client.sock.sendall(struct.pack(">i", len(token)) + token)
    assert read_frame(client.sock) == b""  # PLAIN's empty challenge, with no Kafka header
    assert client.call("Metadata", 12, topics=None, allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False).brokers[0].port == secure_broker.ports[
        "SASL_PLAINTEXT"]


def test_a_wrong_bare_token_closes_the_connection(secure_broker):
    client = sasl_client(secure_broker)
    assert client.call("SaslHandshake", 0, mechanism="PLAIN").error_code == 0
    token = b"\0alice\0wrong"
    client.sock.sendall(struct.pack(">i", len(token)) + token)
    assert_closed(client)


def test_authentication_after_success_is_an_illegal_state_on_a_usable_connection(secure_broker):
    client = sasl_client(secure_broker)
    assert client.call("SaslHandshake", 1, mechanism="PLAIN").error_code == 0
    ok = client.call("SaslAuthenticate", 2, auth_bytes=b"\0admin\0" + PLAIN_USERS["admin"].encode())
    assert ok.error_code == 0
    again = client.call("SaslAuthenticate", 2, auth_bytes=b"\0admin\0" + PLAIN_USERS["admin"].encode())
    assert (again.error_code, again.error_message) == (
        ErrorCode.ILLEGAL_SASL_STATE, "SaslAuthenticate request received after successful authentication")
    assert client.call("Metadata", 12, topics=None, allow_auto_topic_creation=False,
                       include_topic_authorized_operations=False).brokers


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_fuzzed_sasl_messages_fail_and_close_and_the_broker_stays_up(secure_broker, mechanism):
    rng = random.Random(mechanism)
    samples = [b"", b"\0\0", b"\xff" * 40, b"n,,n=,r=", b"n,,n=bob,r=abc", b"y,,n=bob,r=x", b"c=biws,r=x,p=AAAA",
               b"n,a=eve,n=bob,r=abc", b"n,,n=bo=5Cb,r=abc"]
    samples += [bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300))) for _ in range(20)]
    for token in samples:
        client = sasl_client(secure_broker)
        assert client.call("SaslHandshake", 1, mechanism=mechanism).error_code == 0
        answer = client.call("SaslAuthenticate", 2, auth_bytes=token)
        if answer.error_code == 0:  # a well-formed SCRAM client-first for an unknown user cannot pass; others might
            answer = client.call("SaslAuthenticate", 2, auth_bytes=bytes(rng.randrange(256) for _ in range(50)))
        assert answer.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED, token
        assert answer.error_message.startswith("Authentication failed")
        assert_closed(client)
        client.close()
    healthy = RawClient(secure_broker.ports["PLAINTEXT"])
    assert healthy.call("Metadata", 12, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False).brokers


def test_a_client_that_never_authenticates_is_closed(tmp_path):
    """It keeps the connection busy, a byte of a SaslAuthenticate frame at a time (so it is never idle), but never
    authenticates: closed at the SASL deadline, here connections.max.idle.ms as that is shorter than 10 s."""
    port = free_port()
    settings = {"listeners": f"PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:{port}",
                "sasl.enabled.mechanisms": "PLAIN", "connections.max.idle.ms": 1500}
    with BrokerProcess(tmp_path / "data", settings=settings):
        client = RawClient(port)
        started = time.monotonic()
        assert client.call("SaslHandshake", 1, mechanism="PLAIN").error_code == 0
        client.sock.sendall(struct.pack(">i", 100))  # a frame of 100 bytes follows, slowly
        with pytest.raises(OSError):  # the broker's close shows as a reset or a broken pipe
            while time.monotonic() - started < 8:
                client.sock.sendall(b"\0")
                time.sleep(0.2)
        assert time.monotonic() - started < 8


def test_a_frame_larger_than_sasl_server_max_receive_size_before_authentication_closes_at_once(secure_broker):
    """Kafka's SaslServerAuthenticator: a frame above sasl.server.max.receive.size (512 KiB) before authentication
    closes the connection as soon as its size is read, without waiting for (and buffering) the bytes announced."""
    client = sasl_client(secure_broker)
    started = time.monotonic()
    client.sock.sendall(struct.pack(">i", 512 * 1024 + 1) + b"\0" * 1000)
    assert_closed(client)
    assert time.monotonic() - started < 2  # the SASL deadline (10 s) would close it too, much later


def still_open(sock: socket.socket) -> bool:
    """Whether the broker has kept `sock` open (it answers nothing to an unfinished frame)."""
    sock.setblocking(False)
    try:
        return sock.recv(1) != b""
    except BlockingIOError:
        return True
    except ConnectionError:
        return False


def test_frames_of_unauthenticated_connections_hold_a_bounded_memory_together(secure_broker):
    """Each of 80 connections that never log in sends all but the last byte of a 500 KiB frame (all within the SASL
    deadline): together they would hold 40 MB, so once those still open hold the broker's 32 MiB the next ones are
    closed, and the broker answers as before; once the holders go, a new unauthenticated connection may send a
    frame that large again."""
    frame_bytes = 500 * 1024
    port = secure_broker.ports["SASL_PLAINTEXT"]
    connections = []
    for _ in range(80):
        sock = socket.create_connection(("127.0.0.1", port))
        try:
            sock.sendall(struct.pack(">i", frame_bytes) + b"\0" * (frame_bytes - 1))
        except ConnectionError:  # closed while sending
            pass
        connections.append(sock)
    time.sleep(1)
    holders = [sock for sock in connections if still_open(sock)]
    assert len(holders) == 32 * 1024 * 1024 // frame_bytes
    healthy = RawClient(secure_broker.ports["PLAINTEXT"])
    assert healthy.call("Metadata", 12, topics=None, allow_auto_topic_creation=False,
                        include_topic_authorized_operations=False).brokers
    for sock in connections:
        sock.close()
    time.sleep(0.5)
    client = sasl_client(secure_broker)
    client.sock.sendall(struct.pack(">i", frame_bytes) + b"\0" * (frame_bytes - 1))
    time.sleep(0.5)
    assert still_open(client.sock)
    client.close()
