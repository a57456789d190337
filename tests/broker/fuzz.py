"""Structure-aware fuzzing of a real broker process: what the suite's bounded test and `make fuzz` both run.

Cases start as valid requests built from our own protocol schemas, for every API key and version the broker
advertises, with values drawn from the broker's own topic names and ids and from boundary numbers, and Produce
record batches that are sometimes mangled behind a recomputed (valid) CRC. Most are then mutated as bytes: bit
flips, truncation, 16/32-bit fields overwritten with boundary values (array counts, string lengths, sizes), huge
varints, random spans, trailing junk, a frame size that lies. One `random.Random(seed)` draws everything, so a
seed and a case number reproduce a case.

A case is a finding when the broker dies, logs an internal error (ERROR or a traceback: a handler or encoder
failure rather than a clean close), or answers with a frame our codec cannot decode as the answer to the request
it parsed. Beside the fuzzing, a well-behaved confluent-kafka producer writes to its own topic, and at the end a
consumer must read back every record it wrote; the broker's RSS is sampled throughout.
"""

from __future__ import annotations

import dataclasses
import os
import random
import socket
import struct
import time
import uuid
from collections import Counter

from odradek.protocol import API_BY_KEY, ProtocolError, RequestHeader, decode_request, decode_response, encode_request
from odradek.protocol.schema import Array, Primitive
from odradek.records.batch import ATTRIBUTES_OFFSET, BATCH_HEADER_SIZE, CRC_OFFSET, Record, batch_crc, encode_batch

from .raw_client import read_frame

CANARY_TOPIC = "fuzz-canary"
TOPICS = ["fuzz-a", "fuzz-b", "fuzz-compact", "__consumer_offsets", "fuzz-new", "", "x" * 300]
GROUPS = ["fuzz-group", "fuzz-other", ""]
TRANSACTIONAL_IDS = ["fuzz-txn", "fuzz-txn-2"]
BOUNDARY = [0, 1, -1, 2, -2, 3, 127, -128, 255, 2**15 - 1, -2**15, 2**16 - 1, 2**31 - 1, -2**31, 2**32 - 1,
            2**63 - 1, -2**63]
INT_RANGES = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
ANSWER_SECONDS = 0.25  # long polls (Fetch, JoinGroup) may take longer: counted as unanswered, not as findings


@dataclasses.dataclass
class Finding:
    case: int
    kind: str
    detail: str
    frame_hex: str

    def __str__(self) -> str:
        return f"case {self.case}: {self.kind}: {self.detail}\n  frame: {self.frame_hex}"


@dataclasses.dataclass
class Report:
    seed: int
    cases: int = 0
    answered: int = 0
    closed: int = 0
    silent: int = 0
    api_keys: set = dataclasses.field(default_factory=set)
    versions: set = dataclasses.field(default_factory=set)
    mutations: Counter = dataclasses.field(default_factory=Counter)
    findings: list = dataclasses.field(default_factory=list)
    max_rss_mb: float = 0.0
    start_rss_mb: float = 0.0
    canary_written: int = 0
    canary_read: int = 0

    def summary(self) -> str:
        return (f"seed {self.seed}: {self.cases} cases ({self.answered} answered, {self.closed} closed, "
                f"{self.silent} unanswered in {ANSWER_SECONDS}s) over {len(self.api_keys)} API keys and "
                f"{len(self.versions)} (key, version) pairs; mutations {dict(self.mutations)}; "
                f"{len(self.findings)} findings; RSS {self.start_rss_mb:.0f} -> max {self.max_rss_mb:.0f} MB; "
                f"canary {self.canary_read}/{self.canary_written} records read back")


