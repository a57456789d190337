"""aiokafka 0.14 against a real broker: it picks the highest versions inside our ranges, so it checks our minimums."""

from __future__ import annotations

import asyncio

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition


def test_produce_and_consume(broker, topic_name):
    async def scenario():
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap_servers, compression_type="gzip")
        await producer.start()
        try:
            for i in range(200):
                await producer.send(topic_name, f"a{i}".encode(), key=b"k", headers=[("h", b"1")])
            await producer.flush()
            last = await producer.send_and_wait(topic_name, b"last", key=b"k")
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap_servers, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic_name, 0)])
            await consumer.seek_to_beginning(TopicPartition(topic_name, 0))
            values = []
            while len(values) < 201:
                batch = await asyncio.wait_for(consumer.getmany(timeout_ms=500), 20)
                for records in batch.values():
                    values.extend(r.value for r in records)
        finally:
            await consumer.stop()
        return last, values

    last, values = asyncio.run(scenario())
    assert last.offset == 200
    assert values == [f"a{i}".encode() for i in range(200)] + [b"last"]
