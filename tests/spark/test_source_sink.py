"""format("odradek") against a real broker: batch reads, streaming reads from a checkpoint, writes, and errors."""

from __future__ import annotations

import json
import time

import pytest
from confluent_kafka.admin import AdminClient, NewPartitions

from .helpers import create_topic, produce, read

BASE_TS = 1_700_000_000_000
PARTITIONS = 3
PER_PARTITION = 200


@pytest.fixture(scope="module")
def loaded_topic(broker):
    """Three partitions of 200 records; value "p<partition>-<offset>", timestamp BASE_TS + offset seconds."""
    topic = f"loaded-{time.monotonic_ns()}"
    create_topic(broker, topic, PARTITIONS)
    produce(broker, topic, [{"value": f"p{p}-{i}".encode(), "key": f"k{i}".encode(), "partition": p,
                             "timestamp": BASE_TS + i * 1000, "headers": [("n", str(i).encode()), ("p", None)]}
                            for p in range(PARTITIONS) for i in range(PER_PARTITION)])
    return topic


def rows_of(df) -> list[tuple]:
    return sorted((r.partition, r.offset, r.value.decode()) for r in df.collect())


def test_batch_read_returns_every_record_with_its_metadata(spark, broker, loaded_topic):
    df = read(spark, broker, subscribe=loaded_topic)
    assert df.schema.simpleString() == ("struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,"
                                        "timestamp:timestamp,timestampType:int>")
    rows = df.collect()
    assert len(rows) == PARTITIONS * PER_PARTITION
    for row in rows:
        assert row.value == f"p{row.partition}-{row.offset}".encode() and row.key == f"k{row.offset}".encode()
        assert row.topic == loaded_topic and row.timestampType == 0
        assert int(row.timestamp.timestamp() * 1000) == BASE_TS + row.offset * 1000


def test_json_offsets_bound_each_partition(spark, broker, loaded_topic):
    starting = {loaded_topic: {"0": 10, "1": -2, "2": 150}}
    ending = {loaded_topic: {"0": 20, "1": 5, "2": -1}}
    df = read(spark, broker, subscribe=loaded_topic, startingOffsets=json.dumps(starting),
              endingOffsets=json.dumps(ending))
    expected = ([(0, o, f"p0-{o}") for o in range(10, 20)] + [(1, o, f"p1-{o}") for o in range(5)]
                + [(2, o, f"p2-{o}") for o in range(150, PER_PARTITION)])
    assert rows_of(df) == expected


def test_json_offsets_must_name_every_partition(spark, broker, loaded_topic):
    with pytest.raises(Exception, match="startingOffsets: no entry for partition .*-1, .*-2"):
        read(spark, broker, subscribe=loaded_topic, startingOffsets=json.dumps({loaded_topic: {"0": 1}})).collect()


def test_timestamps_pick_the_first_offset_at_or_after(spark, broker, loaded_topic):
    df = read(spark, broker, subscribe=loaded_topic, startingTimestamp=str(BASE_TS + 150_500),
              endingOffsetsByTimestamp=json.dumps({loaded_topic: {"0": BASE_TS + 160_000, "1": BASE_TS + 152_000,
                                                                  "2": BASE_TS + 10**9}}))
    assert rows_of(df) == ([(0, o, f"p0-{o}") for o in range(151, 160)] + [(1, 151, "p1-151")]
                           + [(2, o, f"p2-{o}") for o in range(151, PER_PARTITION)])
    by_partition = read(spark, broker, subscribe=loaded_topic, startingOffsetsByTimestamp=json.dumps(
        {loaded_topic: {"0": BASE_TS + 198_000, "1": BASE_TS + 10**9, "2": BASE_TS + 197_001}}),
        startingOffsetsByTimestampStrategy="latest")
    assert rows_of(by_partition) == [(0, 198, "p0-198"), (0, 199, "p0-199"), (2, 198, "p2-198"), (2, 199, "p2-199")]
    with pytest.raises(Exception, match="startingOffsetsByTimestamp: no record at or after timestamp"):
        read(spark, broker, subscribe=loaded_topic, startingOffsetsByTimestamp=json.dumps(
            {loaded_topic: {"0": BASE_TS, "1": BASE_TS + 10**9, "2": BASE_TS}})).collect()
    with pytest.raises(Exception, match="startingTimestamp: start offset 199 of .*-0 is after its end offset 3"):
        read(spark, broker, subscribe=loaded_topic, startingTimestamp=str(BASE_TS + 199_000),
             endingTimestamp=str(BASE_TS + 3000)).collect()


