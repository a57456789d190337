"""Broker-side schema validation (`confluent.{key,value}.schema.validation`, odradek/broker/schema_validation.py):
a broker process with the registry beside it (`schema.registry.port`) refuses, with INVALID_RECORD in the
producer's delivery report, records whose key or value is not framed, names an id unknown or registered for
another subject, or does not decode with its schema, and takes those confluent-kafka's serializers wrote."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, record_subject_name_strategy
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf.message_factory import GetMessageClass

from odradek.client import Admin, ClientError
from odradek.embedded import BrokerProcess
from odradek.records.batch import Record, encode_batch
from odradek.registry.schemas import parse
from tests.broker.raw_client import RawClient
from tests.broker.test_produce_validation import fetch_batches, produce
from tests.security.conftest import free_port

ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
READING = json.dumps({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Reading", "type": "object",
                      "properties": {"sensor": {"type": "string"}}, "required": ["sensor"]})
RECORD_NAME = "io.confluent.kafka.serializers.subject.RecordNameStrategy"


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """A broker process of its own: the registry must run in the broker's process to validate its records."""
    port = free_port()
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data",
                            settings={"schema.registry.port": port, "group.initial.rebalance.delay.ms": 0})
    process.start()
    process.registry_url = f"http://127.0.0.1:{port}"
    yield process
    process.stop()


@pytest.fixture(scope="module")
def client(broker):
    return SchemaRegistryClient({"url": broker.registry_url})


@pytest.fixture(scope="module")
def admin(broker):
    return Admin(broker.bootstrap_servers)


def topic_with(admin, configs: dict) -> str:
    name = f"validated-{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, 1, 1, configs)
    return name


