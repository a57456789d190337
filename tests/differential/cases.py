"""The scripted cases of the differential harness: what is sent to both brokers, step by step.

Each `sweep` case runs at every version both brokers serve of the API it is about (KAFKA_VERSIONS is Kafka
4.3.1's ApiVersions answer, checked against the live broker by test_differential.py; Odradek's is its registry);
the state-machine cases (groups, transactions, idempotence, ACLs) run at the newest version both serve and at an old
one. Topics, groups and transactional ids are named per case and version, so every case starts from nothing but the
shared topic SHARED, which SEED fills (five records in partition 0 of three) before any case runs.
"""

from __future__ import annotations

import uuid

from odradek.protocol import api
from odradek.protocol.registry import API_BY_KEY

from .harness import Batch, Case, Collect, Step, Var, bad_record_count, corrupt_crc

# Kafka 4.3.1's ApiVersions answer (KRaft broker): key -> (min, max)
KAFKA_VERSIONS = {
    0: (0, 13), 1: (4, 18), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 17: (0, 1), 18: (0, 4), 19: (2, 7), 20: (1, 6), 21: (0, 2),
    22: (0, 5), 23: (2, 4), 24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 5), 29: (1, 3), 30: (1, 3),
    31: (1, 3), 32: (1, 4), 33: (0, 2), 34: (1, 2), 35: (1, 5), 36: (0, 2), 37: (0, 3), 38: (1, 3), 39: (1, 2),
    40: (1, 2), 41: (1, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1), 45: (0, 1), 46: (0, 0), 47: (0, 0), 48: (0, 1),
    49: (0, 1), 50: (0, 0), 51: (0, 0), 55: (0, 2), 57: (0, 2), 60: (0, 2), 61: (0, 0), 64: (0, 0), 65: (0, 0),
    66: (0, 2), 68: (0, 1), 69: (0, 1), 74: (0, 1), 75: (0, 0), 76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2),
    80: (0, 1), 81: (0, 0), 83: (0, 0), 84: (0, 0), 85: (0, 1), 86: (0, 0), 87: (0, 1), 88: (0, 0), 89: (0, 0),
    90: (0, 1), 91: (0, 0), 92: (0, 0),
}

SHARED = "d-shared"
NO_ID = uuid.UUID(int=0)
COORDINATOR_WAIT = frozenset({14, 15, 16})  # a coordinator loading or not yet known: asked again
RETRY_CONCURRENT = frozenset({51})  # CONCURRENT_TRANSACTIONS while markers are written


# Versions Kafka 4 advertises but refuses (closing the connection): Produce v0-2 are listed only so that librdkafka
# before 2.8 keeps compression on (KAFKA-18659); Odradek serves them, as it serves every version from 0.
ADVERTISED_NOT_SERVED = {0: range(0, 3)}


def versions(api_name: str) -> list[int]:
    """The versions of `api_name` both brokers serve."""
    mine = api(api_name)
    low, high = KAFKA_VERSIONS[mine.key]
    return [v for v in range(max(low, mine.min_version), min(high, mine.max_version) + 1)
            if v not in ADVERTISED_NOT_SERVED.get(mine.key, ())]


def ends(api_name: str) -> list[int]:
    """The oldest and the newest version both serve."""
    both = versions(api_name)
    return sorted({both[0], both[-1]})


def sweep(name: str, api_name: str, steps, which=versions) -> list[Case]:
    return [Case(name, steps(v), version=v) for v in which(api_name)]


def topic(name: str, partitions: int = 1, **configs) -> dict:
    return {"name": name, "num_partitions": partitions, "replication_factor": 1,
            "configs": [{"name": key.replace("_", "."), "value": str(value)} for key, value in configs.items()]}


def create(*topics: dict) -> Step:
    """Topics made for a case: compared, then waited on until they have a leader."""
    return Step("CreateTopics", 7, {"topics": list(topics), "timeout_ms": 30000})


def settled(*names: str) -> Step:
    """Metadata until every named topic has its leader (KRaft's broker learns of a new topic a moment later)."""
    return Step("Metadata", 12, {"topics": [{"name": n} for n in names], "allow_auto_topic_creation": False},
                retry=frozenset({3, 5}), save={f"id:{n}": f"topics.{i}.topic_id" for i, n in enumerate(names)})


