"""Spark's own Kafka connector, format("kafka") (spark-sql-kafka-0-10 4.2.0, the newest on Maven Central, run in
pyspark 4.3 through spark.jars), against a real `odradek serve`: what a Spark user who keeps Spark's connector
sees. Batch reads with offset bounds, keys and headers (the same rows format("odradek") reads), batch writes of
key, value, partition and headers (read back by another client), a streaming query killed with SIGKILL mid-run in
its own process and resumed from its checkpoint, each record once in its file sink, kafka.group.id with
startingOffsetsByTimestamp, a SASL_SSL listener with ACLs and three brokers with replication factor 3. On that SASL_SSL
listener format("odradek") too, given the same kafka.* options (driver lookups, read tasks and sink log in with
SCRAM-SHA-512; a wrong password fails at once with the broker's message), and `odradek pipeline ... --command-config`
with the properties file a Java tool takes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import pyarrow.parquet as pq
from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient, NewTopic,
                                   ResourcePatternType, ResourceType)

from odradek.spark.fetcher import read_range
from odradek.spark.kafka_io import BrokerUnavailableError, OffsetRange
from tests.interop.conftest import cluster3, secured_broker  # noqa: F401 (fixtures: RF 3, SASL_SSL with ACLs)
from tests.jvm import ROOT, spark_kafka_jars
from tests.security.conftest import certificates  # noqa: F401 (the secured broker's)

from .helpers import create_topic, produce, read, stream_to_json_files

PARTITIONS = 3
PER_PARTITION = 6
BASE_MS = 1_700_000_000_000

pytestmark = pytest.mark.timeout(900)  # the session's start counts in the first test; a loaded machine is slow


def _record(partition: int, i: int) -> dict:
    return {"partition": partition, "key": None if i == 0 else f"k{partition}-{i}".encode(),
            "value": f"v{partition}-{i}".encode(), "timestamp": BASE_MS + i * 1000,
            "headers": [("seq", str(i).encode()), ("dup", b"a"), ("dup", b"b")]}


def _fill(broker, topic: str) -> None:
    create_topic(broker, topic, PARTITIONS)
    produce(broker, topic, [_record(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)])


def _kafka(spark, broker, **options):
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap_servers)
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load()


def _rows(df) -> list[tuple]:
    return sorted((r.partition, r.offset, r.key, r.value, int(r.timestamp.timestamp() * 1000), r.timestampType,
                   tuple((h.key, h.value) for h in r.headers)) for r in df.collect())


def test_batch_read_takes_offset_bounds_keys_and_headers_over_all_partitions(spark, broker, topic_name):
    _fill(broker, topic_name)
    bounds = {"startingOffsets": json.dumps({topic_name: {"0": 1, "1": -2, "2": 3}}),
              "endingOffsets": json.dumps({topic_name: {"0": 4, "1": -1, "2": 5}}), "includeHeaders": "true"}
    rows = _rows(_kafka(spark, broker, subscribe=topic_name, **bounds))
    ranges = {0: range(1, 4), 1: range(0, PER_PARTITION), 2: range(3, 5)}
    expected = []
    for partition, offsets in ranges.items():
        for i in offsets:
            record = _record(partition, i)
            expected.append((partition, i, record["key"], record["value"], record["timestamp"], 0,
                             tuple(record["headers"])))
    assert rows == sorted(expected)
    assert _rows(read(spark, broker, subscribe=topic_name, **bounds)) == rows  # format("odradek"): the same rows


def test_batch_write_puts_key_value_partition_and_headers(spark, broker, topic_name):
    create_topic(broker, topic_name, PARTITIONS)
    rows = [(f"k{i}".encode() if i % 4 else None, f"v{i}", i % PARTITIONS, [("n", str(i).encode()), ("x", None)])
            for i in range(12)]
    schema = "key binary, value string, partition int, headers array<struct<key:string,value:binary>>"
    (spark.createDataFrame(rows, schema).write.format("kafka").option("kafka.bootstrap.servers",
                                                                     broker.bootstrap_servers)
     .option("topic", topic_name).mode("append").save())
    consumer = Consumer({"bootstrap.servers": broker.bootstrap_servers, "group.id": topic_name,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic_name, p, 0) for p in range(PARTITIONS)])
    seen, deadline = [], time.monotonic() + 60
    while len(seen) < len(rows) and time.monotonic() < deadline:
        message = consumer.poll(1)
        if message is not None and message.error() is None:
            seen.append((message.key(), message.value().decode(), message.partition(), message.headers()))
    consumer.close()
    assert sorted(seen, key=lambda r: r[1]) == sorted(
        [(key, value, partition, [(h, v) for h, v in headers]) for key, value, partition, headers in rows],
        key=lambda r: r[1])


STREAM_SCRIPT = """
import sys
from odradek.spark.session import spark_session
from tests.spark.helpers import stream_to_json_files

