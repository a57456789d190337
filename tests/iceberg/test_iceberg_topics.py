"""Iceberg topics against real broker processes: a key_value topic's records in its table exactly once (pyiceberg
reads them back, aborted transactions left out), a disabled topic writes nothing, a bad mode or spec is refused, and
a broker killed with SIGKILL between two commits writes, after its restart, every record once: none twice, none
skipped; `odradek iceberg describe` shows the lag between them."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pyarrow.parquet as pq
import pytest
from confluent_kafka import KafkaException, Producer
from pyiceberg.exceptions import NoSuchTableError

from odradek.embedded import BrokerProcess
from odradek.iceberg.table import committed_offsets

from .conftest import alter, create_topic, end_offsets, produce, rows, table_of, wait_committed, wait_spec


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("iceberg") / "data",
                            settings={"iceberg.commit.interval.ms": 100, "transaction.state.log.num.partitions": 1,
                                      "transaction.state.log.replication.factor": 1,
                                      "transaction.state.log.min.isr": 1})
    process.start()
    yield process
    process.stop()


def test_key_value_topic_has_every_record_once(broker, topic_name):
    create_topic(broker, topic_name, 3, **{"odradek.iceberg.mode": "key_value"})
    records = [(i % 3, f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())] if i % 2 else None)
               for i in range(300)]
    produce(broker, topic_name, records[:150])
    produce(broker, topic_name, records[150:], **{"compression.type": "zstd"})
    table = wait_committed(broker.data_dir, topic_name, end_offsets(broker, topic_name, 3))

    written = rows(table)
    assert len(written) == 300 and len({(row["partition"], row["offset"]) for row in written}) == 300
    by_value = {row["value"]: row for row in written}
    for partition, key, value, headers in records:
        row = by_value[value]
        assert (row["partition"], row["key"]) == (partition, key)
        assert [(entry["key"], entry["value"]) for entry in row["headers"] or []] == (headers or [])
    assert [row["offset"] for row in written if row["partition"] == 1] == list(range(100))
    assert table.spec().fields[0].name == "timestamp_hour"


def test_aborted_transactions_stay_out_of_the_table(broker, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "key_value", "odradek.iceberg.partition.spec": ""})
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "transactional.id": f"t-{uuid.uuid4()}"})
    producer.init_transactions(10)
    for commit, values in ((False, [b"a1", b"a2"]), (True, [b"c1", b"c2"])):
        producer.begin_transaction()
        for value in values:
            producer.produce(topic_name, value, partition=0)
        producer.commit_transaction(10) if commit else producer.abort_transaction(10)
    produce(broker, topic_name, [(0, None, b"after", None)])
    table = wait_committed(broker.data_dir, topic_name, end_offsets(broker, topic_name, 1))
    assert [row["value"] for row in rows(table)] == [b"c1", b"c2", b"after"]
    assert table.spec().is_unpartitioned()


def test_disabled_topic_writes_nothing(broker, topic_name):
    create_topic(broker, topic_name)
    written = f"{topic_name}-written"
    create_topic(broker, written, **{"odradek.iceberg.mode": "key_value"})
    produce(broker, topic_name, [(0, None, b"x", None)])
    produce(broker, written, [(0, None, b"x", None)])
    wait_committed(broker.data_dir, written, {0: 1})
    produce(broker, written, [(0, None, b"y", None)])
    wait_committed(broker.data_dir, written, {0: 2})  # a whole round after both topics had records
    with pytest.raises(NoSuchTableError):
        table_of(broker.data_dir, topic_name)


@pytest.mark.parametrize("configs", [{"odradek.iceberg.mode": "parquet"},
                                     {"odradek.iceberg.partition.spec": "hour(key)"},
                                     {"odradek.iceberg.partition.spec": "bucket(16 key)"},
                                     {"odradek.iceberg.mode": "value_schema_latest",
                                      "odradek.iceberg.partition.spec": "identity(value)"}])
def test_bad_iceberg_configs_are_invalid_config(broker, topic_name, configs):
    with pytest.raises(KafkaException) as refused:
        create_topic(broker, topic_name, **configs)
    assert refused.value.args[0].name() == "INVALID_CONFIG"


def files_by_spec(table) -> dict[int, list[tuple[tuple, list[tuple[int, int]]]]]:
    """Each data file of the table's current snapshot, by the id of the spec it was written with: its partition
    values (in that spec) and the (partition, offset) of its rows, read from the Parquet file itself."""
    found: dict[int, list] = {}
    for task in table.scan().plan_files():
        read = pq.read_table(task.file.file_path.removeprefix("file://"), columns=["partition", "offset"])
        found.setdefault(task.file.spec_id, []).append(
            (tuple(task.file.partition), sorted(zip(read["partition"].to_pylist(), read["offset"].to_pylist()))))
    return found


def test_a_spec_change_evolves_the_table(broker, topic_name):
    create_topic(broker, topic_name, 2, **{"odradek.iceberg.mode": "key_value",
                                           "odradek.iceberg.partition.spec": "identity(partition)"})
    produce(broker, topic_name, [(i % 2, f"k{i}".encode(), b"old", None) for i in range(10)])
    wait_committed(broker.data_dir, topic_name, {0: 5, 1: 5})
    alter(broker, topic_name, **{"odradek.iceberg.partition.spec": "bucket(4, key)"})
    table = wait_spec(broker, topic_name, ["key_bucket_4"])
    produce(broker, topic_name, [(i % 2, f"k{i}".encode(), b"new", None) for i in range(10, 30)])
    table = wait_committed(broker.data_dir, topic_name, {0: 15, 1: 15})

    assert sorted(table.specs()) == [0, 1] and table.spec().spec_id == 1
    assert [field.name for field in table.specs()[0].fields] == ["partition"]
    assert [(field.name, field.field_id) for field in table.spec().fields] == [("key_bucket_4", 1001)]
    by_spec = files_by_spec(table)
    assert sorted(by_spec) == [0, 1]
    for values, written in by_spec[0]:  # identity(partition): a file holds one Kafka partition's old records
        assert {partition for partition, _ in written} == set(values) and all(offset < 5 for _, offset in written)
    assert sorted(row for _, written in by_spec[0] for row in written) == [(p, o) for p in (0, 1) for o in range(5)]
    buckets = {values for values, _ in by_spec[1]}  # bucket(4, key): the new ones, by their key's bucket
    assert len(buckets) > 1 and all(len(values) == 1 and 0 <= values[0] < 4 for values in buckets)
    assert sorted(row for _, written in by_spec[1] for row in written) == \
        [(p, o) for p in (0, 1) for o in range(5, 15)]
    written = rows(table)
    assert [(row["partition"], row["offset"]) for row in written] == \
        [(0, offset) for offset in range(15)] + [(1, offset) for offset in range(15)]
    assert [row["value"] for row in written if row["offset"] < 5] == [b"old"] * 10

    # back to the first spec: Iceberg's spec evolution finds it among the table's specs
    alter(broker, topic_name, **{"odradek.iceberg.partition.spec": "identity(partition)"})
    assert wait_spec(broker, topic_name, ["partition"]).spec().spec_id == 0


def test_a_spec_the_mode_has_no_column_for_is_refused_at_alter(broker, topic_name):
    create_topic(broker, topic_name, **{"odradek.iceberg.mode": "key_value",
                                        "odradek.iceberg.partition.spec": "bucket(4, value)"})
    with pytest.raises(KafkaException) as refused:
        alter(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_latest"})
    assert refused.value.args[0].name() == "INVALID_CONFIG" and "no column value" in refused.value.args[0].str()
    produce(broker, topic_name, [(0, None, b"x", None)])
    table = wait_committed(broker.data_dir, topic_name, {0: 1})
    assert [field.name for field in table.spec().fields] == ["value_bucket_4"]


def describe(broker, topic: str) -> list[list[str]]:
    done = subprocess.run([sys.executable, "-m", "odradek", "iceberg", "describe", topic, "--bootstrap-server",
                           broker.bootstrap_servers], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["PARTITION", "LOG-END-OFFSET", "TABLE-OFFSET", "LAG"]
    assert lines[-1].startswith(f"table odradek.{topic}: snapshot ")
    return [line.split() for line in lines[1:-1]]


def test_kill_between_commits_then_restart_writes_every_record_once(tmp_path, topic_name):
    """A long commit interval: the first round commits what is there at once, the next is 30 s away, so the
    records produced after it are in the log and not in the table when the broker is killed."""
    process = BrokerProcess(tmp_path / "data", settings={"iceberg.commit.interval.ms": 30_000})
    process.start()
    try:
        create_topic(process, topic_name, 2)
        produce(process, topic_name, [(i % 2, None, f"a{i}".encode(), None) for i in range(100)])
        alter(process, topic_name, **{"odradek.iceberg.mode": "key_value"})
        first = wait_committed(process.data_dir, topic_name, {0: 50, 1: 50})
        produce(process, topic_name, [(i % 2, None, f"b{i}".encode(), None) for i in range(60)])
        assert describe(process, topic_name) == [["0", "80", "50", "30"], ["1", "80", "50", "30"]]
        process.kill()
        assert committed_offsets(table_of(process.data_dir, topic_name)) == {0: 50, 1: 50}
        assert len(first.scan().to_arrow()) == 100

        process.start()
        table = wait_committed(process.data_dir, topic_name, {0: 80, 1: 80})
        written = rows(table)
        assert sorted(row["value"] for row in written) == sorted(
            [f"a{i}".encode() for i in range(100)] + [f"b{i}".encode() for i in range(60)])
        assert [(row["partition"], row["offset"]) for row in written] == \
            [(0, offset) for offset in range(80)] + [(1, offset) for offset in range(80)]
        assert describe(process, topic_name) == [["0", "80", "80", "0"], ["1", "80", "80", "0"]]
    finally:
        process.stop()
