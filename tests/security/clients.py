"""Ten records written and read back with kafka-python or aiokafka under a given client configuration: what the
security tests check each Python client can do on each kind of listener."""

from __future__ import annotations

import asyncio
import uuid

EXPECTED = [f"v{index}".encode() for index in range(10)]


def kafka_python_round_trip(config: dict) -> list[bytes]:
    from kafka import KafkaConsumer, KafkaProducer

    topic = f"kafka-python-{uuid.uuid4().hex[:8]}"
    producer = KafkaProducer(**config)
    for value in EXPECTED:
        producer.send(topic, value)
    producer.flush(10)
    producer.close()
    consumer = KafkaConsumer(topic, auto_offset_reset="earliest", consumer_timeout_ms=10000, **config)
    values = [message.value for _, message in zip(range(len(EXPECTED)), consumer)]
    consumer.close()
    return values


def aiokafka_round_trip(config: dict) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer

    async def run() -> list[bytes]:
        topic = f"aiokafka-{uuid.uuid4().hex[:8]}"
        producer = AIOKafkaProducer(**config)
        await producer.start()
        try:
            for value in EXPECTED:
                await producer.send_and_wait(topic, value)
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(topic, auto_offset_reset="earliest", **config)
        await consumer.start()
        try:
            return [(await asyncio.wait_for(consumer.getone(), 10)).value for _ in EXPECTED]
        finally:
            await consumer.stop()

    return asyncio.run(run())
