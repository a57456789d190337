"""Iceberg topics against real broker processes: a key_value topic's records in its table exactly once (pyiceberg
reads them back, aborted transactions left out), a disabled topic writes nothing, a bad mode or spec is refused, and
a broker killed with SIGKILL between two commits writes, after its restart, every record once: none twice, none
skipped; `odradek iceberg describe` shows the lag between them."""

from __future__ import annotations

import subprocess
import sys
import uuid

import pytest
from confluent_kafka import KafkaException, Producer
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource
from pyiceberg.exceptions import NoSuchTableError

from odradek.embedded import BrokerProcess
from odradek.iceberg.table import committed_offsets

from .conftest import admin, create_topic, end_offsets, produce, rows, table_of, wait_committed


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
                                     {"odradek.iceberg.partition.spec": "bucket(16 key)"}])
def test_bad_iceberg_configs_are_invalid_config(broker, topic_name, configs):
    with pytest.raises(KafkaException) as refused:
        create_topic(broker, topic_name, **configs)
    assert refused.value.args[0].name() == "INVALID_CONFIG"


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
        resource = ConfigResource("topic", topic_name, incremental_configs=[
            ConfigEntry("odradek.iceberg.mode", "key_value", incremental_operation=AlterConfigOpType.SET)])
        client = admin(process)
        client.incremental_alter_configs([resource])[resource].result(10)
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
