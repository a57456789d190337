"""The schema embedded formats, Avro, JSON Schema and Protobuf, through a schema registry (Confluent's API:
odradek's own registry, or Confluent's) with confluent-kafka's serializers: a record's JSON data is serialized with
the schema the request gives (registered under the topic's subject, <topic>-key or <topic>-value, as Confluent's
proxy does) or names by id, into Confluent's wire format (magic byte 0, the 4-byte schema id, for Protobuf the
message indexes, the payload); records read are deserialized with the writer's schema their id names.

A Protobuf schema is .proto text, compiled by odradek.registry.schemas (protoc) into its own descriptor pool; its
first message is the record's type (as Confluent's proxy takes it), and JSON data goes in and out by protobuf's
JSON mapping (json_format), field names as the .proto spells them.

Refusals as Confluent's proxy gives them: a schema that does not parse 42205, data that does not fit it 42203,
the registry refusing or failing a registration or a lookup 40801. Serializers are kept per schema (bounded LRU).
"""

from __future__ import annotations

import collections
import json
import struct
import threading

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient, SchemaRegistryError
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from google.protobuf import descriptor_pool, json_format, message_factory
from confluent_kafka.serialization import MessageField, SerializationContext

from odradek.registry.schemas import parse
from odradek.restproxy.errors import JSON_CONVERSION, RestError, unprocessable

SERVED = ("avro", "jsonschema", "protobuf")
SCHEMA_TYPES = {"avro": "AVRO", "jsonschema": "JSON", "protobuf": "PROTOBUF"}
INVALID_SCHEMA = 42205
SCHEMA_REGISTRATION = 40801
CACHED = 256


def primitive_as_object(fmt: str, schema: str) -> str:
    """An Avro schema that is a bare primitive name ("string") as {"type": "string"}, the same schema, which
    confluent-kafka's AvroSerializer takes (it fails on the bare name)."""
    if fmt == "avro":
        try:
            parsed = json.loads(schema)
        except ValueError:
            return schema  # the serializer refuses it as it is
        if isinstance(parsed, str):
            return json.dumps({"type": parsed})
    return schema


def message_class(text: str):
    """The message class of a .proto schema's first message, in a descriptor pool of its own."""
    file = parse("PROTOBUF", text).parsed
    if not file.message_type:
        raise ValueError("the schema has no message")
    pool = descriptor_pool.DescriptorPool()
    for dependency in file.dependency:  # google/protobuf/*.proto: the well-known types the runtime carries
        known = descriptor_pool.Default().FindFileByName(dependency)
        known_proto = type(file)()
        known.CopyToProto(known_proto)
        pool.Add(known_proto)
    pool.Add(file)
    name = f"{file.package}.{file.message_type[0].name}" if file.package else file.message_type[0].name
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(name))


def registration_failed(exc: Exception) -> RestError:
    return RestError(408, SCHEMA_REGISTRATION, f"Schema registration or lookup failed: {exc}")


class SchemaFormats:
    def __init__(self, url: str, config: dict | None = None):
        self.client = SchemaRegistryClient({"url": url, **(config or {})})
        self._serializers: collections.OrderedDict[tuple, object] = collections.OrderedDict()
        self._lock = threading.Lock()
        self._deserializers = {"avro": AvroDeserializer(self.client),
                               "jsonschema": JSONDeserializer(None, schema_registry_client=self.client)}
        self._protobuf_readers: collections.OrderedDict[int, ProtobufDeserializer] = collections.OrderedDict()

    def _serializer(self, fmt: str, schema: str | None, schema_id: int | None):
        key = (fmt, schema, schema_id)
        with self._lock:
            found = self._serializers.get(key)
            if found is not None:
                self._serializers.move_to_end(key)
                return found
        if schema_id is not None:
            try:
                registered = self.client.get_schema(schema_id)
            except SchemaRegistryError as exc:
                raise registration_failed(exc) from None
            if registered.schema_type != SCHEMA_TYPES[fmt]:
                raise unprocessable(f"Invalid schema: schema {schema_id} is {registered.schema_type}, not {fmt}",
                                    INVALID_SCHEMA)
            conf = {"auto.register.schemas": False, "use.schema.id": schema_id}
            schema_of = registered
        else:
            conf, schema_of = {"auto.register.schemas": True}, Schema(primitive_as_object(fmt, schema),
                                                                      SCHEMA_TYPES[fmt])
        try:
            if fmt == "avro":
                made = AvroSerializer(self.client, schema_of, conf=conf)
            elif fmt == "jsonschema":
                made = JSONSerializer(schema_of, self.client, conf=conf)
            else:
                made = protobuf_writer(message_class(schema_of.schema_str), self.client, conf)
        except Exception as exc:  # the schema libraries' own parse errors, of many kinds
            raise unprocessable(f"Invalid schema: {exc}", INVALID_SCHEMA) from None
        with self._lock:
            self._serializers[key] = made
            if len(self._serializers) > CACHED:
                self._serializers.popitem(last=False)
        return made

    def encode(self, fmt: str, topic: str, is_key: bool, schema: str | None, schema_id: int | None,
               data) -> tuple[bytes | None, int]:
        """(the record's key or value in the wire format, its schema id); None data stays None."""
        if schema is None and schema_id is None:
            raise unprocessable(f"Request includes {'keys' if is_key else 'values'} but does not include "
                                f"{'key' if is_key else 'value'} schema", 42201 if is_key else 42202)
        serializer = self._serializer(fmt, schema, schema_id)
        if data is None:
            return None, schema_id or -1
        context = SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE)
        try:
            encoded = serializer(data, context)
        except SchemaRegistryError as exc:
            raise registration_failed(exc) from None
        except Exception as exc:  # fastavro's and jsonschema's refusals of the data
            raise unprocessable(f"Conversion of JSON to {fmt} failed: {exc}", JSON_CONVERSION) from None
        return encoded, struct.unpack(">I", encoded[1:5])[0]

    def _protobuf_reader(self, data: bytes) -> ProtobufDeserializer:
        """The deserializer of the schema a Protobuf record's id names (kept per id, bounded)."""
        schema_id = struct.unpack(">I", data[1:5])[0] if len(data) >= 5 else -1
        with self._lock:
            found = self._protobuf_readers.get(schema_id)
        if found is None:
            found = ProtobufDeserializer(message_class(self.client.get_schema(schema_id).schema_str),
                                         {"use.deprecated.format": False})
            with self._lock:
                self._protobuf_readers[schema_id] = found
                if len(self._protobuf_readers) > CACHED:
                    self._protobuf_readers.popitem(last=False)
        return found

    def decode(self, fmt: str, topic: str, is_key: bool, data: bytes | None):
        if data is None:
            return None
        context = SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE)
        try:
            if fmt == "protobuf":
                return json_format.MessageToDict(self._protobuf_reader(data)(data, context),
                                                 preserving_proto_field_name=True)
            return self._deserializers[fmt](data, context)
        except SchemaRegistryError as exc:
            raise registration_failed(exc) from None
        except Exception as exc:
            raise RestError(500, 50002, f"Kafka error: a record is not {fmt} with a registered schema: {exc}") \
                from None


def protobuf_writer(cls, client: SchemaRegistryClient, conf: dict):
    """A serializer of JSON data as `cls` messages (protobuf's JSON mapping), in Confluent's wire format."""
    serializer = ProtobufSerializer(cls, client, {**conf, "use.deprecated.format": False})

    def serialize(data, context):
        return serializer(json_format.ParseDict(data, cls()), context)

    return serialize