class CaseMaker:
    """Valid requests from the schemas, then byte-level mutations; every choice from one seeded generator."""

    def __init__(self, rng: random.Random, topic_ids: list[uuid.UUID]):
        self.rng = rng
        self.topic_ids = topic_ids
        self.pairs = [(key, version) for key, api in sorted(API_BY_KEY.items())
                      for version in range(api.min_version, api.max_version + 1)]

    # -- valid requests ------------------------------------------------------------------------------------------
    def request(self, correlation_id: int) -> tuple[int, int, bytes]:
        key, version = self.rng.choice(self.pairs)
        api = API_BY_KEY[key]
        header = RequestHeader(api_key=key, api_version=version, correlation_id=correlation_id,
                               client_id=self.rng.choice(["fuzz", None, ""]))
        return key, version, encode_request(header, self.message(api.request, version))

    def message(self, cls: type, version: int):
        return cls(**{f.name: self.value(f, version) for f in cls._schema.fields if version in f.versions})

    def value(self, field, version: int):
        rng = self.rng
        if version in field.nullable_versions and rng.random() < 0.1:
            return None
        kind = field.type
        if isinstance(kind, Array):
            element = kind.element
            return [self.message(element, version) if isinstance(element, type)
                    else self.primitive(element, field.name) for _ in range(rng.choice((0, 1, 1, 1, 2, 3)))]
        if isinstance(kind, type):
            return self.message(kind, version)
        return self.primitive(kind, field.name)

    def primitive(self, kind: Primitive, name: str):
        rng = self.rng
        if kind.name in INT_RANGES:
            bits = INT_RANGES[kind.name]
            if rng.random() < 0.6 and ("partition" in name or "index" in name or "timeout" in name
                                       or "wait" in name or "epoch" in name or name in ("acks", "count")):
                return rng.choice((0, 1, 2, -1, 10))
            value = rng.choice(BOUNDARY) if rng.random() < 0.5 else rng.randint(-3, 100)
            return max(-2**bits, min(2**bits - 1, value))
        if kind.name == "uint16":
            return rng.choice((0, 1, 9092, 65535))
        if kind.name == "string":
            if "topic" in name or name == "name" or name == "resource_name":
                return rng.choice(TOPICS)
            if "group" in name:
                return rng.choice(GROUPS)
            if "transactional" in name:
                return rng.choice(TRANSACTIONAL_IDS)
            return rng.choice(("", "fuzz", "\u00e9\u00e8", "a" * rng.randint(0, 40)))
        if kind.name == "bool":
            return rng.random() < 0.5
        if kind.name == "uuid":
            return rng.choice(self.topic_ids + [uuid.UUID(int=0), uuid.UUID(int=rng.getrandbits(128))])
        if kind.name == "float64":
            return rng.choice((0.0, 1.5, -1.0, float("inf"), float("nan"), 1e308))
        if kind.name == "bytes":
            return rng.randbytes(rng.choice((0, 1, 16, 300)))
        if kind.name == "records":
            return self.records()
        raise AssertionError(f"no generator for {kind!r}")

    def records(self) -> bytes:
        """One or two v2 batches; a third of the time with record bytes mangled behind a recomputed CRC."""
        rng = self.rng
        batches = []
        for _ in range(rng.choice((1, 1, 2))):
            count = rng.randint(1, 4)
            batch = bytearray(encode_batch(
                [Record(index, 1_700_000_000_000 + index, rng.choice((None, b"k")), rng.randbytes(rng.randint(0, 50)))
                 for index in range(count)], compression=rng.choice((0, 0, 1, 2, 3, 4))))
            if rng.random() < 0.35:
                self.mangle_batch(batch)
            batches.append(bytes(batch))
        return b"".join(batches)

    def mangle_batch(self, batch: bytearray) -> None:
        rng = self.rng
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(ATTRIBUTES_OFFSET, len(batch))
            if position < BATCH_HEADER_SIZE and rng.random() < 0.5:  # attributes, offset delta, counts...
                batch[position] = rng.choice((0, 0x7F, 0x80, 0xFF))
            else:
                batch[position] ^= 1 << rng.randrange(8)
        struct.pack_into(">I", batch, CRC_OFFSET, batch_crc(batch, 0, len(batch)))

    # -- byte mutations ------------------------------------------------------------------------------------------
    def mutate(self, frame: bytes) -> tuple[str, bytes]:
        """(mutation name, mutated frame with its size prefix)."""
        rng = self.rng
        body = bytearray(frame[4:])
        kind = rng.choices(("none", "bit flips", "truncate", "int field", "huge varint", "random span",
                            "trailing junk", "size lies"), weights=(20, 20, 10, 25, 8, 10, 5, 2))[0]
        if kind == "bit flips":
            for _ in range(rng.randint(1, 8)):
                position = rng.randrange(len(body))
                body[position] ^= 1 << rng.randrange(8)
        elif kind == "truncate":
            body = body[:rng.randrange(len(body))]
        elif kind == "int field":
            width = rng.choice((2, 4))
            position = rng.randrange(max(1, len(body) - width + 1))
            value = rng.choice((0, 1, 0x7F, 0x80, 0xFF, 0x7FFF, 0x8000, 0xFFFF, 0x7FFFFFFF, 0x80000000,
                                0xFFFFFFFF, 0xFFFFFFFE, 0x10000))
            body[position:position + width] = (value & ((1 << 8 * width) - 1)).to_bytes(width, "big")
        elif kind == "huge varint":
            position = rng.randrange(len(body) + 1)
            body[position:position] = bytes((0xFF, 0xFF, 0xFF, 0xFF, rng.choice((0x07, 0x0F, 0x7F))))
        elif kind == "random span":
            position = rng.randrange(len(body) + 1)
            body[position:position + rng.randint(0, 8)] = rng.randbytes(rng.randint(1, 8))
        elif kind == "trailing junk":
            body += rng.randbytes(rng.randint(1, 64))
        elif kind == "size lies":
            return kind, struct.pack(">i", len(body) + rng.choice((1, 7, -1, -len(body) + 1))) + bytes(body)
        return kind, struct.pack(">i", len(body)) + bytes(body)


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS")) / 1024


