"""The differential harness: one scripted sequence of raw requests sent to Apache Kafka and to Odradek, the answers
compared field by field after normalising what may differ between two correct brokers.

A case is a list of `Step`s, each (api, version, fields) with `fields` in the request's own schema names as nested
dicts and lists (`build` makes the schema classes; a field the version does not carry is left out). `Var("pid")` in
a request stands for a value an earlier step's answer carried (`save={"pid": "producer_id"}`), each broker's own:
the two brokers get byte-identical requests but for the values they handed out themselves. `Batch(...)` is a v2
record batch built at send time (so its producer id can be a Var).

`normalise` turns an answer into plain data that two correct brokers agree on: node ids, hosts and ports, cluster
ids, throttle times and wall-clock times go; topic ids become the name they belong to; producer ids and member ids
become their order of first appearance in the case (so their relations are kept: the same producer in two answers,
a new one after a fence); error messages become whether there is one; fetched record bytes become the batches'
headers and records; every array is sorted (Kafka promises no order in the answers compared here). `differences`
lists the (field path, Kafka's value, Odradek's value) where the two normalised answers disagree; the allowlist
(allowlist.py) names the few that are allowed, with the reason.
"""

from __future__ import annotations

import dataclasses
import json
import socket
import struct
import time
import uuid
from typing import Any, Callable

from odradek.protocol import RequestHeader, api, decode_response, encode_request
from odradek.protocol.schema import ZERO_UUID, Array
from odradek.records.batch import Record, encode_batch, whole_batches, decode_batch

from tests.broker.raw_client import read_frame

CLOSED = {"<connection>": "closed"}
RETRIABLE = frozenset({3, 5, 6, 14, 15, 16})  # unknown partition, no leader, not leader, coordinator not ready...
DROPPED = frozenset({"throttle_time_ms", "host", "port", "rack", "cluster_id", "transaction_start_time_ms",
                     "last_timestamp", "zk_migration_ready", "finalized_features_epoch", "error_message",
                     "batch_index_error_message", "status_message", "log_dir", "total_bytes", "usable_bytes"})
OWN_CONFIGS = ("odradek.", "confluent.")  # the prefixes of topic configs Kafka has none of (ours, Confluent Server's)
NODE_FIELDS = frozenset({"node_id", "leader_id", "controller_id", "coordinator_id", "replica_nodes", "isr_nodes",
                         "offline_replicas", "eligible_leader_replicas", "last_known_elr", "replicas",
                         "broker_id", "leader", "preferred_read_replica"})
RELATION_FIELDS = {"producer_id": "pid", "member_id": "member", "leader": "member", "ongoing_txn_producer_id": "pid",
                   "group_instance_id": None}


@dataclasses.dataclass(frozen=True)
class Var:
    """A value an earlier step saved, the broker's own."""
    name: str


@dataclasses.dataclass(frozen=True)
class Batch:
    """A v2 record batch made when the step is sent: `count` records "v0".. (keys "k0".. if `keys`) with fixed
    timestamps; producer fields may be Vars; `mangle` edits the bytes after the CRC (a corrupt batch)."""
    count: int = 1
    producer_id: Any = -1
    producer_epoch: Any = -1
    base_sequence: Any = -1
    transactional: bool = False
    value_size: int = 0
    keys: bool = False
    mangle: Callable[[bytearray], None] | None = None

    def bytes(self, bindings: dict) -> bytes:
        records = [Record(index, 1_700_000_000_000 + index, b"k%d" % index if self.keys else None,
                          b"v%d" % index + b"x" * self.value_size) for index in range(self.count)]
        data = bytearray(encode_batch(records, producer_id=resolve(self.producer_id, bindings),
                                      producer_epoch=resolve(self.producer_epoch, bindings),
                                      base_sequence=resolve(self.base_sequence, bindings),
                                      transactional=self.transactional))
        if self.mangle is not None:
            self.mangle(data)
        return bytes(data)


