"""The design's client APIs, as a small Pythonic layer over confluent-kafka (librdkafka does the protocol).

- `Producer`: sync and async sends, batched by librdkafka, with a pluggable partitioner (Java's murmur2 by default)
  and pluggable key/value encoders.
- `SimpleConsumer`: read one partition from an offset, find the offset for a time; and the seeds' low-level
  `multifetch` / `fetch(FetchRequest)` / `get_offsets_before`, which send exactly one Fetch or ListOffsets v0 request.
- `ConsumerConnector`: a group member handing out message streams per topic, or by a whitelist/blacklist filter,
  committing what the streams handed out.
- `Admin`: the topic and group administration the CLI and the mirror share.

Everything goes through confluent-kafka except those low-level calls, whose point is the request they send:
they use odradek.client.connection, the blocking connection the Spark fetcher reads with.
"""

from odradek.client.admin import Admin, ConfigValue, GroupOffset, PartitionInfo, PartitionLayout, TopicInfo
from odradek.client.connector import Blacklist, ConsumerConnector, KafkaStream, Whitelist
from odradek.client.errors import ClientError
from odradek.client.messages import Message, RecordMetadata
from odradek.client.partitioners import murmur2, murmur2_partitioner, random_partitioner
from odradek.client.producer import Producer
from odradek.client.simple import FetchedMessages, FetchRequest, SimpleConsumer

__all__ = [
    "Admin", "Blacklist", "ClientError", "ConfigValue", "ConsumerConnector", "FetchRequest", "FetchedMessages",
    "GroupOffset", "KafkaStream", "Message", "PartitionInfo", "PartitionLayout", "Producer", "RecordMetadata",
    "SimpleConsumer", "TopicInfo", "Whitelist", "murmur2", "murmur2_partitioner", "random_partitioner",
]
