"""The fuzzer's structure-aware generator (tests/broker/fuzz.py, CaseMaker) run against Kafka and Odradek: valid
but odd requests from one seed, for every (API, version) both serve, the same bytes to both (but for topic ids,
each broker's own), and the error codes of the two answers compared (the set of codes in each, or that the broker
closed the connection or did not answer). A difference fails unless allowlist.FUZZ_ALLOWED names its API with the
reason.

The suite runs a fixed seed for a few hundred cases; `make interop` runs test_long_fuzz_differential for
INTEROP_SECONDS with INTEROP_SEED (random unless given, printed)."""

from __future__ import annotations

import os
import random
import socket
import time
import uuid

import pytest

from odradek.protocol import API_BY_KEY, decode_request, decode_response
from tests.broker import fuzz
from tests.broker.raw_client import read_frame

from . import cases
from .allowlist import fuzz_allowed
from .harness import Case, error_codes

SUITE_SEED = 20261202
SUITE_CASES = 400
FUZZ_TOPICS = ("fuzz-a", "fuzz-b", "fuzz-compact")
ANSWER_SECONDS = 5.0
NEVER_SENT = {"SaslAuthenticate", "SaslHandshake"}  # they change what the connection may send next


def placeholder(index: int) -> uuid.UUID:
    return uuid.UUID(int=0x0DD0_0000_0000_0000_0000_0000_0000_0000 + index)


class FuzzSide:
    """One broker for the fuzz run: its topic ids for the placeholders, one connection, reopened after a close."""

    def __init__(self, port: int, ids: list[uuid.UUID]):
        self.port = port
        self.replacements = [(placeholder(i).bytes, topic_id.bytes) for i, topic_id in enumerate(ids)]
        self.sock: socket.socket | None = None

    def outcome(self, key: int, version: int, frame: bytes):
        for mark, topic_id in self.replacements:
            frame = frame.replace(mark, topic_id)
        try:
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=ANSWER_SECONDS)
            self.sock.sendall(frame)
            _, answer = decode_response(key, version, read_frame(self.sock))
        except socket.timeout:
            self.close()
            return "no answer"
        except OSError:
            self.close()
            return "closed"
        return tuple(sorted(error_codes(answer)))

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def topic_ids(port: int) -> list[uuid.UUID]:
    from odradek.protocol import api

    from tests.broker.raw_client import RawClient

    client = RawClient(port)
    answer = client.call("Metadata", 12, topics=[api("Metadata").request.MetadataRequestTopic(name=name)
                                                 for name in FUZZ_TOPICS], allow_auto_topic_creation=False)
    client.close()
    by_name = {topic.name: topic.topic_id for topic in answer.topics}
    return [by_name[name] for name in FUZZ_TOPICS]


def run(pair, seed: int, *, count: int | None = None, seconds: float | None = None):
    """(cases compared, [difference lines not allowlisted], {api: allowlisted count})."""
    for port in pair.ports.values():
        fuzz.prepare_topics(port)
    for outcome in pair.run(Case("fuzz-topics", cases.ready(*FUZZ_TOPICS, fuzz.CANARY_TOPIC))):
        assert outcome.kafka == outcome.odradek or not outcome.differences
    sides = {name: FuzzSide(port, topic_ids(port)) for name, port in pair.ports.items()}
    maker = fuzz.CaseMaker(random.Random(seed), [placeholder(i) for i in range(len(FUZZ_TOPICS))])
    maker.pairs = [(key, version) for key, version in maker.pairs
                   if version in cases.versions(API_BY_KEY[key].name) and API_BY_KEY[key].name not in NEVER_SENT]
    compared, failures, allowed = 0, [], {}
    deadline = time.monotonic() + seconds if seconds else None
    number = 0
    try:
        while (count is None or compared < count) and (deadline is None or time.monotonic() < deadline):
            number += 1
            try:
                key, version, frame = maker.request(number)
            except (TypeError, ValueError, OverflowError):
                continue
            request = decode_request(memoryview(frame)[4:])[1]
            if key == 0 and request.acks == 0:
                continue  # no answer to compare
            kafka = sides["kafka"].outcome(key, version, frame)
            odradek = sides["odradek"].outcome(key, version, frame)
            compared += 1
            if kafka == odradek:
                continue
            name = API_BY_KEY[key].name
            entry = fuzz_allowed(name, kafka, odradek)
            if entry is not None:
                allowed[name] = allowed.get(name, 0) + 1
                print(f"allowed: case {number} {name} v{version}: Kafka {kafka}, Odradek {odradek}")
            else:
                failures.append(f"case {number} {name} v{version}: Kafka {kafka}, Odradek {odradek}: {request!r:.400}")
    finally:
        for side in sides.values():
            side.close()
    return compared, failures, allowed


def test_fuzzed_requests_get_kafkas_error_codes(pair, seeded):
    compared, failures, allowed = run(pair, SUITE_SEED, count=SUITE_CASES)
    print(f"\nfuzz differential, seed {SUITE_SEED}: {compared} requests compared, "
          f"{sum(allowed.values())} allowlisted differences {allowed}, {len(failures)} differences")
    assert compared == SUITE_CASES
    assert not failures, "\n".join(failures[:20])


@pytest.mark.skipif(not os.environ.get("INTEROP_SECONDS"), reason="a long run: make interop (INTEROP_SECONDS)")
def test_long_fuzz_differential(pair, seeded):
    seed = int(os.environ.get("INTEROP_SEED") or random.SystemRandom().randrange(2**32))
    print(f"\nfuzz differential seed {seed} (INTEROP_SEED={seed} reproduces)")
    compared, failures, allowed = run(pair, seed, seconds=float(os.environ["INTEROP_SECONDS"]))
    print(f"{compared} requests compared, {sum(allowed.values())} allowlisted {allowed}, {len(failures)} differences")
    assert not failures, "\n".join(failures[:50])