def delivered(broker, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> list:
    """Each record's delivery error (None: appended), every record in a batch of its own."""
    producer = Producer({"bootstrap.servers": broker.bootstrap_servers, "linger.ms": 0, "retries": 0})
    errors: dict[int, object] = {}
    for position, (key, value) in enumerate(records):
        def report(error, _message, position=position):
            errors[position] = error
        producer.produce(topic, value, key, on_delivery=report)
        assert producer.flush(30) == 0
    return [errors[position] for position in range(len(records))]


def framed(schema_id: int, payload: bytes) -> bytes:
    return b"\0" + schema_id.to_bytes(4, "big") + payload


def refused(error) -> bool:
    """A delivery report's INVALID_RECORD (librdkafka shows its own words for the code, not the broker's)."""
    return error is not None and error.code() == KafkaError.INVALID_RECORD


def record_errors(broker, topic: str, values: list[bytes | None], keys: list[bytes | None] | None = None) -> dict:
    """The broker's record_errors ({batch index: message}) for one batch of these values (and keys), which must be
    refused as INVALID_RECORD."""
    client = RawClient(broker.port)
    try:
        answer = produce(client, topic, encode_batch([
            Record(index, 1_700_000_000_000, (keys or [None] * len(values))[index], value)
            for index, value in enumerate(values)]))
    finally:
        client.close()
    assert answer.error_code == KafkaError.INVALID_RECORD, answer
    return {error.batch_index: error.batch_index_error_message for error in answer.record_errors}


def avro(client, topic: str, value: dict, field=MessageField.VALUE, conf: dict | None = None) -> bytes:
    return AvroSerializer(client, ORDER, conf=conf)(value, SerializationContext(topic, field))


def test_validation_off_accepts_anything(broker, admin):
    topic = topic_with(admin, {})
    assert delivered(broker, topic, [(None, b"plain"), (b"k", framed(999_999, b"junk"))]) == [None, None]


def test_value_validation_refuses_what_its_subject_did_not_register(broker, admin, client):
    topic = topic_with(admin, {"confluent.value.schema.validation": "true"})
    good = avro(client, topic, {"id": 1, "item": "tea"})
    order_id = int.from_bytes(good[1:5], "big")
    other_id = client.register_schema(f"other-{topic}-value", Schema(json.dumps(
        {"type": "record", "name": "Other", "fields": [{"name": "x", "type": "int"}]}), "AVRO"))
    errors = delivered(broker, topic, [(None, good), (b"any key", good), (None, None),  # a tombstone: no schema
                                       (None, b"plain text"), (None, framed(999_999, good[5:]))])
    assert errors[:3] == [None, None, None]
    assert refused(errors[3]) and refused(errors[4])

    refusals = record_errors(broker, topic, [
        good, b"plain text", framed(999_999, good[5:]), framed(other_id, b"\x02"),
        framed(order_id, b"\x02\x06te"),  # the string is cut short
        good + b"\x00", good])  # a byte past the Avro value
    assert refusals.pop(4).startswith(f"Record's value does not decode with schema id {order_id}: ")
    assert refusals == {1: "Record's value is not framed by a schema id",
                        2: f"Schema id 999999 is not registered for subject {topic}-value",
                        3: f"Schema id {other_id} is not registered for subject {topic}-value",
                        5: f"Record's value does not decode with schema id {order_id}: 1 bytes past the Avro value"}
    client = RawClient(broker.port)
    try:  # the records delivered above, and nothing of the refused batches
        assert [r.value for _, records in fetch_batches(client, topic) for r in records] == [good, good, None]
    finally:
        client.close()


def test_json_schema_and_protobuf_values_are_decoded(broker, admin, client):
    topic = topic_with(admin, {"confluent.value.schema.validation": "true"})
    context = SerializationContext(topic, MessageField.VALUE)
    good = JSONSerializer(READING, client)({"sensor": "s1"}, context)
    reading_id = int.from_bytes(good[1:5], "big")
    proto_topic = topic_with(admin, {"confluent.value.schema.validation": "true"})
    proto = descriptor_pb2.FileDescriptorProto()
    # a package of its own: the default descriptor pool is the process's, shared with test_serde's shop.Basket
    proto.CopyFrom(parse("PROTOBUF", 'syntax = "proto3";\npackage checkout;\nmessage Basket {\n  string owner = 1;\n}\n'
                         ).parsed)
    proto.name = f"basket_{uuid.uuid4().hex[:6]}.proto"
    descriptor_pool.Default().Add(proto)
    basket = GetMessageClass(descriptor_pool.Default().FindMessageTypeByName("checkout.Basket"))
    basket_bytes = ProtobufSerializer(basket, client, {"use.deprecated.format": False})(
        basket(owner="ann"), SerializationContext(proto_topic, MessageField.VALUE))
    basket_id = int.from_bytes(basket_bytes[1:5], "big")
    bad_reading, bad_basket = framed(reading_id, b'{"value": 1}'), framed(basket_id, b"\x00\x0a\x05an")
    errors = delivered(broker, topic, [(None, good), (None, bad_reading)])
    assert errors[0] is None and refused(errors[1])
    assert record_errors(broker, topic, [good, bad_reading]) == {1: (
        f"Record's value does not decode with schema id {reading_id}: not valid for its JSON schema: "
        "'sensor' is a required property")}
    errors = delivered(broker, proto_topic, [(None, basket_bytes), (None, bad_basket)])
    assert errors[0] is None and refused(errors[1])
    [message] = record_errors(broker, proto_topic, [bad_basket, basket_bytes]).values()
    assert message.startswith(f"Record's value does not decode with schema id {basket_id}: ")


def test_key_validation_and_a_record_name_strategy(broker, admin, client):
    topic = topic_with(admin, {"confluent.key.schema.validation": "true"})
    key = avro(client, topic, {"id": 1, "item": "k"}, MessageField.KEY)
    errors = delivered(broker, topic, [(key, b"any value"), (b"plain key", b"any value"), (None, b"keyless")])
    assert errors[0] is None and refused(errors[1]) and errors[2] is None
    assert record_errors(broker, topic, [b"v"] * 3, keys=[key, None, b"plain key"]) == {
        2: "Record's key is not framed by a schema id"}

    by_name = topic_with(admin, {"confluent.value.schema.validation": "true",
                                 "confluent.value.subject.name.strategy": RECORD_NAME})
    named = avro(client, by_name, {"id": 2, "item": "n"}, conf={"subject.name.strategy": record_subject_name_strategy})
    invoice = json.dumps({"type": "record", "name": "Invoice", "namespace": "com.acme",
                          "fields": [{"name": "total", "type": "long"}]})
    by_topic = AvroSerializer(client, invoice)({"total": 5}, SerializationContext(by_name, MessageField.VALUE))
    errors = delivered(broker, by_name, [(None, named), (None, by_topic)])
    assert errors[0] is None and refused(errors[1])  # Order's id is under com.acme.Order, Invoice's is not
    invoice_id = int.from_bytes(by_topic[1:5], "big")  # registered under <topic>-value only
    assert record_errors(broker, by_name, [named, by_topic]) == {
        1: f"Schema id {invoice_id} is not registered for subject com.acme.Invoice"}


def test_record_name_of_a_protobuf_message_is_the_one_its_indexes_name(broker, admin, client):
    topic = topic_with(admin, {"confluent.value.schema.validation": "true",
                               "confluent.value.subject.name.strategy": RECORD_NAME})
    proto = descriptor_pb2.FileDescriptorProto()
    proto.CopyFrom(parse("PROTOBUF", 'syntax = "proto3";\npackage till;\nmessage Basket {\n  string owner = 1;\n}\n'
                         "message Receipt {\n  int64 total = 1;\n}\n").parsed)
    proto.name = f"till_{uuid.uuid4().hex[:6]}.proto"
    descriptor_pool.Default().Add(proto)
    receipt = GetMessageClass(descriptor_pool.Default().FindMessageTypeByName("till.Receipt"))
    value = ProtobufSerializer(receipt, client, {"use.deprecated.format": False,
                                                 "subject.name.strategy": record_subject_name_strategy})(
        receipt(total=12), SerializationContext(topic, MessageField.VALUE))
    assert client.get_latest_version("till.Receipt").schema_id == int.from_bytes(value[1:5], "big")
    assert delivered(broker, topic, [(None, value)]) == [None]
    as_basket = value[:5] + b"\x00" + value[6:]  # the same file's first message: no such subject
    assert value[5:6] == b"\x02"  # one index (zigzag 1), then 1: the second message
    assert record_errors(broker, topic, [as_basket]) == {
        0: f"Schema id {int.from_bytes(value[1:5], 'big')} is not registered for subject till.Basket"}


def test_invalid_strategy_is_invalid_config(admin):
    with pytest.raises(ClientError, match="INVALID_CONFIG"):
        topic_with(admin, {"confluent.value.subject.name.strategy": "com.acme.MyStrategy"})


def test_a_broker_without_a_registry_refuses_what_it_cannot_validate(tmp_path):
    process = BrokerProcess(tmp_path / "data").start()
    try:
        admin = Admin(process.bootstrap_servers)
        topic = topic_with(admin, {"confluent.value.schema.validation": "true"})
        plain = topic_with(admin, {})
        assert refused(delivered(process, topic, [(None, framed(1, b"\x02"))])[0])
        assert delivered(process, plain, [(None, b"anything")]) == [None]
    finally:
        process.stop()