bootstrap, topic, output, checkpoint, jars = sys.argv[1:]
spark = spark_session(app_name="kafka-stream", settings={"spark.jars": jars})
stream_to_json_files(spark, bootstrap, topic, output, checkpoint, max_offsets_per_trigger=30).awaitTermination()
"""


def _batches(checkpoint: Path, kind: str) -> set[str]:
    directory = checkpoint / kind
    return {p.name for p in directory.iterdir() if p.name.isdigit()} if directory.exists() else set()


def test_streaming_query_killed_mid_run_resumes_from_its_checkpoint_writing_each_record_once(
        spark, broker, topic_name, tmp_path):
    create_topic(broker, topic_name, PARTITIONS)
    produce(broker, topic_name, [{"value": f"a{i}".encode(), "key": f"{i}".encode(), "partition": i % PARTITIONS}
                                 for i in range(300)])
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    log = tmp_path / "query.log"
    with log.open("wb") as log_file:
        child = subprocess.Popen([sys.executable, "-c", STREAM_SCRIPT, broker.bootstrap_servers, topic_name,
                                  str(output), str(checkpoint), spark_kafka_jars()], cwd=ROOT, start_new_session=True,
                                 stdout=log_file, stderr=subprocess.STDOUT,
                                 env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
    try:
        deadline = time.monotonic() + 600
        while len(_batches(checkpoint, "commits")) < 2:  # two micro-batches done, then kill one in flight
            assert child.poll() is None, log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "the query committed no two micro-batches"
            time.sleep(0.2)
        in_flight_until = time.monotonic() + 20
        while not _batches(checkpoint, "offsets") - _batches(checkpoint, "commits") \
                and time.monotonic() < in_flight_until:
            time.sleep(0.02)
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers at once
        child.wait(30)
    done = spark.read.json(str(output)).count()  # the file sink's log: only committed micro-batches count
    assert 0 < done < 300
    produce(broker, topic_name, [{"value": f"b{i}".encode(), "key": f"{i}".encode(), "partition": i % PARTITIONS}
                                 for i in range(60)])
    stream_to_json_files(spark, broker.bootstrap_servers, topic_name, str(output), str(checkpoint),
                         available_now=True).awaitTermination(600)
    values = [r.value for r in spark.read.json(str(output)).collect()]
    assert sorted(values) == sorted([f"a{i}" for i in range(300)] + [f"b{i}" for i in range(60)])


def test_kafka_group_id_and_starting_offsets_by_timestamp(spark, broker, topic_name):
    _fill(broker, topic_name)
    group = f"{topic_name}-spark"
    by_timestamp = {topic_name: {"0": BASE_MS + 2000, "1": BASE_MS + 4500, "2": BASE_MS}}
    rows = _kafka(spark, broker, subscribe=topic_name, **{"kafka.group.id": group,
                                                          "startingOffsetsByTimestamp": json.dumps(by_timestamp)})
    assert sorted((r.partition, r.offset) for r in rows.collect()) == sorted(
        [(0, i) for i in range(2, PER_PARTITION)] + [(1, 5)] + [(2, i) for i in range(PER_PARTITION)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
    [committed] = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)]).values()
    assert committed.result(30).topic_partitions == []  # Spark's source reads with the group, never commits


def test_over_sasl_ssl_alice_reads_and_writes_what_her_acls_allow(spark, secured_broker, topic_name):
    """A secured cluster (SASL_SSL, SCRAM-SHA-512, ACLs enforced): Spark's connector logs in as alice with the
    kafka.-prefixed Java client properties, is refused the topic until admin grants her ACLs on it, then writes and
    reads it back."""
    admin = AdminClient(secured_broker.librdkafka_config("admin"))
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(60)
    alice = {f"kafka.{key}": value for key, value in secured_broker.client_properties("alice").items()}
    rows = spark.createDataFrame([(f"k{i}", f"v{i}") for i in range(5)], "key string, value string")

    def write():
        writer = rows.write.format("kafka").option("kafka.bootstrap.servers", secured_broker.bootstrap_servers)
        for key, value in {**alice, "topic": topic_name}.items():
            writer = writer.option(key, value)
        writer.mode("append").save()

    with pytest.raises(Exception, match="TopicAuthorizationException"):
        write()
    grants = [AclBinding(kind, name, ResourcePatternType.LITERAL if kind == ResourceType.TOPIC
                         else ResourcePatternType.PREFIXED, "User:alice", "*", operation, AclPermissionType.ALLOW)
              for kind, name, operations in [(ResourceType.TOPIC, topic_name, (AclOperation.WRITE, AclOperation.READ,
                                                                               AclOperation.DESCRIBE)),
                                             (ResourceType.GROUP, "spark-kafka-", (AclOperation.READ,))]
              for operation in operations]
    for done in admin.create_acls(grants).values():
        done.result(30)
    write()
    reader = spark.read.format("kafka").option("kafka.bootstrap.servers", secured_broker.bootstrap_servers)
    for key, value in {**alice, "subscribe": topic_name}.items():
        reader = reader.option(key, value)
    assert sorted((r.key.decode(), r.value.decode()) for r in reader.load().collect()) == \
        [(f"k{i}", f"v{i}") for i in range(5)]


def test_three_brokers_with_replication_factor_3(spark, cluster3, topic_name):
    """On three brokers (RF 3, min.insync.replicas 2) Spark's connector writes with its producer's acks=all and
    reads back from each partition's leader, and format("odradek") reads the same rows."""
    admin = AdminClient({"bootstrap.servers": cluster3.bootstrap_servers})
    admin.create_topics([NewTopic(topic_name, PARTITIONS, 3)])[topic_name].result(60)
    rows = [(f"k{i}", f"v{i}", i % PARTITIONS) for i in range(30)]
    (spark.createDataFrame(rows, "key string, value string, partition int").write.format("kafka")
     .option("kafka.bootstrap.servers", cluster3.bootstrap_servers).option("kafka.acks", "all")
     .option("topic", topic_name).mode("append").save())
    written = sorted((p, k.encode(), v.encode()) for k, v, p in rows)
    assert sorted((r.partition, r.key, r.value) for r in _kafka(spark, cluster3, subscribe=topic_name).collect()) \
        == written
    assert sorted((r.partition, r.key, r.value) for r in read(spark, cluster3, subscribe=topic_name).collect()) \
        == written