@dataclasses.dataclass
class Step:
    """One request; `save` maps a binding name to a dotted path in the answer ("topics.0.topic_id"); `retry` the
    error codes on which the step is repeated (for up to `settle` seconds) before its answer counts, for what a
    broker does asynchronously (a new topic's leader, a coordinator loading); `compare=False` for set-up steps
    whose answer carries nothing to compare; `pause` seconds to wait before sending; `connection` names the
    connection it goes on (a JoinGroup waiting for the others needs its own)."""
    api: str
    version: int
    fields: dict = dataclasses.field(default_factory=dict)
    save: dict = dataclasses.field(default_factory=dict)
    retry: frozenset = frozenset()
    settle: float = 60.0
    compare: bool = True
    pause: float = 0.0
    connection: str = "main"
    pipelined: list | None = None  # further fields sent on the same connection before any answer is read
    background: bool = False  # sent now, its answer read and compared by a later Collect on its connection


def Collect(api_name: str, version: int, connection: str, **options) -> Step:
    """The step that reads (and compares) the answer to a background step sent earlier on `connection`."""
    return Step(api_name, version, connection=connection, **options, background=None)


@dataclasses.dataclass
class Case:
    name: str
    steps: list
    version: int | None = None  # the version of the API the case is about, when it is swept over versions

    @property
    def id(self) -> str:
        return self.name if self.version is None else f"{self.name}@v{self.version}"


def resolve(value, bindings: dict):
    if isinstance(value, Var):
        return bindings[value.name]
    if isinstance(value, Batch):
        return value.bytes(bindings)
    if isinstance(value, dict):
        return {key: resolve(item, bindings) for key, item in value.items()}
    if isinstance(value, list):
        return [resolve(item, bindings) for item in value]
    return value


def build(cls: type, version: int, data: dict):
    """An instance of schema class `cls` from nested dicts and lists; fields `version` does not carry are left out,
    a name the schema does not know is an error (a typo in a case)."""
    schema_fields = {f.name: f for f in cls._schema.fields}
    unknown = set(data) - set(schema_fields)
    if unknown:
        raise KeyError(f"{cls.__name__} has no field {sorted(unknown)}")
    values = {}
    for name, value in data.items():
        f = schema_fields[name]
        if version not in f.versions:
            continue
        kind = f.type.element if isinstance(f.type, Array) else f.type
        if isinstance(kind, type) and value is not None:
            value = ([build(kind, version, item) for item in value] if isinstance(f.type, Array)
                     else build(kind, version, value))
        values[name] = value
    return cls(**values)


class Connection:
    """One socket to one broker; a broker that closes it answers CLOSED, and the next request reconnects."""

    def __init__(self, port: int):
        self.port = port
        self.sock: socket.socket | None = None
        self.correlation_id = 0
        self.pending: tuple = (0, 0, 1, 0)

    def exchange(self, api_name: str, version: int, requests: list) -> list:
        self.send(api_name, version, requests)
        return self.receive()

    def send(self, api_name: str, version: int, requests: list) -> None:
        """Send `requests` without reading their answers (`receive` reads them)."""
        target = api(api_name)
        frames = []
        first = self.correlation_id + 1
        for request in requests:
            self.correlation_id += 1
            header = RequestHeader(api_key=target.key, api_version=version, correlation_id=self.correlation_id,
                                   client_id="differential")
            frames.append(encode_request(header, request))
        self.pending = (target.key, version, first, self.correlation_id)
        try:
            if self.sock is None:
                self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=60)
            self.sock.sendall(b"".join(frames))
        except OSError:
            self.close()

    def receive(self) -> list:
        """The answers to the last `send`, None for each one the broker closed the connection before."""
        key, version, first, last = self.pending
        answers = []
        try:
            for expected in range(first, last + 1):
                if self.sock is None:
                    break
                correlation_id, body = decode_response(key, version, read_frame(self.sock))
                assert correlation_id == expected, (correlation_id, expected)
                answers.append(body)
        except OSError:
            self.close()
        return answers + [None] * (last + 1 - first - len(answers))

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None


@dataclasses.dataclass
class Outcome:
    """One step's answers from both brokers, normalised, and where they differ."""
    case: str
    api: str
    version: int
    index: int
    kafka: Any
    odradek: Any
    differences: list

    @property
    def triple(self) -> tuple[str, int, str]:
        return self.api, self.version, self.case


class Side:
    """One broker as the harness drives it: its connections, bindings and the relations seen so far."""

    def __init__(self, port: int):
        self.port = port
        self.connections: dict[str, Connection] = {}
        self.bindings: dict = {}
        self.tags: dict = {}
        self.topic_names: dict = {}

    def connection(self, name: str) -> Connection:
        if name not in self.connections:
            self.connections[name] = Connection(self.port)
        return self.connections[name]

    def close(self) -> None:
        for connection in self.connections.values():
            connection.close()
        self.connections.clear()