def test_min_partitions_splits_into_more_tasks_without_overlap(spark, broker, loaded_topic):
    df = read(spark, broker, subscribe=loaded_topic, minPartitions="12")
    assert df.rdd.getNumPartitions() == 12
    rows = rows_of(df)
    assert len(rows) == len(set(rows)) == PARTITIONS * PER_PARTITION


def test_headers_are_read_when_asked(spark, broker, loaded_topic):
    df = read(spark, broker, subscribe=loaded_topic, includeHeaders="true", endingOffsets=json.dumps(
        {loaded_topic: {"0": 3, "1": 0, "2": 0}}))
    rows = sorted(df.collect(), key=lambda r: r.offset)
    assert [[(h.key, h.value) for h in r.headers] for r in rows] == [[("n", str(o).encode()), ("p", None)]
                                                                   for o in range(3)]


def test_assign_and_subscribe_pattern(spark, broker, loaded_topic):
    assigned = read(spark, broker, assign=json.dumps({loaded_topic: [0, 2]}))
    assert {r.partition for r in assigned.collect()} == {0, 2} and assigned.count() == 2 * PER_PARTITION
    other = f"{loaded_topic}-other"
    create_topic(broker, other, 1)
    produce(broker, other, [{"value": b"x"}] * 5)
    matched = read(spark, broker, subscribePattern=f"{loaded_topic}.*")
    counts = {r.topic: r["count"] for r in matched.groupBy("topic").count().collect()}
    assert counts == {loaded_topic: PARTITIONS * PER_PARTITION, other: 5}


def test_write_then_read_back_keys_headers_and_partitions(spark, broker, topic_name):
    create_topic(broker, topic_name, 3)
    rows = [(f"key-{i}", f"value-{i}".encode(), i % 3, [(f"h{i}", str(i).encode())]) for i in range(300)]
    df = spark.createDataFrame(rows, "key string, value binary, partition int, "
                                     "headers array<struct<key: string, value: binary>>")
    (df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
     .option("topic", topic_name).mode("append").save())
    back = read(spark, broker, subscribe=topic_name, includeHeaders="true").collect()
    assert sorted((r.key.decode(), r.value, r.partition, [(h.key, h.value) for h in r.headers]) for r in back) \
        == sorted(rows)
    assert all(sorted(r.offset for r in back if r.partition == p) == list(range(100)) for p in range(3))


def test_write_routes_by_topic_column_and_the_partitioner(spark, broker, topic_name):
    topics = [f"{topic_name}-a", f"{topic_name}-b"]
    for topic in topics:
        create_topic(broker, topic, 2)
    df = spark.createDataFrame([(topics[i % 2], f"k{i}", f"v{i}") for i in range(100)], "topic string, key string,"
                                                                                          " value string")
    df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers).mode("append").save()
    back = read(spark, broker, subscribePattern=f"{topic_name}-.").collect()
    assert sorted((r.topic, r.value.decode()) for r in back) == sorted((topics[i % 2], f"v{i}") for i in range(100))
    partition_of_key = {}
    for r in back:  # the producer's partitioner keeps a key on one partition
        assert partition_of_key.setdefault((r.topic, r.key), r.partition) == r.partition


def test_write_without_a_value_column_is_refused(spark, broker, topic_name):
    df = spark.createDataFrame([("k",)], "key string")
    with pytest.raises(Exception, match="value: required column not found"):
        (df.write.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
         .option("topic", topic_name).mode("append").save())


