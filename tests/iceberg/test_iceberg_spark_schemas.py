"""format("odradek") with startingOffsets=iceberg over the schema modes' tables, against a real broker, the schema
registry beside it and the Spark session the Spark tests share: the table's rows give back each record's value bytes
exactly as the log had them (kafka.value), the dead-letter table's records are read in their place by offset, and
the log's tail follows, every offset once, including records the log no longer has; a table written without the
value bytes is refused by name."""

from __future__ import annotations

import json

import pyarrow as pa
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from pyiceberg.schema import Schema as IcebergSchema
from pyiceberg.types import NestedField, StructType

from odradek.embedded import BrokerProcess
from odradek.iceberg.table import KEY_VALUE_SCHEMA, offsets_summary, open_catalog
from tests.http_services import registry  # noqa: F401 (a fixture: the registry beside the module's broker)

from .conftest import admin, alter, create_topic, produce, wait_committed

pytest.importorskip("pyspark")
from tests.spark.conftest import spark  # noqa: E402,F401  the shared session

ORDER = {"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"},
                                                        {"name": "item", "type": "string"}]}
ORDER_JSON = {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("iceberg-spark-schemas") / "data",
                            settings={"iceberg.commit.interval.ms": 100})
    process.start()
    yield process
    process.stop()


def table_then_log(broker, topic: str, mode: str, table_records, log_records, deleted_below: int) -> None:
    """`table_records` into the topic's table (and dead-letter table), then the mode off and `log_records` in the
    log alone, then each partition's log deleted below `deleted_below`: the tables alone have those records."""
    create_topic(broker, topic, 2, **{"odradek.iceberg.mode": mode})
    produce(broker, topic, table_records)
    wait_committed(broker.data_dir, topic, {index: sum(1 for r in table_records if r[0] == index)
                                            for index in (0, 1)})
    alter(broker, topic, **{"odradek.iceberg.mode": "disabled"})
    produce(broker, topic, log_records)
    client = admin(broker)
    for future in client.delete_records([TopicPartition(topic, index, deleted_below) for index in (0, 1)]).values():
        future.result(10)


def expected(records) -> list[tuple]:
    """(partition, offset, key, value, headers) of records produced in this order, each partition from 0."""
    offsets, out = {}, []
    for partition, key, value, headers in records:
        offset = offsets[partition] = offsets.get(partition, -1) + 1
        out.append((partition, offset, key, value, [tuple(header) for header in headers or []]))
    return sorted(out)


def read(spark, broker, topic: str) -> list[tuple]:
    rows = spark.read.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers) \
        .option("subscribe", topic).option("startingOffsets", "iceberg").option("includeHeaders", "true") \
        .load().orderBy("partition", "offset").collect()
    return [(row.partition, row.offset, row.key, row.value, [tuple(header) for header in row.headers or []])
            for row in rows]


def test_framed_values_and_dead_letters_read_back_as_the_log_had_them(broker, registry, spark, topic_name):
    serialize = AvroSerializer(SchemaRegistryClient({"url": registry.url}), json.dumps(ORDER))

    def framed(i: int) -> bytes:
        return serialize({"id": i, "item": f"i{i}"}, SerializationContext(topic_name, MessageField.VALUE))

    dead = {3: b"not framed", 7: None, 8: b"\0\0\0\x7f\xff{}"}  # no frame, a tombstone, an id not registered
    table_records = [(i % 2, f"k{i}".encode(), dead[i] if i in dead else framed(i), [("n", str(i).encode())])
                     for i in range(20)]
    log_records = [(i % 2, None, framed(100 + i), None) for i in range(6)]
    table_then_log(broker, topic_name, "value_schema_id_prefix", table_records, log_records, deleted_below=8)

    # offsets 0 to 9 of each partition from the tables (those below 8 in no log any more), 10 to 12 from the log
    assert read(spark, broker, topic_name) == expected(table_records + log_records)