def _grant_alice(secured_broker, topic: str, *operations: AclOperation) -> None:
    admin = AdminClient(secured_broker.librdkafka_config("admin"))
    grants = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, "User:alice", "*", operation,
                         AclPermissionType.ALLOW) for operation in operations]
    for done in admin.create_acls(grants).values():
        done.result(30)


def _odradek_over_sasl_ssl(reader_or_writer, secured_broker, properties: dict[str, str], **options):
    configured = reader_or_writer.format("odradek").option("kafka.bootstrap.servers", secured_broker.bootstrap_servers)
    for key, value in {**{f"kafka.{k}": v for k, v in properties.items()}, **options}.items():
        configured = configured.option(key, value)
    return configured


def test_format_odradek_writes_and_reads_over_sasl_ssl_with_scram(spark, secured_broker, topic_name):
    """format("odradek") given Spark's connector's options for the secured cluster (kafka.security.protocol,
    kafka.sasl.mechanism, kafka.sasl.jaas.config with ScramLoginModule, a PEM kafka.ssl.truststore.location): alice,
    granted the topic, writes rows with its sink and reads back those and admin's, from both partitions (the
    driver's lookups and each read task's own connection log in)."""
    admin = AdminClient(secured_broker.librdkafka_config("admin"))
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(60)
    producer = Producer(secured_broker.librdkafka_config("admin"))
    for i in range(10):
        producer.produce(topic_name, f"admin-{i}".encode(), partition=i % 2)
    assert producer.flush(30) == 0
    _grant_alice(secured_broker, topic_name, AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)
    alice = secured_broker.client_properties("alice")
    rows = spark.createDataFrame([(f"alice-{i}", i % 2) for i in range(6)], "value string, partition int")
    _odradek_over_sasl_ssl(rows.write, secured_broker, alice, topic=topic_name).mode("append").save()
    read = _odradek_over_sasl_ssl(spark.read, secured_broker, alice, subscribe=topic_name).load()
    assert sorted((r.partition, r.value.decode()) for r in read.collect()) == sorted(
        [(i % 2, f"admin-{i}") for i in range(10)] + [(i % 2, f"alice-{i}") for i in range(6)])