def send(side: Side, step: Step) -> list:
    """The step's answers from one broker (several when pipelined), retried while they carry a `retry` code."""
    target = api(step.api)
    connection = side.connection(step.connection)
    if step.background is None:
        return connection.receive()
    requests = [resolve(step.fields, side.bindings), *(resolve(f, side.bindings) for f in step.pipelined or [])]
    deadline = time.monotonic() + step.settle
    while True:
        built = [build(target.request, step.version, fields) for fields in requests]
        if step.background:
            connection.send(step.api, step.version, built)
            return []
        answers = connection.exchange(step.api, step.version, built)
        if not step.retry or time.monotonic() > deadline or not any(
                error_codes(answer) & step.retry for answer in answers if answer is not None):
            return answers
        time.sleep(0.2)


def error_codes(answer) -> set:
    codes = set()
    for name, value in plain(answer).items() if answer is not None else ():
        walk_codes(name, value, codes)
    return codes


def walk_codes(name, value, codes: set) -> None:
    if isinstance(value, dict):
        for key, item in value.items():
            walk_codes(key, item, codes)
    elif isinstance(value, list):
        for item in value:
            walk_codes(name, item, codes)
    elif name.endswith("error_code") and isinstance(value, int):
        codes.add(value)


def plain(obj, version: int | None = None):
    """A decoded answer as dicts and lists (schema field names as keys)."""
    if obj is None or isinstance(obj, (int, float, str, bool, uuid.UUID)):
        return obj
    if isinstance(obj, (bytes, bytearray, memoryview)):
        return bytes(obj)
    if isinstance(obj, list):
        return [plain(item) for item in obj]
    return {f.name: plain(getattr(obj, f.name)) for f in obj._schema.fields}


def strip_absent(obj, cls: type, version: int):
    """`plain` of an answer, keeping only the fields `version` carries."""
    if obj is None:
        return None
    out = {}
    for f in cls._schema.fields:
        if version not in f.versions:
            continue
        value = getattr(obj, f.name)
        kind = f.type.element if isinstance(f.type, Array) else f.type
        if isinstance(kind, type) and value is not None:
            value = ([strip_absent(item, kind, version) for item in value] if isinstance(f.type, Array)
                     else strip_absent(value, kind, version))
        else:
            value = plain(value)
        out[f.name] = value
    return out


def learn(side: Side, value) -> None:
    """Topic ids next to their names, anywhere in an answer."""
    if isinstance(value, dict):
        name = value.get("name", value.get("topic", value.get("topic_name")))
        topic_id = value.get("topic_id")
        if isinstance(name, str) and isinstance(topic_id, uuid.UUID) and topic_id != ZERO_UUID:
            side.topic_names[topic_id] = name
        for item in value.values():
            learn(side, item)
    elif isinstance(value, list):
        for item in value:
            learn(side, item)


def tag(side: Side, kind: str, value):
    if value in (None, "", -1):
        return value
    key = (kind, value)
    if key not in side.tags:
        side.tags[key] = f"{kind}#{sum(1 for k in side.tags if k[0] == kind) + 1}"
    return side.tags[key]


def normalise(side: Side, name: str, value, node_id: int):
    if isinstance(value, dict):
        return {key: normalise(side, key, item, node_id) for key, item in value.items() if key not in DROPPED}
    if isinstance(value, list):
        if name == "configs":  # a topic's configs Kafka has none of (odradek.iceberg.*, confluent.*.schema.validation)
            value = [item for item in value if not (isinstance(item, dict)
                                                    and str(item.get("name")).startswith(OWN_CONFIGS))]
        items = [normalise(side, name, item, node_id) for item in value]
        return sorted(items, key=lambda item: json.dumps(item, default=str))  # schema order: names first
    if name in NODE_FIELDS and isinstance(value, int):
        return "<this node>" if value == node_id else value
    if name.endswith("topic_id") and isinstance(value, uuid.UUID):
        if value == ZERO_UUID:
            return "<zero id>"
        return f"<id of {side.topic_names[value]}>" if value in side.topic_names else "<unknown id>"
    if name in RELATION_FIELDS and isinstance(value, (int, str)) and RELATION_FIELDS[name]:
        return tag(side, RELATION_FIELDS[name], value)
    if name == "records" and isinstance(value, bytes):
        return batches(side, value)
    if isinstance(value, uuid.UUID):
        return "<uuid>" if value != ZERO_UUID else "<zero id>"
    if isinstance(value, bytes):
        return value.hex()
    return value