def test_missing_topic_bad_option_and_unreachable_broker_fail_clearly(spark, broker):
    with pytest.raises(Exception, match="subscribe: topic 'no-such-topic' does not exist"):
        read(spark, broker, subscribe="no-such-topic").collect()
    with pytest.raises(Exception, match="kafka.group.id: not supported"):
        read(spark, broker, subscribe="x", **{"kafka.group.id": "mine"}).collect()
    with pytest.raises(Exception, match="startingOffsets: expected earliest, latest or JSON"):
        read(spark, broker, subscribe="x", startingOffsets="beginning").collect()
    with pytest.raises(Exception, match=r"kafka.bootstrap.servers=127.0.0.1:1: could not list topics"):
        (spark.read.format("odradek").option("kafka.bootstrap.servers", "127.0.0.1:1").option("subscribe", "x")
         .load().collect())


def stream_to_parquet(spark, broker, topic, output, checkpoint, trigger, **options):
    reader = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
              .option("subscribe", topic).option("startingOffsets", "earliest"))
    for key, value in options.items():
        reader = reader.option(key, value)
    return (reader.load().select("partition", "offset", "value").writeStream.format("parquet")
            .option("path", str(output)).option("checkpointLocation", str(checkpoint)).trigger(**trigger).start())


def test_streaming_stop_and_restart_reads_each_record_once(spark, broker, topic_name, tmp_path):
    create_topic(broker, topic_name, 2)
    produce(broker, topic_name, [{"value": f"first-{i}".encode(), "partition": i % 2} for i in range(400)])
    output, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    query = stream_to_parquet(spark, broker, topic_name, output, checkpoint, {"processingTime": "100 milliseconds"},
                              maxOffsetsPerTrigger="60")
    deadline = time.monotonic() + 60
    while len([p for p in query.recentProgress if p["numInputRows"]]) < 2 and time.monotonic() < deadline:
        time.sleep(0.2)
    query.stop()  # stopped part-way: the rest is read after the restart
    batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]
    assert batches and max(batches) <= 60 and sum(batches) < 400

    produce(broker, topic_name, [{"value": f"second-{i}".encode(), "partition": i % 2} for i in range(100)])
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})  # alive until the future resolves
    admin.create_partitions([NewPartitions(topic_name, 3)])[topic_name].result(10)
    produce(broker, topic_name, [{"value": f"new-partition-{i}".encode(), "partition": 2} for i in range(30)])
    restarted = stream_to_parquet(spark, broker, topic_name, output, checkpoint, {"availableNow": True},
                                  maxOffsetsPerTrigger="60")
    assert restarted.awaitTermination(120)
    assert all(p["numInputRows"] <= 60 for p in restarted.recentProgress)
    rows = [(r.partition, r.offset, r.value) for r in spark.read.parquet(str(output)).collect()]
    assert len(rows) == len(set(rows)) == 530
    assert sorted(r[2] for r in rows) == sorted([f"first-{i}".encode() for i in range(400)]
                                                + [f"second-{i}".encode() for i in range(100)]
                                                + [f"new-partition-{i}".encode() for i in range(30)])


def test_streaming_write_to_a_topic(spark, broker, topic_name, tmp_path):
    source, target = f"{topic_name}-in", f"{topic_name}-out"
    create_topic(broker, source, 2)
    create_topic(broker, target, 1)
    produce(broker, source, [{"value": f"{i}".encode(), "key": b"k", "partition": i % 2} for i in range(50)])
    query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("subscribe", source).option("startingOffsets", "earliest").load()
             .selectExpr("key", "CAST(CAST(value AS STRING) AS INT) * 2 AS doubled")
             .selectExpr("key", "CAST(doubled AS STRING) AS value")
             .writeStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("topic", target).option("checkpointLocation", str(tmp_path / "checkpoint"))
             .trigger(availableNow=True).start())
    assert query.awaitTermination(120)
    assert sorted(int(r.value) for r in read(spark, broker, subscribe=target).collect()) == \
        [2 * i for i in range(50)]
