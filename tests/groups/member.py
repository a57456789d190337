"""One consumer-group member in its own process, so a test can SIGKILL it: `python member.py CLIENT BOOTSTRAP GROUP
TOPIC SESSION_MS [INSTANCE_ID]`. CLIENT is confluent, confluent-848 (group.protocol=consumer), kafka-python or
aiokafka; INSTANCE_ID makes a confluent member static (group.instance.id).

Prints a JSON line {"assigned": [partitions]} whenever its assignment changes, and (confluent) {"callback": "assign"
or "revoke"} at every rebalance callback; SIGTERM makes it close cleanly (leaving the group, unless static).
"""

from __future__ import annotations

import asyncio
import json
import signal
import sys

client, bootstrap, group, topic, session_ms = sys.argv[1:6]
instance_id = sys.argv[6] if len(sys.argv) > 6 else None
session_ms = int(session_ms)
stopping = False


def stop(*_):
    global stopping
    stopping = True


signal.signal(signal.SIGTERM, stop)
last = None


def report(partitions) -> None:
    global last
    current = sorted(partitions)
    if current != last:
        last = current
        print(json.dumps({"assigned": current}), flush=True)


def run_confluent(kip848: bool) -> None:
    from confluent_kafka import Consumer
    config = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
              "enable.auto.commit": False}
    if instance_id:
        config["group.instance.id"] = instance_id
    if kip848:
        config["group.protocol"] = "consumer"
    else:
        config.update({"session.timeout.ms": session_ms, "heartbeat.interval.ms": 500,
                       "partition.assignment.strategy": "roundrobin"})
    consumer = Consumer(config)

    def callback(name):
        return lambda _consumer, _partitions: print(json.dumps({"callback": name}), flush=True)

    consumer.subscribe([topic], on_assign=callback("assign"), on_revoke=callback("revoke"))
    while not stopping:
        consumer.poll(0.1)
        report(tp.partition for tp in consumer.assignment())
    consumer.close()


def run_kafka_python() -> None:
    from kafka import KafkaConsumer
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                             enable_auto_commit=False, session_timeout_ms=session_ms, heartbeat_interval_ms=500,
                             partition_assignment_strategy=[RoundRobinPartitionAssignor])
    # Learn the topic's partitions before joining. kafka-python 3.0.12 loses a leader's own assignment when the
    # topic's metadata arrives just after its first join: the metadata change starts a rejoin, a short poll times
    # out with the join in flight, and once the leader has assigned, need_rejoin() is False, so the finished join
    # is never collected: no partitions and no heartbeats, for good. Seen in 1 of 49 groups in a loop and in 1 of 24
    # runs of the split test; the broker's log showed a correct generation and a clean SyncGroup.
    consumer.partitions_for_topic(topic)
    consumer.subscribe([topic])
    while not stopping:
        consumer.poll(timeout_ms=100)
        report(tp.partition for tp in consumer.assignment())
    consumer.close()


async def run_aiokafka() -> None:
    from aiokafka import AIOKafkaConsumer
    consumer = AIOKafkaConsumer(topic, bootstrap_servers=bootstrap, group_id=group, auto_offset_reset="earliest",
                                enable_auto_commit=False, session_timeout_ms=session_ms, heartbeat_interval_ms=500)
    await consumer.start()
    while not stopping:
        await consumer.getmany(timeout_ms=100)
        report(tp.partition for tp in consumer.assignment())
    await consumer.stop()


if client == "aiokafka":
    asyncio.run(run_aiokafka())
elif client == "kafka-python":
    run_kafka_python()
else:
    run_confluent(client == "confluent-848")