def test_format_odradek_with_a_wrong_password_fails_at_once_with_the_brokers_message(spark, secured_broker,
                                                                                      topic_name):
    wrong = {**secured_broker.client_properties("alice"), "sasl.jaas.config":
             'org.apache.kafka.common.security.scram.ScramLoginModule required username="alice" '
             'password="not-alices-password";'}
    started = time.monotonic()
    with pytest.raises(Exception, match="Authentication failed during authentication due to invalid credentials "
                                        "with SASL mechanism SCRAM-SHA-512") as refused:
        _odradek_over_sasl_ssl(spark.read, secured_broker, wrong, subscribe=topic_name).load().collect()
    assert time.monotonic() - started < 30  # not kafkaConsumer.pollTimeoutMs's two minutes of retries
    assert "not-alices-password" not in str(refused.value)


def test_a_read_task_refused_its_login_fails_at_once_with_the_brokers_message(secured_broker, topic_name):
    """A task's own connection (odradek.spark.fetcher, as when a password changes after the driver planned the
    read) does not retry a refused login for kafkaConsumer.pollTimeoutMs as it retries a lost connection."""
    settings = {**secured_broker.librdkafka_config("alice"), "sasl.password": "not-alices-password"}
    started = time.monotonic()
    with pytest.raises(BrokerUnavailableError, match="could not log in: .*SASL_AUTHENTICATION_FAILED: Authentication "
                                                      "failed during authentication due to invalid credentials"):
        list(read_range(settings, OffsetRange(topic_name, 0, 0, 10), include_headers=False, fail_on_data_loss=True,
                        poll_timeout_s=120))
    assert time.monotonic() - started < 10


def test_pipeline_command_config_reads_and_writes_a_secured_cluster(secured_broker, topic_name, tmp_path):
    """`odradek pipeline generate` writes as admin and `odradek pipeline warehouse-load` (its own Spark, on
    local[1]) reads as alice, each given a --command-config file in Java's names (sasl.jaas.config, a PEM
    truststore), as Kafka's tools take it."""
    def pipeline(*arguments: str, user: str) -> str:
        run = subprocess.run([sys.executable, "-m", "odradek", "pipeline", *arguments,
                              "--bootstrap-server", secured_broker.bootstrap_servers,
                              "--command-config", str(secured_broker.properties_file(tmp_path, user))],
                             capture_output=True, text=True, timeout=600, cwd=ROOT,
                             env={**os.environ, "SPARK_LOCAL_IP": "127.0.0.1"})
        assert run.returncode == 0, run.stderr[-3000:]
        return run.stdout

    assert pipeline("generate", "orders", "--topic", topic_name, "--count", "300", user="admin") == \
        f"300 orders written to {topic_name}\n"
    _grant_alice(secured_broker, topic_name, AclOperation.READ, AclOperation.DESCRIBE)
    output = tmp_path / "warehouse"
    loaded = pipeline("warehouse-load", "--topics", topic_name, "--output", str(output), "--master", "local[1]",
                      user="alice")
    assert loaded.splitlines()[-1] == f"loaded 300 rows from 4 partition ranges into {output}"
    orders = [json.loads(value.as_py()) for value in pq.read_table(output).column("value")]
    assert sorted(order["order_id"] for order in orders) == sorted(f"order-0-{i}" for i in range(300))
