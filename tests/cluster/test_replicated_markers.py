"""Transactions on a replicated topic: the followers copy the leader's transaction markers (control batches) like any
other batch, so acks=all writes keep being acknowledged after a commit and every replica holds the same log.

Found by the chaos harness at replication factor 3 (docs/chaos.md, seed 300): followers refused the first marker they
fetched as a client's write, their fetchers stopped, the high watermark stood still, acks=all sends timed out by the
thousand and librdkafka, bumping its epoch after the timeouts, wrote records it had already written a second time."""

from __future__ import annotations

import uuid

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import wait_until


def segment_bytes(broker, topic: str) -> bytes:
    path = broker.data_dir / f"{topic}-0" / "00000000000000000000.log"
    return path.read_bytes() if path.exists() else b""


def test_acks_all_writes_after_a_committed_transaction_are_acknowledged_and_replicated(cluster):
    topic = f"markers-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic, 1, 3, config={"min.insync.replicas": "2"})])[topic].result(30)

    transactional = Producer({"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": f"t-{topic}",
                              "log_level": 0})
    transactional.init_transactions(30)
    transactional.begin_transaction()
    transactional.produce(topic, value=b"in-a-transaction", partition=0)
    transactional.commit_transaction(30)  # a COMMIT marker on the partition's leader, for the followers to fetch

    errors = []
    producer = Producer({"bootstrap.servers": cluster.bootstrap_servers, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 5, "message.timeout.ms": 10000, "log_level": 0})
    for i in range(20):
        producer.produce(topic, value=f"after-{i}".encode(), partition=0,
                         on_delivery=lambda err, msg: errors.append(err))
    producer.flush(30)
    assert len(errors) == 20 and [str(e) for e in errors if e is not None] == []  # not _MSG_TIMED_OUT

    # 1 record, its marker and 20 records (in one batch or more) on every replica, byte for byte
    assert wait_until(lambda: len({segment_bytes(b, topic) for b in cluster.brokers}) == 1, timeout=10), \
        [len(segment_bytes(b, topic)) for b in cluster.brokers]