class BrokerLog:
    """New lines of the broker's log since the last look: internal errors are findings."""

    def __init__(self, path):
        self.path = path
        self.position = os.path.getsize(path) if os.path.exists(path) else 0

    def internal_errors(self) -> list[str]:
        with open(self.path, "rb") as file:
            file.seek(self.position)
            text = file.read().decode(errors="replace")
        self.position += len(text.encode(errors="replace"))
        lines = text.splitlines()
        return ["\n".join(lines[index:index + 25]) for index, line in enumerate(lines)
                if " ERROR " in line or " CRITICAL " in line]


def run(broker, *, seed: int, cases: int | None = None, seconds: float | None = None,
        progress=None) -> Report:
    """Fuzz `broker` (an odradek.embedded.BrokerProcess) for `cases` cases or `seconds` seconds."""
    from confluent_kafka import Producer

    rng = random.Random(seed)
    report = Report(seed=seed)
    pid = broker.process.pid
    report.start_rss_mb = report.max_rss_mb = rss_mb(pid)
    canary = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0})
    topic_ids = prepare_topics(broker.port)
    maker = CaseMaker(rng, topic_ids)
    broker_log = BrokerLog(broker.log_path)
    sock = None
    deadline = time.monotonic() + seconds if seconds is not None else None
    case = 0
    while (cases is None or case < cases) and (deadline is None or time.monotonic() < deadline):
        case += 1
        if case % 100 == 0:
            if not produce_canary(canary, report.canary_written, 5):
                report.findings.append(Finding(case, "the canary client could not write", broker.log_tail(), ""))
                break
            report.canary_written += 5
            report.max_rss_mb = max(report.max_rss_mb, rss_mb(pid))
            if progress is not None and case % 5000 == 0:
                progress(f"case {case}: {len(report.findings)} findings, RSS {rss_mb(pid):.0f} MB")
        try:
            key, version, frame = maker.request(case)
        except (TypeError, ValueError, OverflowError, struct.error):
            continue
        mutation, frame = maker.mutate(frame)
        report.mutations[mutation] += 1
        report.cases += 1
        if sock is None:
            sock = socket.create_connection(("127.0.0.1", broker.port), timeout=ANSWER_SECONDS)
        outcome, detail = exchange(sock, frame, mutation)
        if outcome == "answered":
            report.answered += 1
            if detail is not None:
                report.api_keys.add(detail[0])
                report.versions.add(detail)
        elif outcome == "undecodable":
            report.findings.append(Finding(case, "answer fails to decode", detail, frame.hex()))
        else:
            report.closed += outcome == "closed"
            report.silent += outcome == "silent"
        if outcome == "silent" and not answers_api_versions(broker.port):
            report.findings.append(Finding(case, "the broker stopped answering",
                                           f"{API_BY_KEY[key].name} v{version}, {mutation}", frame.hex()))
            break
        if outcome in ("closed", "silent", "undecodable"):
            sock.close()
            sock = None
        for error in broker_log.internal_errors():
            report.findings.append(Finding(case, "internal error logged", error, frame.hex()))
        if broker.process.poll() is not None:
            report.findings.append(Finding(case, "broker died", f"exit code {broker.process.returncode}",
                                           frame.hex()))
            break
    if sock is not None:
        sock.close()
    if broker.process.poll() is None:
        report.max_rss_mb = max(report.max_rss_mb, rss_mb(pid))
        report.canary_written += 5 if produce_canary(canary, report.canary_written, 5) else 0
        report.canary_read = read_canary(broker.bootstrap_servers, report.canary_written)
    return report