def led(*names: str) -> Step:
    """ListOffsets until the broker leads partition 0 of every named topic (Kafka's metadata says so a moment
    before its replica manager does)."""
    return Step("ListOffsets", 7, {"replica_id": -1, "topics": [{"name": n, "partitions": [
        {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]} for n in names]},
                retry=frozenset({3, 5, 6}))


def ready(*names: str) -> list[Step]:
    return [settled(*names), led(*names)]


def produce(name: str, batch: Batch, version: int = 9, partition: int = 0, transactional_id=None, acks=-1,
            **options) -> Step:
    return Step("Produce", version, {"transactional_id": transactional_id, "acks": acks, "timeout_ms": 30000,
                                     "topic_data": [{"name": name, "partition_data": [
                                         {"index": partition, "records": batch}]}]}, **options)


def fetch_fields(name: str, partitions: list[dict], version: int, isolation: int = 0) -> dict:
    topic_ref = {"topic": name, "topic_id": Var(f"id:{name}") if version >= 13 else NO_ID}
    return {"replica_id": -1, "replica_state": {"replica_id": -1, "replica_epoch": -1}, "max_wait_ms": 0,
            "min_bytes": 1, "max_bytes": 1 << 20, "isolation_level": isolation, "session_id": 0,
            "session_epoch": -1, "rack_id": "",
            "topics": [{**topic_ref, "partitions": [{"current_leader_epoch": -1, "last_fetched_epoch": -1,
                                                     "log_start_offset": -1, "partition_max_bytes": 1 << 20, **p}
                                                    for p in partitions]}]}


# -- the shared topic ----------------------------------------------------------------------------------------------

SEED = Case("seed", [create(topic(SHARED, 3)), *ready(SHARED), produce(SHARED, Batch(5, keys=True))])


# -- reads ---------------------------------------------------------------------------------------------------------

def api_versions(v):
    return [Step("ApiVersions", v, {"client_software_name": "differential", "client_software_version": "1.0"})]


def metadata(v):
    names = [{"name": SHARED}, {"name": "d-missing"}] if v >= 4 else [{"name": SHARED}]
    return [Step("Metadata", v, {"topics": names, "allow_auto_topic_creation": False,
                                 "include_cluster_authorized_operations": True,
                                 "include_topic_authorized_operations": True}),
            *([Step("Metadata", v, {"topics": [{"name": "d bad name"}], "allow_auto_topic_creation": True})]
              if v >= 1 else [])]  # v0's empty list is every topic: what other cases made


def metadata_auto_create(v):
    name = f"d-auto-{v}"
    return [Step("Metadata", v, {"topics": [{"name": name}], "allow_auto_topic_creation": True}),
            settled(name), Step("Metadata", v, {"topics": [{"name": name}], "allow_auto_topic_creation": True})]


def fetch(v):
    return [settled(SHARED),
            Step("Fetch", v, fetch_fields(SHARED, [{"partition": 0, "fetch_offset": 0},
                                                   {"partition": 1, "fetch_offset": 0}], v)),
            Step("Fetch", v, fetch_fields(SHARED, [{"partition": 0, "fetch_offset": 2}], v)),
            Step("Fetch", v, fetch_fields(SHARED, [{"partition": 0, "fetch_offset": 6}], v)),
            Step("Fetch", v, fetch_fields(SHARED, [{"partition": 0, "fetch_offset": -5}], v)),
            Step("Fetch", v, fetch_fields(SHARED, [{"partition": 7, "fetch_offset": 0}], v)),
            Step("Fetch", v, fetch_fields(SHARED, [{"partition": 0, "fetch_offset": 0, "current_leader_epoch": 3}],
                                          v)),
            Step("Fetch", v, fetch_fields(SHARED, [{"partition": 0, "fetch_offset": 5, "last_fetched_epoch": 2}],
                                          v)),
            Step("Fetch", v, fetch_fields(SHARED, [{"partition": 0, "fetch_offset": 1, "partition_max_bytes": 10}],
                                          v)),
            Step("Fetch", v, {**fetch_fields(SHARED, [], v), "topics": [
                {"topic": "d-missing", "topic_id": uuid.UUID(int=7),
                 "partitions": [{"partition": 0, "fetch_offset": 0, "partition_max_bytes": 1000}]}]})]


def list_offsets(v):
    def ask(*partitions, isolation=0):
        return Step("ListOffsets", v, {"replica_id": -1, "isolation_level": isolation, "timeout_ms": 1000,
                                       "topics": [{"name": SHARED, "partitions": [
                                           {"current_leader_epoch": -1, "max_num_offsets": 1, **p}
                                           for p in partitions]}]})
    steps = [settled(SHARED),
             ask({"partition_index": 0, "timestamp": -2}, {"partition_index": 1, "timestamp": -1},
                 {"partition_index": 2, "timestamp": -2}),
             ask({"partition_index": 0, "timestamp": -1}, isolation=1),
             ask({"partition_index": 0, "timestamp": 1_700_000_000_002}),
             ask({"partition_index": 0, "timestamp": 1_800_000_000_000}),
             ask({"partition_index": 9, "timestamp": -1})]
    if v >= 4:
        steps.append(ask({"partition_index": 0, "timestamp": -1, "current_leader_epoch": 2}))
        steps.append(ask({"partition_index": 0, "timestamp": -1, "current_leader_epoch": 0}))
    if v >= 7:
        steps.append(ask({"partition_index": 0, "timestamp": -3}))
    if v >= 8:
        steps.append(ask({"partition_index": 0, "timestamp": -4}))
    if v >= 9:
        steps.append(ask({"partition_index": 0, "timestamp": -5}))
    return steps


def offset_for_leader_epoch(v):
    def ask(*partitions):
        return Step("OffsetForLeaderEpoch", v, {"replica_id": -1, "topics": [{"topic": SHARED, "partitions": [
            {"current_leader_epoch": -1, **p} for p in partitions]}]})
    return [settled(SHARED),
            ask({"partition": 0, "leader_epoch": 0}, {"partition": 1, "leader_epoch": 0},
                {"partition": 2, "leader_epoch": 3}),
            ask({"partition": 0, "leader_epoch": 0, "current_leader_epoch": 4}),
            ask({"partition": 0, "leader_epoch": 0, "current_leader_epoch": 0}),
            ask({"partition": 6, "leader_epoch": 0}),
            Step("OffsetForLeaderEpoch", v, {"replica_id": -1, "topics": [
                {"topic": "d-missing", "partitions": [{"partition": 0, "leader_epoch": 0}]}]})]


def describe_configs(v):
    return [Step("DescribeConfigs", v, {"include_synonyms": True, "include_documentation": False, "resources": [
        {"resource_type": 2, "resource_name": SHARED,
         "configuration_keys": ["cleanup.policy", "retention.ms", "max.message.bytes", "min.insync.replicas"]},
        {"resource_type": 2, "resource_name": "d-missing", "configuration_keys": ["retention.ms"]},
        {"resource_type": 2, "resource_name": "", "configuration_keys": None},
        {"resource_type": 4, "resource_name": "1", "configuration_keys": ["num.partitions", "message.max.bytes",
                                                                          "auto.create.topics.enable"]},
        {"resource_type": 4, "resource_name": "17", "configuration_keys": ["num.partitions"]},
        {"resource_type": 4, "resource_name": "not-a-number", "configuration_keys": ["num.partitions"]}]})]


def describe_cluster(v):
    return [Step("DescribeCluster", v, {"include_cluster_authorized_operations": True, "endpoint_type": 1,
                                        "include_fenced_brokers": False})]


def describe_log_dirs(v):
    return [settled(SHARED),
            Step("DescribeLogDirs", v, {"topics": [{"topic": SHARED, "partitions": [0, 1, 9]},
                                                   {"topic": "d-missing", "partitions": [0]}]})]


def describe_topic_partitions(v):
    return [settled(SHARED),
            Step("DescribeTopicPartitions", v, {"topics": [{"name": SHARED}, {"name": "d-missing"}],
                                                "response_partition_limit": 2000, "cursor": None}),
            Step("DescribeTopicPartitions", v, {"topics": [{"name": SHARED}], "response_partition_limit": 2,
                                                "cursor": None}),
            Step("DescribeTopicPartitions", v, {"topics": [{"name": SHARED}], "response_partition_limit": 2000,
                                                "cursor": {"topic_name": SHARED, "partition_index": 2}})]


# -- topic administration ------------------------------------------------------------------------------------------

def create_topics(v):
    base = f"d-create-{v}"

    def ask(*topics, validate_only=False):
        return Step("CreateTopics", v, {"topics": list(topics), "timeout_ms": 30000, "validate_only": validate_only})
    return [ask(topic(base, 2, retention_ms=3600000)),
            ask(topic(base, 2)),
            ask(topic(f"{base} bad"), topic("." if v % 2 else "..", 1), topic("x" * 250)),
            ask({**topic(f"{base}-rf"), "replication_factor": 3}),
            ask(topic(f"{base}-cfg", cleanup_policy="nope"), topic(f"{base}-unknown", no_such_config="1")),
            ask(topic(f"{base}-zero", 0), {**topic(f"{base}-neg"), "num_partitions": -7}),
            ask({**topic(f"{base}-default"), "num_partitions": -1, "replication_factor": -1}),
            ask(topic(f"{base}-dry", 4), validate_only=True),
            ask(topic(f"{base}-dup"), topic(f"{base}-dup")),
            settled(base),
            Step("Metadata", 12, {"topics": [{"name": f"{base}-dry"}], "allow_auto_topic_creation": False})]


def delete_topics(v):
    name = f"d-delete-{v}"
    by_id = v >= 6
    steps = [create(topic(name)), settled(name)]
    if by_id:
        steps.append(Step("DeleteTopics", v, {"timeout_ms": 30000, "topics": [
            {"name": None, "topic_id": Var(f"id:{name}")}, {"name": None, "topic_id": uuid.UUID(int=99)},
            {"name": "d-missing", "topic_id": NO_ID}]}))
    else:
        steps.append(Step("DeleteTopics", v, {"timeout_ms": 30000, "topic_names": [name, "d-missing"]}))
    steps.append(Step("Metadata", 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False},
                      pause=1.0))
    return steps


