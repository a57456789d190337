"""Metadata requests that name topics by id (issue 12): answered as Kafka's KafkaApis answers them, never a closed
connection. Versions 10 and 11 may not use ids (INVALID_REQUEST for every topic, a null name given as ""); from
version 12 a known id gives the topic, an unknown one UNKNOWN_TOPIC_ID with a null name."""

from __future__ import annotations

import uuid

import pytest

from odradek.errors import ErrorCode
from odradek.protocol import api
from odradek.protocol.schema import ZERO_UUID
from .raw_client import RawClient

METADATA = api("Metadata")


def metadata(port: int, version: int, *topics: tuple[str | None, uuid.UUID]):
    """A Metadata request for these (name, id) pairs; all topics when none are given."""
    client = RawClient(port)
    try:
        return client.call("Metadata", version, allow_auto_topic_creation=True,
                           include_topic_authorized_operations=False,
                           topics=[METADATA.request.MetadataRequestTopic(name=name, topic_id=topic_id)
                                   for name, topic_id in topics] or None)
    finally:
        client.close()


@pytest.fixture(scope="module")
def known_topic(broker) -> tuple[str, uuid.UUID]:
    [topic] = metadata(broker.port, 12, ("by-id-known", ZERO_UUID)).topics
    assert topic.error_code == ErrorCode.NONE
    return topic.name, topic.topic_id


@pytest.mark.parametrize("version", [10, 11])
@pytest.mark.parametrize("known", [True, False], ids=["known-id", "unknown-id"])
def test_v10_v11_refuse_a_topic_named_by_id(broker, known_topic, version, known):
    topic_id = known_topic[1] if known else uuid.uuid4()
    answer = metadata(broker.port, version, (None, topic_id), ("other-name", ZERO_UUID))
    assert [(t.error_code, t.name, t.topic_id) for t in answer.topics] == [
        (ErrorCode.INVALID_REQUEST, "", topic_id), (ErrorCode.INVALID_REQUEST, "other-name", ZERO_UUID)]


@pytest.mark.parametrize("version", [12, 13])
def test_v12_up_look_the_id_up(broker, known_topic, version):
    name, topic_id = known_topic
    unknown = uuid.uuid4()
    answer = metadata(broker.port, version, (None, topic_id), (None, unknown))
    assert [(t.error_code, t.name, t.topic_id) for t in answer.topics] == [
        (ErrorCode.NONE, name, topic_id), (ErrorCode.UNKNOWN_TOPIC_ID, None, unknown)]
    assert len(answer.topics[0].partitions) == 1


def test_v12_a_request_by_id_does_not_create_the_topics_it_names(broker, known_topic):
    """Kafka answers a request that carries any id by its ids alone: names beside them neither show nor get created."""
    name, topic_id = known_topic
    answer = metadata(broker.port, 12, (None, topic_id), ("by-id-not-created", ZERO_UUID))
    assert [t.name for t in answer.topics] == [name]
    everything = metadata(broker.port, 12).topics
    assert "by-id-not-created" not in {t.name for t in everything}


@pytest.mark.parametrize("version", [10, 11])
def test_v10_v11_all_topics_still_answer(broker, known_topic, version):
    """topics null (all topics) has no names to check: found by the fuzzer, the v10/v11 check failed on it."""
    assert known_topic[0] in {topic.name for topic in metadata(broker.port, version).topics}
