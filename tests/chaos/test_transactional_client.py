"""The chaos workload's transactional client against one real broker: a fatal error librdkafka raises for the
transactional producer (here PRODUCER_FENCED, another producer taking its transactional id) is counted in the run's
producer-fatal column, so a run with one is not clean (issue 15: a fatal INVALID_TXN_STATE went uncounted)."""

from __future__ import annotations

import threading

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import wait_until

from .checker import Report
from .workload import History, Outcome, Settings, TransactionalClient


def test_a_fenced_transactional_producer_counts_as_a_producer_fatal_error(broker, topic_name):
    admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers, "log_level": 0})
    admin.create_topics([NewTopic(topic_name, 2, 1)])[topic_name].result(30)
    history, stop = History(), threading.Event()
    client = TransactionalClient("transactions", history, stop, broker.bootstrap_servers, topic_name, 2, seed=1)
    client.start()
    try:
        assert wait_until(lambda: sum(op.f == "txn" and op.type in ("ok", "fail") for op in history.ops) >= 3,
                          timeout=30)
        intruder = Producer({"bootstrap.servers": broker.bootstrap_servers,
                             "transactional.id": f"{topic_name}-transactions", "log_level": 0})
        intruder.init_transactions(30)  # fences the client's producer: its next call is refused, fatally
        assert wait_until(lambda: client.fatal_errors, timeout=30), history.ops[-5:]
    finally:
        stop.set()
        client.join(30)
    assert client.failure is None
    outcome = Outcome(Settings(), Report(), [], 0.0, 0.0, client.fatal_errors)
    assert outcome.row()["producer-fatal"] >= 1 and not outcome.valid
    print(client.fatal_errors)