def create_partitions(v):
    name = f"d-partitions-{v}"

    def ask(*topics, validate_only=False):
        return Step("CreatePartitions", v, {"topics": list(topics), "timeout_ms": 30000,
                                            "validate_only": validate_only})
    return [create(topic(name, 2)), *ready(name),
            ask({"name": name, "count": 3, "assignments": None}),
            ask({"name": name, "count": 2, "assignments": None}),
            ask({"name": name, "count": 3, "assignments": None}),
            ask({"name": name, "count": 9, "assignments": None}, validate_only=True),
            ask({"name": "d-missing", "count": 4, "assignments": None}),
            ask({"name": name, "count": 5, "assignments": [{"broker_ids": [1]}]}),
            ask({"name": name, "count": 4, "assignments": None}, {"name": name, "count": 5, "assignments": None}),
            settled(name)]


def delete_records(v):
    name = f"d-delete-records-{v}"

    def ask(*partitions):
        return Step("DeleteRecords", v, {"timeout_ms": 30000, "topics": [
            {"name": name, "partitions": [{"partition_index": p, "offset": o} for p, o in partitions]}]})
    return [create(topic(name, 2)), *ready(name), produce(name, Batch(4)),
            ask((0, 2)), ask((0, 1)), ask((0, 9)), ask((0, -1)), ask((1, 0), (5, 0)),
            Step("DeleteRecords", v, {"timeout_ms": 30000, "topics": [
                {"name": "d-missing", "partitions": [{"partition_index": 0, "offset": 0}]}]}),
            Step("ListOffsets", 7, {"replica_id": -1, "topics": [{"name": name, "partitions": [
                {"partition_index": 0, "timestamp": -2, "current_leader_epoch": -1}]}]})]


def alter_configs(v):
    name = f"d-alter-{v}"

    def ask(resources, validate_only=False):
        return Step("AlterConfigs", v, {"resources": resources, "validate_only": validate_only})
    return [create(topic(name)), *ready(name),
            ask([{"resource_type": 2, "resource_name": name,
                  "configs": [{"name": "retention.ms", "value": "7200000"}, {"name": "cleanup.policy",
                                                                             "value": "compact"}]}]),
            ask([{"resource_type": 2, "resource_name": name, "configs": [{"name": "retention.ms", "value": "abc"}]}]),
            ask([{"resource_type": 2, "resource_name": name, "configs": [{"name": "no.such", "value": "1"}]}]),
            ask([{"resource_type": 2, "resource_name": "d-missing", "configs": [{"name": "retention.ms",
                                                                                  "value": "1"}]}]),
            ask([{"resource_type": 2, "resource_name": name, "configs": [{"name": "segment.ms", "value": "5"}]}],
                validate_only=True),
            ask([{"resource_type": 9, "resource_name": name, "configs": []}]),
            Step("DescribeConfigs", 4, {"include_synonyms": False, "resources": [
                {"resource_type": 2, "resource_name": name,
                 "configuration_keys": ["retention.ms", "cleanup.policy", "segment.ms"]}]})]


def incremental_alter_configs(v):
    name = f"d-incremental-{v}"

    def ask(*configs, resource_type=2, resource_name=name, validate_only=False):
        return Step("IncrementalAlterConfigs", v, {"validate_only": validate_only, "resources": [
            {"resource_type": resource_type, "resource_name": resource_name,
             "configs": [{"name": c, "config_operation": op, "value": value} for c, op, value in configs]}]})
    return [create(topic(name)), *ready(name),
            ask(("retention.ms", 0, "5000"), ("cleanup.policy", 2, "compact")),
            ask(("retention.ms", 1, None)),
            ask(("cleanup.policy", 3, "delete")),
            ask(("retention.ms", 2, "1")),
            ask(("retention.ms", 7, "1")),
            ask(("max.message.bytes", 0, "-5")),
            ask(("retention.ms", 0, "1"), ("retention.ms", 0, "2")),
            ask(("retention.ms", 0, "1"), resource_name="d-missing"),
            ask(("log.retention.ms", 0, "99999999"), resource_type=4, resource_name="1", validate_only=True),
            ask(("num.partitions", 0, "3"), resource_type=4, resource_name="1", validate_only=True),
            Step("DescribeConfigs", 4, {"include_synonyms": False, "resources": [
                {"resource_type": 2, "resource_name": name, "configuration_keys": ["retention.ms",
                                                                                   "cleanup.policy"]}]})]


# -- produce -------------------------------------------------------------------------------------------------------

def produce_sweep(v):
    name = f"d-produce-{v}"
    return [create(topic(name, 2)), *ready(name),
            produce(name, Batch(3), version=v),
            produce(name, Batch(2, keys=True), version=v, partition=1),
            produce(name, Batch(1), version=v, acks=1),
            produce(name, Batch(1), version=v, partition=4),
            produce("d-missing-produce", Batch(1), version=v),
            produce(name, Batch(1), version=v, acks=2),
            produce(name, Batch(1, mangle=corrupt_crc), version=v),
            produce(name, Batch(2, mangle=bad_record_count), version=v),
            Step("Fetch", 12, fetch_fields(name, [{"partition": 0, "fetch_offset": 0},
                                                  {"partition": 1, "fetch_offset": 0}], 12))]


def produce_limits(v):
    small = f"d-small-{v}"
    segment = f"d-segment-{v}"
    return [create(topic(small, max_message_bytes=1000), topic(segment, segment_bytes=1048576,
                                                               max_message_bytes=3000000)),
            *ready(small, segment),
            produce(small, Batch(1, value_size=500), version=v),
            produce(small, Batch(1, value_size=2000), version=v),
            produce(segment, Batch(2, value_size=800_000), version=v),
            produce("__consumer_offsets", Batch(1), version=v)]


# -- idempotent and transactional producers --------------------------------------------------------------------------