def exchange(sock: socket.socket, frame: bytes, mutation: str) -> tuple[str, object]:
    """Send one case and classify what came back: ("answered", (key, version) as the broker parsed them, or None
    when our codec cannot parse the request either), ("closed", None), ("silent", None) or ("undecodable", why)."""
    try:
        header, request = decode_request(memoryview(frame)[4:]) if mutation != "size lies" else (None, None)
    except ProtocolError:
        header = request = None
    try:
        sock.sendall(frame)
        if mutation == "size lies":  # a frame announced longer than sent is waited for: no answer to wait for
            sock.settimeout(0.02)
        elif header is not None and header.api_key == 0 and request.acks == 0:
            return "answered", (0, header.api_version)  # Produce with acks=0 gets no answer
        answer = read_frame(sock)
    except socket.timeout:
        return "silent", None
    except OSError:
        return "closed", None
    finally:
        sock.settimeout(ANSWER_SECONDS)
    if header is None:  # we could not parse it either; any answer is its own business (KIP-511 ApiVersions)
        return "answered", None
    try:
        correlation_id, _ = decode_response(header.api_key, header.api_version, answer)
    except Exception as exc:  # noqa: BLE001 - any failure to decode is the finding
        return "undecodable", f"{API_BY_KEY[header.api_key].name} v{header.api_version}: {exc!r}"
    if correlation_id != header.correlation_id:
        return "undecodable", f"correlation id {correlation_id} answers {header.correlation_id}"
    return "answered", (header.api_key, header.api_version)


def answers_api_versions(port: int, seconds: float = 10.0) -> bool:
    """Whether a fresh connection gets ApiVersions answered within `seconds`: the broker is not stuck."""
    from .raw_client import RawClient

    try:
        client = RawClient(port)
        client.sock.settimeout(seconds)
        client.call("ApiVersions", 0)
        client.close()
        return True
    except OSError:
        return False


def prepare_topics(port: int) -> list[uuid.UUID]:
    """Create the fuzz topics and the canary's; the ids of those that exist, for requests naming topics by id."""
    from odradek.protocol import api

    from .raw_client import RawClient

    client = RawClient(port)
    create = api("CreateTopics").request
    client.call("CreateTopics", 5, timeout_ms=5000, validate_only=False, topics=[
        create.CreatableTopic(name=name, num_partitions=partitions, replication_factor=1, configs=[
            create.CreatableTopicConfig(name="cleanup.policy", value="compact")] if "compact" in name else [])
        for name, partitions in ((CANARY_TOPIC, 1), ("fuzz-a", 3), ("fuzz-b", 1), ("fuzz-compact", 2))])
    metadata = client.call("Metadata", 12, topics=None, allow_auto_topic_creation=False,
                           include_topic_authorized_operations=False)
    client.close()
    return [topic.topic_id for topic in metadata.topics if topic.name != CANARY_TOPIC]


def produce_canary(producer, first: int, count: int) -> bool:
    """Write canary records `first`.. and wait for them: whether all were delivered."""
    for index in range(first, first + count):
        producer.produce(CANARY_TOPIC, value=b"canary-%d" % index)
    return producer.flush(15) == 0


def read_canary(bootstrap: str, expected: int) -> int:
    """How many of the first `expected` canary records a fresh consumer reads back in order (records whose delivery
    report came too late to be counted may follow them)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "fuzz-canary-reader",
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(CANARY_TOPIC, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < expected and time.monotonic() < deadline:
        for message in consumer.consume(500, 0.5):
            if message.error() is None:
                values.append(message.value())
    consumer.close()
    in_order = 0
    for index, value in enumerate(values[:expected]):
        if value != b"canary-%d" % index:
            break
        in_order += 1
    return in_order
