"""Small requests: 4 producer processes (the C load generator) each sending one record per Produce request, into a
topic of 4 partitions, acks=1: what each request costs the broker, the path a crowd of chatty clients exercises.

linger.ms=0 and batch.num.messages=1 make librdkafka put exactly one 100-byte record in every request (Odradek's
odradek_requests_total counts one Produce per record). Two variants: librdkafka's default, which keeps several
requests in flight on each connection (pipelined), and one request in flight per producer
(max.in.flight.requests.per.connection=1), where every request waits for the previous answer. Broker CPU per
request comes from /proc/<pid>/stat over the run; cores busy says whether the broker was the side at its limit.
"""

from __future__ import annotations

from bench import client, loadgen, peers
from bench.measure import Results
from bench.workloads.loadgen import add_run, built

WORKLOAD = "small requests"
PARTITIONS = 4
PRODUCERS = 4
PRODUCER = {"acks": "1", "linger.ms": 0, "batch.num.messages": 1}
IN_FLIGHT = {"pipelined": {}, "1 in flight": {"max.in.flight.requests.per.connection": 1}}


def run(results: Results, brokers: list[str], sizes) -> None:
    if not built(results, WORKLOAD):
        return
    for round_number, broker in peers.rounds(results, WORKLOAD, brokers, sizes.repeat):
        for variant, in_flight in IN_FLIGHT.items():
            metric = f"produce requests, 1 record each, {PRODUCERS} C producers, {variant}"
            try:
                topic = f"small{round_number}-{variant.replace(' ', '-')}"
                client.create_topic(broker.bootstrap, topic, PARTITIONS)
                before = broker.cpu_seconds()
                done = loadgen.produce(broker.bootstrap, topic, sizes.small_requests, processes=PRODUCERS,
                                       config={**PRODUCER, **in_flight})
                add_run(results, WORKLOAD, metric, broker.name, done, broker.cpu_seconds() - before,
                        unit="requests/s", per="request")
            except Exception as exc:  # one failed round is a recorded error, not the end of the suite
                results.error(WORKLOAD, metric, broker.name, repr(exc), unit="requests/s")