def idempotent(v):
    name = f"d-idempotent-{v}"

    def send(sequence, count=2, epoch=Var("epoch"), producer=Var("pid")):
        return produce(name, Batch(count, producer_id=producer, producer_epoch=epoch, base_sequence=sequence))
    return [create(topic(name)), *ready(name),
            Step("InitProducerId", v, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                       "producer_id": -1, "producer_epoch": -1},
                 save={"pid": "producer_id", "epoch": "producer_epoch"}, retry=COORDINATOR_WAIT),
            send(0), send(0), send(2), send(5), send(3), send(4, epoch=3), send(0, producer=123456789),
            Step("InitProducerId", v, {"transactional_id": None, "transaction_timeout_ms": 60000,
                                       "producer_id": Var("pid"), "producer_epoch": Var("epoch")}),
            Step("DescribeProducers", 0, {"topics": [{"name": name, "partition_indexes": [0, 3]}]})]


def init_txn(txn: str, v: int, **options) -> Step:
    options = {"retry": COORDINATOR_WAIT | RETRY_CONCURRENT, "save": {"pid": "producer_id", "epoch": "producer_epoch"},
               **options}
    return Step("InitProducerId", v, {"transactional_id": txn, "transaction_timeout_ms": 60000,
                                      "producer_id": -1, "producer_epoch": -1}, **options)


def add_partitions(txn: str, v: int, name: str, partitions=(0,), epoch=Var("epoch"), **options) -> Step:
    topics = [{"name": name, "partitions": list(partitions)}]
    if v >= 4:
        fields = {"transactions": [{"transactional_id": txn, "producer_id": Var("pid"), "producer_epoch": epoch,
                                    "verify_only": False, "topics": topics}]}
    else:
        fields = {"v3_and_below_transactional_id": txn, "v3_and_below_producer_id": Var("pid"),
                  "v3_and_below_producer_epoch": epoch, "v3_and_below_topics": topics}
    return Step("AddPartitionsToTxn", v, fields, **options)


def end_txn(txn: str, v: int, committed: bool, epoch=Var("epoch"), producer=Var("pid"), **options) -> Step:
    return Step("EndTxn", v, {"transactional_id": txn, "producer_id": producer, "producer_epoch": epoch,
                              "committed": committed}, **options)


def transactions(v):
    """A committed transaction with offsets, an aborted one, and the wrong moves around them, all at EndTxn and
    AddPartitionsToTxn version `v` (the other APIs at a version of the same era)."""
    name, txn, group = f"d-txn-{v}", f"d-txn-{v}", f"d-txn-group-{v}"
    add_version = 3 if v < 5 else 4  # v4+ AddPartitionsToTxn is the brokers' own (verify_only) form
    txn_produce = lambda sequence, epoch=Var("epoch"): produce(  # noqa: E731
        name, Batch(2, producer_id=Var("pid"), producer_epoch=epoch, base_sequence=sequence, transactional=True),
        transactional_id=txn)
    return [create(topic(name, 2)), *ready(name),
            end_txn(txn, v, True, epoch=0, producer=1000, retry=COORDINATOR_WAIT),
            init_txn(txn, 4),
            end_txn(txn, v, True),
            txn_produce(0),
            add_partitions(txn, add_version, name, (0, 1, 7)),
            add_partitions(txn, add_version, name, (0,)),
            txn_produce(0),
            Step("AddOffsetsToTxn", 3, {"transactional_id": txn, "producer_id": Var("pid"),
                                        "producer_epoch": Var("epoch"), "group_id": group}),
            Step("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": [group]}, retry=COORDINATOR_WAIT),
            Step("TxnOffsetCommit", 3, {"transactional_id": txn, "group_id": group, "producer_id": Var("pid"),
                                        "producer_epoch": Var("epoch"), "generation_id": -1, "member_id": "",
                                        "group_instance_id": None, "topics": [{"name": name, "partitions": [
                                            {"partition_index": 0, "committed_offset": 2,
                                             "committed_leader_epoch": -1, "committed_metadata": "m"}]}]},
                 retry=COORDINATOR_WAIT),
            Step("DescribeTransactions", 0, {"transactional_ids": [txn, "d-no-such-txn"]}),
            Step("ListTransactions", 1, {"state_filters": ["Ongoing"], "producer_id_filters": [],
                                         "duration_filter": -1}),
            Step("Fetch", 12, fetch_fields(name, [{"partition": 0, "fetch_offset": 0}], 12, isolation=1)),
            end_txn(txn, v, True),
            end_txn(txn, v, True, retry=RETRY_CONCURRENT),
            end_txn(txn, v, False, retry=RETRY_CONCURRENT),
            Step("OffsetFetch", 8, {"require_stable": True, "groups": [{"group_id": group, "topics": [
                {"name": name, "partition_indexes": [0]}]}]}, retry=frozenset({14, 15, 16, 86}) | RETRY_CONCURRENT),
            Step("Fetch", 12, fetch_fields(name, [{"partition": 0, "fetch_offset": 0}], 12, isolation=1),
                 retry=frozenset(), pause=0.5),
            # an aborted transaction, then the fenced and stale moves
            add_partitions(txn, add_version, name, (1,), retry=RETRY_CONCURRENT),
            produce(name, Batch(1, producer_id=Var("pid"), producer_epoch=Var("epoch"), base_sequence=0,
                                transactional=True), transactional_id=txn, partition=1),
            init_txn(txn, 4, save={}),
            end_txn(txn, v, False, retry=RETRY_CONCURRENT),
            Step("ListOffsets", 7, {"replica_id": -1, "isolation_level": 1, "topics": [{"name": name, "partitions": [
                {"partition_index": 1, "timestamp": -1, "current_leader_epoch": -1}]}]}),
            init_txn(txn, 4, save={"old_epoch": "producer_epoch"}, compare=False),
            Step("InitProducerId", 4, {"transactional_id": txn, "transaction_timeout_ms": 60000,
                                       "producer_id": -1, "producer_epoch": -1},
                 retry=COORDINATOR_WAIT | RETRY_CONCURRENT, save={"epoch": "producer_epoch"}),
            add_partitions(txn, add_version, name, (0,), epoch=Var("old_epoch"), retry=RETRY_CONCURRENT),
            txn_produce(0, epoch=Var("old_epoch")),
            end_txn(txn, v, True, epoch=Var("old_epoch"), retry=RETRY_CONCURRENT),
            Step("InitProducerId", 4, {"transactional_id": txn, "transaction_timeout_ms": 60000,
                                       "producer_id": Var("pid"), "producer_epoch": 99}, retry=COORDINATOR_WAIT),
            Step("InitProducerId", 4, {"transactional_id": txn, "transaction_timeout_ms": 0x7FFFFFFF,
                                       "producer_id": -1, "producer_epoch": -1}, retry=COORDINATOR_WAIT),
            Step("AddOffsetsToTxn", 3, {"transactional_id": "d-no-such-txn", "producer_id": Var("pid"),
                                        "producer_epoch": Var("epoch"), "group_id": group},
                 retry=COORDINATOR_WAIT)]