def batches(side: Side, data: bytes) -> list:
    out = []
    for header, raw in whole_batches(data):
        _, records = decode_batch(raw)
        out.append({"base_offset": header.base_offset, "attributes": header.attributes,
                    "last_offset_delta": header.last_offset_delta, "producer_id": tag(side, "pid", header.producer_id),
                    "producer_epoch": header.producer_epoch, "base_sequence": header.base_sequence,
                    "partition_leader_epoch": header.partition_leader_epoch, "count": header.record_count,
                    "records": [[r.offset_delta, r.timestamp if not header.is_control else "<t>", repr(r.key),
                                 repr(r.value), repr(list(r.headers))] for r in records]})
    return out


def save(side: Side, answer, paths: dict) -> None:
    for binding, path in paths.items():
        value = answer
        for part in path.split("."):
            value = value[int(part)] if part.isdigit() else getattr(value, part)
        side.bindings[binding] = value


def differences(kafka, odradek, path: str = "") -> list[tuple[str, Any, Any]]:
    if (kafka == CLOSED) != (odradek == CLOSED):  # one answered, the other closed: one difference
        return [(f"{path}.<connection>" if path else "<connection>", "closed" if kafka == CLOSED else "answered",
                 "closed" if odradek == CLOSED else "answered")]
    if isinstance(kafka, dict) and isinstance(odradek, dict):
        out = []
        for key in sorted(set(kafka) | set(odradek)):
            out += differences(kafka.get(key, "<absent>"), odradek.get(key, "<absent>"),
                               f"{path}.{key}" if path else key)
        return out
    if isinstance(kafka, list) and isinstance(odradek, list) and len(kafka) == len(odradek):
        out = []
        for k, o in zip(kafka, odradek):
            out += differences(k, o, f"{path}[]")
        return out
    return [] if kafka == odradek else [(path, kafka, odradek)]


def node_id(port: int) -> int:
    """The node id of the one broker at `port`, from its Metadata."""
    connection = Connection(port)
    [answer] = connection.exchange("Metadata", 1, [api("Metadata").request(topics=[])])
    connection.close()
    return answer.brokers[0].node_id


class Pair:
    """Kafka and Odradek side by side: `run(case)` sends every step to both and yields each step's Outcome."""

    def __init__(self, kafka_port: int, odradek_port: int):
        self.ports = {"kafka": kafka_port, "odradek": odradek_port}
        self.nodes = {name: node_id(port) for name, port in self.ports.items()}

    def run(self, case: Case) -> list[Outcome]:
        sides = {name: Side(port) for name, port in self.ports.items()}
        outcomes = []
        try:
            for index, step in enumerate(case.steps):
                if step.pause:
                    time.sleep(step.pause)
                results = {}
                for name, side in sides.items():
                    answers = send(side, step)
                    if step.background:
                        continue
                    if answers[0] is not None and step.save:
                        save(side, answers[0], step.save)
                    response_cls = api(step.api).response
                    stripped = [strip_absent(answer, response_cls, step.version) if answer is not None else CLOSED
                                for answer in answers]
                    for answer in stripped:
                        learn(side, answer)
                    results[name] = [normalise(side, "", answer, self.nodes[name]) for answer in stripped]
                if step.compare and not step.background:
                    kafka = results["kafka"] if step.pipelined else results["kafka"][0]
                    odradek = results["odradek"] if step.pipelined else results["odradek"][0]
                    outcomes.append(Outcome(case.name, step.api, step.version, index, kafka, odradek,
                                            differences(kafka, odradek)))
        finally:
            for side in sides.values():
                side.close()
        return outcomes


def corrupt_crc(data: bytearray) -> None:
    """A record batch whose CRC no longer matches its bytes."""
    data[-1] ^= 0xFF


def bad_record_count(data: bytearray) -> None:
    """A batch that claims one record more than it holds, behind a recomputed CRC."""
    from odradek.records.batch import CRC_OFFSET, batch_crc

    count_offset = 57
    (count,) = struct.unpack_from(">i", data, count_offset)
    struct.pack_into(">i", data, count_offset, count + 1)
    struct.pack_into(">I", data, CRC_OFFSET, batch_crc(data, 0, len(data)))
