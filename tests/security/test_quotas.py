"""Client quotas through a real broker: AlterClientQuotas/DescribeClientQuotas over the wire, kept in the catalogue,
and a confluent-kafka producer held to its producer_byte_rate (measured, within 10%) by throttle_time_ms and the
muted channel."""

from __future__ import annotations

import time

import pytest
from confluent_kafka import Consumer, Producer

from odradek.embedded import BrokerProcess
from odradek.errors import ErrorCode
from odradek.protocol import api
from tests.broker.raw_client import RawClient
from tests.security.conftest import call_once

QUOTA_BYTES_PER_SECOND = 400_000


@pytest.fixture(scope="module")
def quota_broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("quota-broker") / "data",
                            settings={"quota.window.num": 3, "quota.window.size.seconds": 1})
    process.start()
    yield process
    process.stop()


def call(broker, api_name: str, version: int, **fields):
    return call_once(broker.port, api_name, version, **fields)


def alter(broker, entity: list[tuple[str, str | None]], ops: list[tuple[str, float, bool]], validate_only=False):
    Request = api("AlterClientQuotas").request
    answer = call(broker, "AlterClientQuotas", 1, validate_only=validate_only, entries=[Request.EntryData(
        entity=[Request.EntityData(entity_type=kind, entity_name=name) for kind, name in entity],
        ops=[Request.OpData(key=key, value=value, remove=remove) for key, value, remove in ops])])
    return answer.entries[0]


def describe(broker, components=(), strict=False):
    Request = api("DescribeClientQuotas").request
    answer = call(broker, "DescribeClientQuotas", 1, strict=strict, components=[
        Request.ComponentData(entity_type=kind, match_type=match_type, match=match)
        for kind, match_type, match in components])
    assert answer.error_code == ErrorCode.NONE, answer.error_message
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity): {v.key: v.value for v in entry.values}
            for entry in answer.entries}


def test_alter_and_describe_client_quotas(quota_broker):
    assert alter(quota_broker, [("user", "alice"), ("client-id", None)],
                 [("consumer_byte_rate", 2048.0, False), ("request_percentage", 50.0, False)]).error_code == 0
    assert alter(quota_broker, [("user", "alice"), ("client-id", None)],
                 [("request_percentage", 0.0, True)]).error_code == 0
    assert alter(quota_broker, [("user", "bob")], [("producer_byte_rate", 1.0, False)],
                 validate_only=True).error_code == 0
    assert alter(quota_broker, [("user", "bob")], [("no_such_quota", 1.0, False)]).error_code == \
        ErrorCode.INVALID_REQUEST
    assert alter(quota_broker, [("ip", "1.2.3.4")], [("producer_byte_rate", 1.0, False)]).error_code == \
        ErrorCode.INVALID_REQUEST
    assert describe(quota_broker, [("user", 0, "alice")]) == {
        (("client-id", None), ("user", "alice")): {"consumer_byte_rate": 2048.0}}
    assert describe(quota_broker, [("user", 0, "alice")], strict=True) == {}
    assert describe(quota_broker, [("user", 0, "bob")]) == {}  # validate_only stored nothing


def test_a_producer_is_slowed_to_its_byte_rate(quota_broker):
    client_id = "throttled-producer"
    assert alter(quota_broker, [("client-id", client_id)],
                 [("producer_byte_rate", float(QUOTA_BYTES_PER_SECOND), False)]).error_code == 0
    producer = Producer({"bootstrap.servers": quota_broker.bootstrap_servers, "client.id": client_id,
                         "linger.ms": 5, "queue.buffering.max.kbytes": 256, "compression.type": "none",
                         "batch.size": 12_000})  # about one record a request, so acks come evenly
    value = b"x" * 10_000
    acked: list[float] = []

    def delivered(err, msg):
        assert err is None, err
        acked.append(time.monotonic())

    start = time.monotonic()
    while time.monotonic() - start < 20:
        try:
            producer.produce("quota-topic", value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.01)
    producer.flush(30)
    # the rate after the first burst the sampled window allows, over 18 s: about five of the burst-and-wait cycles
    # Kafka's sampled rate goes through with three samples, so where the span starts in a cycle moves it little
    steady = [t for t in acked if start + 2 <= t < start + 20]
    rate = (len(steady) - 1) * len(value) / (steady[-1] - steady[0])
    assert abs(rate - QUOTA_BYTES_PER_SECOND) / QUOTA_BYTES_PER_SECOND < 0.10, rate
    print(f"throttled producer: {rate:.0f} B/s against a quota of {QUOTA_BYTES_PER_SECOND} B/s")


def test_request_percentage_throttles_and_mutes_a_busy_client(quota_broker):
    assert alter(quota_broker, [("client-id", "busy-client")], [("request_percentage", 0.1, False)]).error_code == 0
    client = RawClient(quota_broker.port, client_id="busy-client")
    gaps = []  # (throttle_time_ms of an answer, seconds from sending its request to the next answer's arrival)
    try:
        previous = None  # (throttle_time_ms of the last answer, when its request was sent)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            sent = time.monotonic()
            answer = client.call("Metadata", 12, topics=None, allow_auto_topic_creation=False)
            if previous is not None:
                gaps.append((previous[0], time.monotonic() - previous[1]))
            previous = (answer.throttle_time_ms, sent)
    finally:
        client.close()
    throttled = [(throttle, gap) for throttle, gap in gaps if throttle > 0]
    assert throttled, "no answer carried a throttle time"
    assert any(throttle >= 20 for throttle, _ in throttled), throttled
    # muted once the throttled answer went out, so the next answer comes the throttle time after that at the earliest;
    # its request was sent before that answer went out, so from there it is at least the throttle time whatever the
    # delays (the client's own wake-up after the answer, on a loaded machine, counts in neither direction)
    assert all(gap >= throttle / 1000 for throttle, gap in throttled), throttled


def test_a_consumer_is_slowed_to_its_byte_rate(quota_broker):
    topic, value = "quota-consumed", b"y" * 10_000
    producer = Producer({"bootstrap.servers": quota_broker.bootstrap_servers, "linger.ms": 5,
                         "batch.size": 12_000})  # one record a batch, so fetches stay near fetch.max.bytes
    for _ in range(1000):  # 10 MB, more than the consumer can take in the time measured
        producer.produce(topic, value)
        producer.poll(0)
    producer.flush(30)
    assert alter(quota_broker, [("client-id", "throttled-consumer")],
                 [("consumer_byte_rate", float(QUOTA_BYTES_PER_SECOND), False)]).error_code == 0
    consumer = Consumer({"bootstrap.servers": quota_broker.bootstrap_servers, "client.id": "throttled-consumer",
                         "group.id": "quota-group", "auto.offset.reset": "earliest", "fetch.max.bytes": 50_000,
                         "message.max.bytes": 50_000,
                         "max.partition.fetch.bytes": 50_000, "enable.auto.commit": False})
    consumer.subscribe([topic])
    received: list[float] = []
    start = time.monotonic()
    try:
        while time.monotonic() - start < 21:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                received.append(time.monotonic())
    finally:
        consumer.close()
    steady = [t for t in received if received[0] + 2 <= t < received[0] + 20]  # 18 s, as for the producer
    rate = (len(steady) - 1) * len(value) / (steady[-1] - steady[0])
    # coarser than the producer's 10%: a throttled fetch is answered empty and fetched again whole
    assert abs(rate - QUOTA_BYTES_PER_SECOND) / QUOTA_BYTES_PER_SECOND < 0.15, rate
    print(f"throttled consumer: {rate:.0f} B/s against a quota of {QUOTA_BYTES_PER_SECOND} B/s")