# -- classic groups ------------------------------------------------------------------------------------------------

# ConsumerProtocolSubscription v0: topics [d-shared], no user data
PROTOCOL = [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x01\x00\x08d-shared\xff\xff\xff\xff"}]


def join(group: str, v: int, member=Var("a"), instance=None, connection="main", **options) -> Step:
    return Step("JoinGroup", v, {"group_id": group, "session_timeout_ms": 30000, "rebalance_timeout_ms": 20000,
                                 "member_id": member, "group_instance_id": instance, "protocol_type": "consumer",
                                 "protocols": PROTOCOL, "reason": "differential"},
                connection=connection, retry=COORDINATOR_WAIT, **options)


def heartbeat(group: str, v: int, generation=Var("generation"), member=Var("a"), instance=None) -> Step:
    return Step("Heartbeat", v, {"group_id": group, "generation_id": generation, "member_id": member,
                                 "group_instance_id": instance})


def sync(group: str, v: int, generation=Var("generation"), member=Var("a"), assignments=(), instance=None,
         connection="main", **options) -> Step:
    return Step("SyncGroup", v, {"group_id": group, "generation_id": generation, "member_id": member,
                                 "group_instance_id": instance, "protocol_type": "consumer", "protocol_name": "range",
                                 "assignments": list(assignments)}, connection=connection, **options)


def classic_group(v):
    """The classic group protocol at JoinGroup version `v` (the other group APIs at the version of the same era)."""
    group = f"d-group-{v}"
    hv = min(v // 2, 4)  # Heartbeat, SyncGroup, LeaveGroup of the same release as JoinGroup v
    needs_id = v >= 4
    first = ([join(group, v, member="", save={"a": "member_id"}),
              join(group, v, save={"a": "member_id", "generation": "generation_id"})] if needs_id else
             [join(group, v, member="", save={"a": "member_id", "generation": "generation_id"})])
    return [*first,
            sync(group, hv, assignments=[{"member_id": Var("a"), "assignment": b"\x00\x01"}]),
            heartbeat(group, hv),
            heartbeat(group, hv, generation=99),
            heartbeat(group, hv, member="d-unknown-member"),
            sync(group, hv, generation=99),
            Step("OffsetCommit", 8, {"group_id": group, "generation_id_or_member_epoch": Var("generation"),
                                     "member_id": Var("a"), "group_instance_id": None, "topics": [
                                         {"name": SHARED, "partitions": [
                                             {"partition_index": 0, "committed_offset": 3,
                                              "committed_leader_epoch": -1, "committed_metadata": "meta"},
                                             {"partition_index": 9, "committed_offset": 1,
                                              "committed_leader_epoch": -1, "committed_metadata": ""}]}]}),
            Step("OffsetCommit", 8, {"group_id": group, "generation_id_or_member_epoch": 99,
                                     "member_id": Var("a"), "topics": [{"name": SHARED, "partitions": [
                                         {"partition_index": 0, "committed_offset": 4}]}]}),
            # a second member makes a rebalance: the first learns it from its heartbeat and rejoins
            join(group, v, member="", connection="b", save={"b": "member_id"}) if needs_id else
            join(group, v, member="", connection="b", background=True),
            *([join(group, v, member=Var("b"), connection="b", background=True)] if needs_id else []),
            Step("Heartbeat", hv, {"group_id": group, "generation_id": Var("generation"), "member_id": Var("a"),
                                   "group_instance_id": None}, pause=0.5),
            join(group, v, save={"generation": "generation_id"}),
            Collect("JoinGroup", v, "b", save={"b": "member_id"}),
            sync(group, hv, assignments=[{"member_id": Var("a"), "assignment": b"\x00\x01"},
                                         {"member_id": Var("b"), "assignment": b"\x00\x02"}]),
            sync(group, hv, member=Var("b"), connection="b"),
            Step("DescribeGroups", 5, {"groups": [group, "d-no-such-group"], "include_authorized_operations": True}),
            Step("ListGroups", 4, {"states_filter": ["Stable"]}, compare=False),
            Step("OffsetFetch", 7, {"group_id": group, "topics": [{"name": SHARED, "partition_indexes": [0, 1]}],
                                    "require_stable": False}),
            Step("LeaveGroup", hv + 1, {"group_id": group, "member_id": Var("b"), "members": [
                {"member_id": Var("b"), "group_instance_id": None, "reason": "done"},
                {"member_id": "d-unknown-member", "group_instance_id": None, "reason": "done"}]}),
            heartbeat(group, hv, member=Var("b")),
            heartbeat(group, hv),
            Step("DeleteGroups", 2, {"groups_names": [group, "d-no-such-group"]}),
            Step("OffsetDelete", 0, {"group_id": group, "topics": [{"name": SHARED, "partitions": [
                {"partition_index": 0}]}]})]


def static_group(v):
    group = f"d-static-{v}"
    hv = min(v // 2, 4) if v >= 5 else 3
    return [join(group, v, member="", instance="d-instance", save={"a": "member_id",
                                                                    "generation": "generation_id"}),
            sync(group, hv, instance="d-instance",
                 assignments=[{"member_id": Var("a"), "assignment": b"\x00\x01"}]),
            heartbeat(group, hv, instance="d-instance"),
            join(group, v, member="", instance="d-instance", connection="b", save={"b": "member_id"}),
            heartbeat(group, hv, instance="d-instance"),
            heartbeat(group, hv, member=Var("b"), instance="d-instance"),
            join(group, v, member=Var("a"), instance="d-instance"),
            heartbeat(group, hv, member=Var("b"), instance="d-other-instance"),
            Step("LeaveGroup", 4, {"group_id": group, "members": [
                {"member_id": "", "group_instance_id": "d-instance"},
                {"member_id": "", "group_instance_id": "d-missing-instance"}]}),
            Step("DescribeGroups", 5, {"groups": [group], "include_authorized_operations": False})]


def find_coordinator(v):
    if v >= 4:
        fields = {"key_type": 0, "coordinator_keys": ["d-find-group", ""]}
        other = {"key_type": 1, "coordinator_keys": ["d-find-txn"]}
    else:
        fields, other = {"key": "d-find-group", "key_type": 0}, {"key": "d-find-txn", "key_type": 1}
    steps = [Step("FindCoordinator", v, fields, retry=COORDINATOR_WAIT)]
    if v >= 1:
        steps.append(Step("FindCoordinator", v, other, retry=COORDINATOR_WAIT))
        steps.append(Step("FindCoordinator", v, {**other, "key_type": 5}))
    return steps


def list_groups(v):
    if v < 4:  # every group of the broker, made by every other case: sent, not compared
        return [Step("ListGroups", v, {}, compare=False)]
    return [Step("ListGroups", v, {"states_filter": ["NoSuchState"], "types_filter": []}),
            Step("ListGroups", v, {"states_filter": ["Dead"], "types_filter": ["classic"]})]


def consumer_group(v):
    """KIP-848's ConsumerGroupHeartbeat: a member joins, is given partitions, is fenced by a wrong epoch, leaves."""
    group = f"d-consumer-{v}"
    member = str(uuid.UUID(int=v + 1))

    def beat(epoch, member_id=member, save=None, **fields):
        return Step("ConsumerGroupHeartbeat", v, {
            "group_id": group, "member_id": member_id, "member_epoch": epoch, "instance_id": None,
            "rack_id": None, "rebalance_timeout_ms": -1, "subscribed_topic_names": None,
            "subscribed_topic_regex": None, "server_assignor": None, "topic_partitions": None, **fields},
            retry=COORDINATOR_WAIT, save=save or {})
    return [settled(SHARED),
            beat(0, rebalance_timeout_ms=30000, subscribed_topic_names=[SHARED], topic_partitions=[],
                 save={"epoch": "member_epoch"}),
            beat(Var("epoch"), topic_partitions=[]),
            beat(77),
            beat(1, member_id="d-unknown-member"),
            beat(0, server_assignor="no-such-assignor", rebalance_timeout_ms=30000,
                 subscribed_topic_names=[SHARED], topic_partitions=[], member_id=str(uuid.UUID(int=900 + v))),
            beat(0, member_id=""),
            Step("ConsumerGroupDescribe", v, {"group_ids": [group, "d-no-such-group"],
                                              "include_authorized_operations": True}),
            beat(-1),
            beat(Var("epoch"))]


def share_group(v):
    """KIP-932: a group no one joined is not found; a fetch or acknowledgement in a session never opened is
    refused (the whole exchange with real clients is tests/share)."""
    member = str(uuid.UUID(int=700 + v))
    return [Step("ShareGroupDescribe", 1, {"group_ids": ["d-no-such-share-group"],
                                           "include_authorized_operations": False}, retry=COORDINATOR_WAIT),
            Step("ShareFetch", v, {"group_id": "d-share", "member_id": member, "share_session_epoch": 5,
                                   "max_wait_ms": 0, "min_bytes": 1, "max_bytes": 1024, "max_records": 10,
                                   "batch_size": 10, "topics": [], "forgotten_topics_data": []}),
            Step("ShareAcknowledge", v, {"group_id": "d-share", "member_id": member, "share_session_epoch": 5,
                                         "topics": []}),
            Step("ShareGroupHeartbeat", 1, {"group_id": "d-share", "member_id": member, "member_epoch": 0,
                                            "rack_id": None, "subscribed_topic_names": None})]


def share_group_offsets(v):
    """The share group offsets APIs on a group no one made, and a reset naming a topic that does not exist."""
    return [Step("DescribeShareGroupOffsets", v, {"groups": [{"group_id": "d-no-such-share-group", "topics": None}]},
                 retry=COORDINATOR_WAIT),
            Step("DeleteShareGroupOffsets", 0, {"group_id": "d-no-such-share-group",
                                                "topics": [{"topic_name": SHARED}]}, retry=COORDINATOR_WAIT),
            Step("AlterShareGroupOffsets", 0, {"group_id": f"d-share-reset-{v}", "topics": [
                {"topic_name": "d-no-such-topic", "partitions": [{"partition_index": 0, "start_offset": 0}]}]},
                 retry=COORDINATOR_WAIT)]


# -- ACLs and authorization ----------------------------------------------------------------------------------------

DENIED = "d-denied"


def acl(resource_type, name, pattern=3, principal="User:ANONYMOUS", operation=2, permission=2) -> dict:
    return {"resource_type": resource_type, "resource_name": name, "resource_pattern_type": pattern,
            "principal": principal, "host": "*", "operation": operation, "permission_type": permission}


def authorization(v):
    """DENY ACLs for the ANONYMOUS principal on a prefix of topics and on a group, created, described and honoured
    the same (CreateAcls/DescribeAcls/DeleteAcls at version `v`)."""
    prefix = f"{DENIED}-{v}"
    name = f"{prefix}-topic"
    filters = {"resource_type_filter": 2, "resource_name_filter": prefix, "pattern_type_filter": 4,
               "principal_filter": None, "host_filter": None, "operation": 1, "permission_type": 1}
    return [create(topic(name)), *ready(name),
            Step("CreateAcls", v, {"creations": [acl(2, prefix, pattern=4), acl(3, f"{prefix}-group"),
                                                 acl(2, f"{prefix}-read", operation=3, permission=3)]}),
            *(Step("CreateAcls", v, {"creations": [bad]}) for bad in (
                acl(2, "x", pattern=1), acl(99, "x"), acl(2, "y", principal="bad"), acl(2, "z", operation=0))),
            Step("DescribeAcls", v, {**filters, "pattern_type_filter": 1}, pause=1.0),
            Step("DescribeAcls", v, {**filters, "resource_name_filter": None, "pattern_type_filter": 2}),
            Step("DescribeAcls", v, {**filters, "pattern_type_filter": 0}),
            Step("Metadata", 12, {"topics": [{"name": name}, {"name": SHARED}], "allow_auto_topic_creation": True,
                                  "include_topic_authorized_operations": True}),
            produce(name, Batch(1)),
            Step("Fetch", 12, fetch_fields(name, [{"partition": 0, "fetch_offset": 0}], 12)),
            Step("ListOffsets", 7, {"replica_id": -1, "topics": [{"name": name, "partitions": [
                {"partition_index": 0, "timestamp": -1, "current_leader_epoch": -1}]}]}),
            Step("OffsetForLeaderEpoch", 4, {"replica_id": -1, "topics": [{"topic": name, "partitions": [
                {"partition": 0, "leader_epoch": 0, "current_leader_epoch": -1}]}]}),
            Step("CreateTopics", 7, {"topics": [topic(f"{prefix}-new"), topic(f"{prefix}-read-x")],
                                     "timeout_ms": 30000, "validate_only": True}),
            Step("DescribeConfigs", 4, {"include_synonyms": False, "resources": [
                {"resource_type": 2, "resource_name": name, "configuration_keys": ["retention.ms"]}]}),
            Step("DeleteTopics", 5, {"timeout_ms": 30000, "topic_names": [name]}),
            Step("DeleteRecords", 2, {"timeout_ms": 30000, "topics": [
                {"name": name, "partitions": [{"partition_index": 0, "offset": 0}]}]}),
            Step("CreatePartitions", 3, {"topics": [{"name": name, "count": 2, "assignments": None}],
                                         "timeout_ms": 30000, "validate_only": True}),
            join(f"{prefix}-group", 9, member=""),
            Step("OffsetFetch", 8, {"groups": [{"group_id": f"{prefix}-group", "topics": None}],
                                    "require_stable": False}),
            Step("OffsetCommit", 8, {"group_id": f"{prefix}-group", "generation_id_or_member_epoch": -1,
                                     "member_id": "", "topics": [{"name": SHARED, "partitions": [
                                         {"partition_index": 0, "committed_offset": 1}]}]}),
            Step("DescribeGroups", 5, {"groups": [f"{prefix}-group"], "include_authorized_operations": True}),
            Step("DeleteGroups", 2, {"groups_names": [f"{prefix}-group"]}),
            Step("DeleteAcls", v, {"filters": [filters, {**filters, "resource_type_filter": 3,
                                                         "resource_name_filter": f"{prefix}-group",
                                                         "pattern_type_filter": 3}]}),
            Step("DeleteAcls", v, {"filters": [filters]}),
            Step("DeleteTopics", 5, {"timeout_ms": 30000, "topic_names": [name]}, compare=False, pause=1.0),
            Step("Metadata", 12, {"topics": [{"name": name}], "allow_auto_topic_creation": False},
                 retry=frozenset({29}), settle=30)]


# -- quotas and SCRAM credentials ----------------------------------------------------------------------------------

def client_quotas(v):
    user = f"d-quota-user-{v}"

    def alter(entity, ops, validate_only=False):
        return Step("AlterClientQuotas", v, {"validate_only": validate_only, "entries": [
            {"entity": [{"entity_type": t, "entity_name": n} for t, n in entity],
             "ops": [{"key": k, "value": value, "remove": remove} for k, value, remove in ops]}]})

    def describe(components, strict=False, pause=0.0):  # Kafka's brokers learn quotas from its controller
        return Step("DescribeClientQuotas", v, {"strict": strict, "components": [
            {"entity_type": t, "match_type": m, "match": n} for t, m, n in components]}, pause=pause)
    return [alter([("user", user), ("client-id", "d-client")], [("producer_byte_rate", 1024.0, False),
                                                                ("consumer_byte_rate", 2048.0, False)]),
            alter([("user", user)], [("request_percentage", 50.0, False)]),
            alter([("user", user)], [("no_such_quota", 1.0, False)]),
            alter([("user", user)], [("producer_byte_rate", -5.0, False)]),
            alter([("nobody", "x")], [("producer_byte_rate", 1.0, False)]),
            alter([("client-id", "d-dry")], [("producer_byte_rate", 1.0, False)], validate_only=True),
            describe([("user", 0, user)], strict=False, pause=1.0),
            describe([("user", 0, user)], strict=True),
            describe([("user", 0, user), ("client-id", 0, "d-client")], strict=True),
            describe([("client-id", 0, "d-dry")]),
            describe([("user", 2, None), ("client-id", 1, None)]),
            describe([("nobody", 0, "x")]),
            alter([("user", user)], [("request_percentage", 0.0, True)]),
            describe([("user", 0, user)], strict=True, pause=1.0)]


def scram_credentials(v):
    user = f"d-scram-{v}"
    upsert = {"name": user, "mechanism": 2, "iterations": 8192, "salt": b"salt" * 4,
              "salted_password": b"p" * 64}
    return [Step("DescribeUserScramCredentials", v, {"users": [{"name": user}]}),
            Step("AlterUserScramCredentials", v, {"deletions": [], "upsertions": [upsert]}),
            Step("AlterUserScramCredentials", v, {"deletions": [], "upsertions": [{**upsert, "iterations": 10}]}),
            Step("AlterUserScramCredentials", v, {"deletions": [], "upsertions": [{**upsert, "mechanism": 9}]}),
            Step("AlterUserScramCredentials", v, {"deletions": [{"name": user, "mechanism": 1}], "upsertions": []}),
            Step("AlterUserScramCredentials", v, {"deletions": [{"name": "", "mechanism": 1}], "upsertions": []}),
            Step("AlterUserScramCredentials", v, {"deletions": [{"name": user, "mechanism": 2}],
                                                  "upsertions": [upsert]}),
            Step("DescribeUserScramCredentials", v, {"users": [{"name": user}, {"name": "d-nobody"},
                                                               {"name": user}]}, pause=0.5),
            Step("DescribeUserScramCredentials", v, {"users": None})]


# -- the cluster and its replicas ----------------------------------------------------------------------------------

def replica_admin(v):
    name = f"d-replicas-{v}"
    return [create(topic(name, 2)), *ready(name),
            Step("ElectLeaders", v, {"election_type": 0, "timeout_ms": 30000, "topic_partitions": [
                {"topic": name, "partitions": [0, 5]}, {"topic": "d-missing", "partitions": [0]}]}),
            Step("ElectLeaders", v, {"election_type": 1, "timeout_ms": 30000, "topic_partitions": None}),
            Step("AlterPartitionReassignments", 0, {"timeout_ms": 30000, "topics": [
                {"name": name, "partitions": [{"partition_index": 0, "replicas": [7]},
                                              {"partition_index": 9, "replicas": [1]},
                                              {"partition_index": 1, "replicas": None}]}]}),
            Step("ListPartitionReassignments", 0, {"timeout_ms": 30000, "topics": None}),
            Step("ListPartitionReassignments", 0, {"timeout_ms": 30000, "topics": [
                {"name": name, "partition_indexes": [0, 1]}]}),
            Step("AlterReplicaLogDirs", min(v + 1, 2), {"dirs": [{"path": "/no/such/dir", "topics": [
                {"name": name, "partitions": [0]}]}]}),
            Step("WriteTxnMarkers", 1, {"markers": [{"producer_id": 424242, "producer_epoch": 0,
                                                     "transaction_result": False, "coordinator_epoch": 0,
                                                     "topics": [{"name": name, "partition_indexes": [0]},
                                                                {"name": "d-missing", "partition_indexes": [0]}]}]})]


def sasl(v):
    return [Step("SaslHandshake", v, {"mechanism": "PLAIN"}),
            Step("SaslAuthenticate", 2, {"auth_bytes": b"\x00user\x00secret"}, connection="auth"),
            Step("ApiVersions", 3, {"client_software_name": "differential", "client_software_version": "1.0"},
                 connection="auth")]


def list_config_resources(v):
    return [Step("ListConfigResources", v, {"resource_types": []}, compare=True)]


# -- the other versions of the coordinators' APIs: one request each, at every version both serve ---------------------

def offsets(v):
    group = f"d-offsets-{v}"
    return [Step("OffsetCommit", v, {"group_id": group, "generation_id_or_member_epoch": -1, "member_id": "",
                                     "group_instance_id": None, "retention_time_ms": -1, "topics": [
                                         {"name": SHARED, "partitions": [
                                             {"partition_index": 0, "committed_offset": 2,
                                              "committed_leader_epoch": -1, "commit_timestamp": -1,
                                              "committed_metadata": "m"},
                                             {"partition_index": 8, "committed_offset": 1}]}]},
                 retry=COORDINATOR_WAIT),
            Step("OffsetCommit", v, {"group_id": group, "generation_id_or_member_epoch": 5, "member_id": "d-nobody",
                                     "topics": [{"name": SHARED, "partitions": [
                                         {"partition_index": 0, "committed_offset": 3}]}]})]


def offset_fetch(v):
    group = f"d-offsets-{min(max(v + 1, 2), 9)}"  # a group offsets() committed to (its v2 at the least)
    if v >= 8:
        fields = {"require_stable": True, "groups": [
            {"group_id": group, "member_id": None, "member_epoch": -1,
             "topics": [{"name": SHARED, "partition_indexes": [0, 1]}]},
            {"group_id": "d-no-such-group", "topics": None}]}
    else:
        fields = {"group_id": group, "topics": [{"name": SHARED, "partition_indexes": [0, 1]}],
                  "require_stable": True}
    return [Step("OffsetFetch", v, fields, retry=COORDINATOR_WAIT)]


def lone(api_name: str, fields):
    """A case of one request to `api_name`, its fields a function of the version."""
    return lambda v: [Step(api_name, v, fields(v), retry=COORDINATOR_WAIT, connection=f"v{v}")]


TXN_UNKNOWN = "d-no-such-txn"
LONE = {
    "SyncGroup": lambda v: {"group_id": f"d-sync-{v}", "generation_id": 1, "member_id": "d-nobody",
                            "group_instance_id": None, "protocol_type": "consumer", "protocol_name": "range",
                            "assignments": []},
    "DescribeGroups": lambda v: {"groups": ["d-no-such-group", f"d-offsets-{min(max(v, 2), 9)}"],
                                 "include_authorized_operations": True},
    "DeleteGroups": lambda v: {"groups_names": ["d-no-such-group", f"d-offsets-{v + 2}"]},
    "AddPartitionsToTxn": lambda v: {
        "v3_and_below_transactional_id": TXN_UNKNOWN, "v3_and_below_producer_id": 7,
        "v3_and_below_producer_epoch": 0, "v3_and_below_topics": [{"name": SHARED, "partitions": [0]}],
        "transactions": [{"transactional_id": TXN_UNKNOWN, "producer_id": 7, "producer_epoch": 0,
                          "verify_only": v % 2 == 0, "topics": [{"name": SHARED, "partitions": [0]}]}]},
    "AddOffsetsToTxn": lambda v: {"transactional_id": TXN_UNKNOWN, "producer_id": 7, "producer_epoch": 0,
                                  "group_id": "d-offsets-2"},
    "TxnOffsetCommit": lambda v: {"transactional_id": TXN_UNKNOWN, "group_id": f"d-txn-offsets-{v}",
                                  "producer_id": 7, "producer_epoch": 0, "generation_id": -1, "member_id": "",
                                  "group_instance_id": None, "topics": [{"name": SHARED, "partitions": [
                                      {"partition_index": 0, "committed_offset": 1, "committed_leader_epoch": -1,
                                       "committed_metadata": ""}]}]},
    "SaslAuthenticate": lambda v: {"auth_bytes": b"\x00user\x00secret"},
    "ListTransactions": lambda v: {"state_filters": ["Ongoing", "NoSuchState"], "producer_id_filters": [7],
                                   "duration_filter": 60000},
    # the share coordinator's state APIs (brokers ask them), on a share-partition no one has state for
    **{name: (lambda fields: lambda v: {"group_id": "d-no-such-share-group", "topics": [{
        "topic_id": uuid.UUID(int=932), "partitions": [{"partition": 0, **fields}]}]})(fields) for name, fields in (
        ("ReadShareGroupState", {"leader_epoch": 0}), ("ReadShareGroupStateSummary", {"leader_epoch": 0}),
        ("DeleteShareGroupState", {}), ("InitializeShareGroupState", {"state_epoch": 0, "start_offset": 0}),
        ("WriteShareGroupState", {"state_epoch": 0, "leader_epoch": 0, "start_offset": 0, "state_batches": []}))},
}


def all_cases() -> list[Case]:
    cases = [
        *sweep("api-versions", "ApiVersions", api_versions),
        *sweep("metadata", "Metadata", metadata),
        *sweep("metadata-auto-create", "Metadata", metadata_auto_create, ends),
        *sweep("fetch", "Fetch", fetch),
        *sweep("list-offsets", "ListOffsets", list_offsets),
        *sweep("offset-for-leader-epoch", "OffsetForLeaderEpoch", offset_for_leader_epoch),
        *sweep("describe-configs", "DescribeConfigs", describe_configs),
        *sweep("describe-cluster", "DescribeCluster", describe_cluster),
        *sweep("describe-log-dirs", "DescribeLogDirs", describe_log_dirs),
        *sweep("describe-topic-partitions", "DescribeTopicPartitions", describe_topic_partitions),
        *sweep("create-topics", "CreateTopics", create_topics),
        *sweep("delete-topics", "DeleteTopics", delete_topics, ends),
        *sweep("create-partitions", "CreatePartitions", create_partitions, ends),
        *sweep("delete-records", "DeleteRecords", delete_records, ends),
        *sweep("alter-configs", "AlterConfigs", alter_configs, ends),
        *sweep("incremental-alter-configs", "IncrementalAlterConfigs", incremental_alter_configs),
        *sweep("produce", "Produce", produce_sweep),
        *sweep("produce-limits", "Produce", produce_limits, ends),
        *sweep("idempotent", "InitProducerId", idempotent, ends),
        *sweep("transactions", "EndTxn", transactions, ends),
        *sweep("classic-group", "JoinGroup", classic_group, ends),
        *sweep("static-group", "JoinGroup", static_group, lambda name: [5, versions(name)[-1]]),
        *sweep("find-coordinator", "FindCoordinator", find_coordinator),
        *sweep("list-groups", "ListGroups", list_groups),
        *sweep("consumer-group", "ConsumerGroupHeartbeat", consumer_group),
        *sweep("share-group", "ShareFetch", share_group),
        *sweep("share-group-offsets", "DescribeShareGroupOffsets", share_group_offsets),
        *sweep("authorization", "CreateAcls", authorization, ends),
        *sweep("client-quotas", "DescribeClientQuotas", client_quotas),
        *sweep("scram-credentials", "DescribeUserScramCredentials", scram_credentials),
        *sweep("replica-admin", "ElectLeaders", replica_admin, ends),
        *sweep("sasl", "SaslHandshake", sasl),
        *sweep("list-config-resources", "ListConfigResources", list_config_resources),
        *sweep("offset-commit", "OffsetCommit", offsets),
        *sweep("offset-fetch", "OffsetFetch", offset_fetch),
        *(case for name, fields in LONE.items() for case in sweep(f"lone-{name}", name, lone(name, fields))),
    ]
    return cases


def uncovered_apis(cases: list[Case]) -> set[str]:
    """Odradek's APIs that no step of `cases` sends."""
    sent = {step.api for case in cases for step in case.steps}
    return {a.name for a in API_BY_KEY.values()} - sent