def test_a_streaming_query_starts_with_both_tables(broker, registry, spark, topic_name, tmp_path):
    SchemaRegistryClient({"url": registry.url}).register_schema(f"{topic_name}-value",
                                                                Schema(json.dumps(ORDER_JSON), "JSON"))
    # JSON text the typed columns could not give back: spacing, key order, a property beyond the schema
    table_records = [(0, None, b'{ "extra": [1, 2],\n  "id": 1 }', None), (1, None, b'{"id":2}', None),
                     (0, None, b'{"id": "two"}', None), (1, b"k", b"not json", [("h", b"")]),
                     (0, None, b'{"id":  3}', None)]
    log_records = [(0, None, b'{"id": 4}', None), (1, None, b'{"id": 5}', None)]
    table_then_log(broker, topic_name, "value_schema_latest", table_records, log_records, deleted_below=2)
    output, checkpoint = str(tmp_path / "out"), str(tmp_path / "checkpoint")
    query = (spark.readStream.format("odradek").option("kafka.bootstrap.servers", broker.bootstrap_servers)
             .option("subscribe", topic_name).option("startingOffsets", "iceberg").load()
             .selectExpr("partition", "offset", "CAST(value AS STRING) AS value")
             .writeStream.format("json").option("path", output).option("checkpointLocation", checkpoint)
             .trigger(availableNow=True).start())
    try:
        assert query.awaitTermination(120)
        batches = [(progress.batchId, progress.numInputRows) for progress in query.recentProgress
                   if progress.numInputRows]
    finally:
        query.stop()

    assert batches == [(0, 7)]  # the table's 3, the dead letters' 2, the log's 2, in the first batch
    rows = spark.read.json(output).orderBy("partition", "offset").collect()
    assert [(row.partition, row.offset, row.value.encode()) for row in rows] == \
        [(partition, offset, value) for partition, offset, _, value, _ in expected(table_records + log_records)]


def test_a_table_without_the_value_bytes_is_refused(broker, registry, spark, topic_name):
    """A schema mode's table as a writer that did not keep kafka.value left it: refused while it lacks the field;
    the writer adds it at its next round, and the rows written before, null there, fail the read by offset."""
    create_topic(broker, topic_name, 1)
    kafka = StructType(*(field for field in KEY_VALUE_SCHEMA.fields if field.name != "value"))
    catalog = open_catalog({"iceberg.catalog.uri": "", "iceberg.warehouse": ""}, broker.data_dir)
    catalog.create_namespace_if_not_exists("odradek")
    old = catalog.create_table(("odradek", topic_name), IcebergSchema(
        NestedField(20, "id", KEY_VALUE_SCHEMA.find_field("offset").field_type, required=False),
        NestedField(21, "kafka", kafka, required=True)))
    old.append(pa.Table.from_pylist([{"id": 0, "kafka": {"key": None, "headers": None, "timestamp": 0,
                                                         "partition": 0, "offset": 0}}],
                                    schema=old.schema().as_arrow()), snapshot_properties=offsets_summary({0: 1}))
    with pytest.raises(Exception, match=r"did not keep the records' value bytes \(kafka.value"):
        read(spark, broker, topic_name)

    serialize = AvroSerializer(SchemaRegistryClient({"url": registry.url}), json.dumps(ORDER))
    produce(broker, topic_name, [(0, None, serialize({"id": i, "item": "x"},
                                                     SerializationContext(topic_name, MessageField.VALUE)), None)
                                 for i in range(2)])
    alter(broker, topic_name, **{"odradek.iceberg.mode": "value_schema_id_prefix"})
    table = wait_committed(broker.data_dir, topic_name, {0: 2})
    assert "value" in {field.name for field in table.schema().find_field("kafka").field_type.fields}
    with pytest.raises(Exception, match=r"kafka.value null, from offset 0\)"):
        read(spark, broker, topic_name)
