"""Writing DataFrames to topics: the sink half of format("odradek"), with Spark's Kafka sink contract.

Columns: value (string or binary, required), key (string or binary), headers (array<struct<key string, value
binary>>), topic (string; the topic option wins over it), partition (int; null lets the producer's partitioner
decide). Other columns are ignored. Each task produces its Arrow batches through one confluent-kafka Producer and
fails if any record was not acknowledged, so Spark's task retry gives at-least-once delivery, as Spark's sink does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
from confluent_kafka import KafkaException, Producer
from pyspark.sql.datasource import DataSourceArrowWriter, DataSourceStreamArrowWriter, WriterCommitMessage
from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

from odradek.spark.options import OptionError, SinkOptions, parse_sink_options

SINK_COLUMNS = ("key", "value", "headers", "topic", "partition")
_KEY_OR_VALUE_TYPES = (StringType, BinaryType)


def check_sink_schema(schema: StructType, options: SinkOptions) -> None:
    """Spark's checks for the sink's columns, on the driver, one line per mistake."""
    fields = {field.name: field.dataType for field in schema.fields}
    if "value" not in fields:
        raise OptionError("value: required column not found (the sink writes a 'value' column of string or binary)")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], _KEY_OR_VALUE_TYPES):
            raise OptionError(f"{name}: column must be string or binary, not {fields[name].simpleString()}")
    if "topic" in fields and not isinstance(fields["topic"], StringType):
        raise OptionError(f"topic: column must be string, not {fields['topic'].simpleString()}")
    if options.topic is None and "topic" not in fields:
        raise OptionError("topic: give the topic option or a 'topic' column")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise OptionError(f"partition: column must be int, not {fields['partition'].simpleString()}")
    headers = fields.get("headers")
    if headers is not None and not (
            isinstance(headers, ArrayType) and isinstance(headers.elementType, StructType)
            and [(f.name, type(f.dataType)) for f in headers.elementType.fields]
            == [("key", StringType), ("value", BinaryType)]):
        raise OptionError("headers: column must be array<struct<key: string, value: binary>>, "
                          f"not {headers.simpleString()}")


@dataclass
class ProducedRecords(WriterCommitMessage):
    """What a task reports back: how many records the broker acknowledged."""

    count: int


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> ProducedRecords:
    """Produce every row of the task's batches; raise if the broker did not acknowledge all of them."""
    try:
        producer = Producer({"log.connection.close": False, "acks": "all", "linger.ms": 5,
                             **options.client_config})
    except KafkaException as exc:
        raise OptionError(f"kafka.*: the client refused a setting: {exc.args[0].str()}") from None
    failures = []
    count = 0

    def delivered(error, message):
        if error is not None:
            failures.append(f"{message.topic()}-{message.partition()}: {error.str()}")

    for batch in batches:
        columns = {name: batch.column(name).to_pylist() if name in batch.schema.names else [None] * batch.num_rows
                   for name in SINK_COLUMNS}
        if options.topic is not None:
            columns["topic"] = [options.topic] * batch.num_rows
        for key, value, headers, topic, partition in zip(*(columns[name] for name in SINK_COLUMNS)):
            if topic is None:
                raise OptionError("topic: a row has a null topic and no topic option is set")
            arguments = {"key": key, "value": value, "on_delivery": delivered}
            if headers:
                arguments["headers"] = [(h["key"], h["value"]) for h in headers]
            if partition is not None:
                arguments["partition"] = partition
            while True:
                try:
                    producer.produce(topic, **arguments)
                    break
                except BufferError:  # the client's queue is full: let it drain
                    producer.poll(0.05)
        count += batch.num_rows
        producer.poll(0)
    remaining = producer.flush(60)
    if failures or remaining:
        raise KafkaException(f"{len(failures) + remaining} records not acknowledged by the broker, first: "
                             f"{(failures or ['flush timed out'])[0]}")
    return ProducedRecords(count)


class OdradekBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: dict, schema: StructType):
        self.options = parse_sink_options(options)
        check_sink_schema(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        return produce_batches(self.options, iterator)


class OdradekStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: dict, schema: StructType):
        self.options = parse_sink_options(options)
        check_sink_schema(schema, self.options)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> ProducedRecords:
        return produce_batches(self.options, iterator)

    def commit(self, messages, batchId: int) -> None:
        """Each task flushed and checked its records before returning: nothing is left to commit."""

    def abort(self, messages, batchId: int) -> None:
        """Records already produced stay produced (at-least-once); a retried batch may write them again."""
