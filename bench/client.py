"""The client side every workload shares: confluent-kafka configured once, the same for every broker.

One client and one configuration for all three brokers, so that differences come from the brokers. The Python loop
around the client is kept out of the way: records go in through `produce_batch` (librdkafka loops in C over a
prebuilt list) and come out through `consume` counted by `len`, because at a million records a second a Python
statement per record would measure the interpreter instead of the broker (`produce_each`, a produce() call per
record, is for the benchmarks that time a producer as an application's loop drives it: TLS, the REST proxy's native
way). The consumer's prefetch queue is allowed to hold the whole run (queued.min.messages) with no back-off when it
is full (fetch.queue.backoff.ms=0, whose 1 s default would otherwise pause fetching whenever the application is a
little behind); fetch sizes stay at the client's defaults, but the client accepts answers of any size
(receive.message.max.bytes): noida-db ignores the fetch limits and answers with the whole partition, over 100 MB
here, which the client would otherwise refuse and retry forever.
"""

from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

RECORD_SIZE = 100
CHUNK = 10_000  # records per produce_batch call

THROUGHPUT_PRODUCER = {"linger.ms": 5, "batch.size": 1_000_000, "queue.buffering.max.messages": 2_000_000,
                       "queue.buffering.max.kbytes": 2_000_000}
CONSUMER = {"enable.auto.commit": False, "queued.min.messages": 10_000_000, "fetch.queue.backoff.ms": 0,
            "auto.offset.reset": "earliest", "receive.message.max.bytes": 2_000_000_000}


def create_topic(bootstrap: str, topic: str, partitions: int, replication_factor: int = 1,
                 configs: dict[str, str] | None = None) -> float:
    """Create the topic and wait until the broker has it, in its metadata and as the leader of every partition (a
    KRaft Kafka shows a new partition's leader in Metadata a moment before its replica manager leads it, and
    answers a Produce that comes between with NOT_LEADER_OR_FOLLOWER, which the wire producer does not retry, and
    with a thousand partitions on a loaded machine that moment lasts seconds); the seconds until it was usable so,
    CreateTopics and those waits."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    started = time.perf_counter()
    admin.create_topics([NewTopic(topic, partitions, replication_factor, config=configs or {})],
                        operation_timeout=60)[topic].result(120)
    deadline = time.monotonic() + 30
    while len(admin.list_topics(topic, timeout=10).topics[topic].partitions) < partitions:
        if time.monotonic() > deadline:
            raise RuntimeError(f"{topic} does not show {partitions} partitions in metadata")
        time.sleep(0.05)
    waiting = [TopicPartition(topic, p) for p in range(partitions)]
    deadline = time.monotonic() + 30 + partitions / 10
    while waiting:
        answers = admin.list_offsets({tp: OffsetSpec.latest() for tp in waiting}, request_timeout=30)
        waiting = [tp for tp, answer in answers.items() if not_led_yet(answer)]
        if waiting and time.monotonic() > deadline:
            raise RuntimeError(f"{topic}: {len(waiting)} partitions have no leader that answers ListOffsets")
        time.sleep(0.05 if waiting else 0)
    return time.perf_counter() - started


NOT_LED_YET = (KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE,
               KafkaError.UNKNOWN_TOPIC_OR_PART)


def not_led_yet(answer) -> bool:
    """Whether a ListOffsets answer says the partition has no leader yet (librdkafka's admin results do not mark
    NOT_LEADER_OR_FOLLOWER retriable); any other error means the broker has the partition and says something else
    about it."""
    try:
        answer.result()
    except KafkaException as exc:
        return exc.args[0].code() in NOT_LED_YET or exc.args[0].retriable()
    return False


def producer(bootstrap: str, **settings) -> Producer:
    return Producer({"bootstrap.servers": bootstrap, **settings})


def produce(p: Producer, topic: str, records: int, partitions: int, *, value_size: int = RECORD_SIZE,
            messages: list[dict] | None = None) -> float:
    """Send `records` records round-robin over the partitions, a chunk to one partition at a time, and wait for
    every acknowledgement; records per second. Delivery failures raise. The records are `value_size` bytes of one
    letter, or taken in turn from `messages` (produce_batch's dicts; the first one also goes out as the warm-up)."""
    failures = []

    def delivered(err, _msg):
        if err is not None:
            failures.append(err)

    size = max(1, min(CHUNK, records // partitions))  # every partition gets a chunk each round
    chunk = messages[:size] if messages else [{"value": b"x" * value_size} for _ in range(size)]
    p.produce(topic, chunk[0]["value"], chunk[0].get("key"), partition=0, on_delivery=delivered)  # warm up
    p.flush(30)
    sent = 0
    partition = 0
    started = time.perf_counter()
    while sent < records:
        batch = chunk[:records - sent]
        queued = p.produce_batch(topic, batch, partition=partition, on_delivery=delivered)
        sent += queued
        partition = (partition + 1) % partitions
        if queued < len(batch):  # local queue full: the rest were refused (and marked); let acks drain it
            for message in batch:
                message.pop("_error", None)
            p.poll(0.005)
    if p.flush(120):
        raise RuntimeError(f"{topic}: records still unacknowledged after 120 s")
    elapsed = time.perf_counter() - started
    if failures:
        raise RuntimeError(f"{topic}: {len(failures)} records failed, first: {failures[0]}")
    return records / elapsed


def produce_each(bootstrap: str, topic: str, records: int, payload: bytes, settings: dict) -> float:
    """`records` copies of `payload` through one producer (linger.ms=5 and `settings`), a produce() call each (what
    an application's loop does, where `produce` hands librdkafka prebuilt chunks), waiting out a full local queue,
    then flushed; the seconds from the first call to the last acknowledgement, connected (and authenticated)
    before the clock starts."""
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **settings})
    p.list_topics(topic, timeout=10)
    started = time.perf_counter()
    for _ in range(records):
        while True:
            try:
                p.produce(topic, payload)
                break
            except BufferError:
                p.poll(0.01)
    if p.flush(120):
        raise RuntimeError(f"{topic}: records still unacknowledged after 120 s")
    return time.perf_counter() - started


def consume(bootstrap: str, topic: str, partitions: int, records: int) -> float:
    """Read the topic from offset 0 until `records` past the warm-up record arrived; records per second, timed
    from the first record's arrival so that connecting and the first metadata round trips are not counted."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}", **CONSUMER})
    assignment = [TopicPartition(topic, p, 0) for p in range(partitions)]
    consumer.assign(assignment)
    expected = records + 1  # the warm-up record
    seen = 0
    deadline = time.perf_counter() + 120
    while not seen and time.perf_counter() < deadline:
        seen = len(consumer.consume(1, 1.0))
    started = time.perf_counter()
    while seen < expected and time.perf_counter() < deadline:
        seen += len(consumer.consume(min(100_000, expected - seen), 1.0))
    elapsed = time.perf_counter() - started
    positions = sum(tp.offset for tp in consumer.position(assignment) if tp.offset >= 0)
    consumer.close()
    if seen < expected or positions != expected:
        raise RuntimeError(f"{topic}: consumed {seen} records ({positions} by position) of {expected}")
    return records / elapsed


def high_watermark(bootstrap: str, topic: str, partition: int = 0) -> int:
    """The partition's high watermark; 0 if the broker no longer knows the partition."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{topic}-watermark"})
    try:
        return consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=30)[1]
    except KafkaException as exc:
        if exc.args[0].code() in (KafkaError._UNKNOWN_PARTITION, KafkaError.UNKNOWN_TOPIC_OR_PART):
            return 0
        raise
    finally:
        consumer.close()
