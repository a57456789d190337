"""Produce and consume throughput of 100-byte records driven by the C load generator (bench/loadgen), with the
figures that say which side saturated: CPU per record and cores busy, for the broker and for the client.

The Python client's figures (the throughput workload) are what a Python user sees, but its client costs ten times
the broker's CPU per record, so they measure the client. Here several C producer processes send into a topic of 4
partitions (acks=1, linger.ms=5, 1 MB batches, the Python workload's producer settings) and then several C consumers
read it back from the start, each process a share of the partitions. Broker CPU comes from /proc/<pid>/stat over
the run, the client's from each process's getrusage; "cores busy" is CPU seconds over the run's wall time, so a
broker at its limit shows the cores it can use (one for a single-threaded Python process) while the client's stay
below what it could use. Every round starts a fresh broker; rounds interleave across brokers (peers.rounds).

Each round runs twice, into two topics: with the programs over librdkafka (what a C client sees: librdkafka's cost
per record is above the brokers', so its processes are what saturates the 2 cores), then with the wire programs
(the same records, batch size and acks, encoded once and sent again and again: the broker saturates), which get
WIRE_RECORDS_FACTOR times the records, since they are done that much sooner. Then the wire programs once more, into
a third topic, producers and consumers started together: the consumers tail the partitions as they fill, as a
pipeline's do, so every fetch meets the newest batches (for Odradek, often still being written by its writer
thread), and the broker's CPU per record covers both sides.
"""

from __future__ import annotations

from bench import client, loadgen, peers
from bench.measure import Results

WORKLOAD = "loadgen"
PARTITIONS = 4
PRODUCERS = 2
CONSUMERS = 2
PRODUCER = {"acks": "1", **client.THROUGHPUT_PRODUCER}
WIRE_RECORDS_FACTOR = 4


def run(results: Results, brokers: list[str], sizes) -> None:
    if not built(results, WORKLOAD):
        return
    for round_number, broker in peers.rounds(results, WORKLOAD, brokers, sizes.repeat):
        one_round(results, broker, f"lg{round_number}", sizes.loadgen_records, wire=False)
        one_round(results, broker, f"wire{round_number}", sizes.loadgen_records * WIRE_RECORDS_FACTOR, wire=True)


def one_round(results: Results, broker: peers.Broker, topic: str, records: int, *, wire: bool) -> None:
    programs = "wire" if wire else "C"
    produce_metric = f"produce, {PARTITIONS} partitions, acks=1, {PRODUCERS} {programs} producers"
    consume_metric = f"consume, {PARTITIONS} partitions, {CONSUMERS} {programs} consumers"
    try:
        client.create_topic(broker.bootstrap, topic, PARTITIONS)
        before = broker.cpu_times()
        produced = loadgen.produce(broker.bootstrap, topic, records, processes=PRODUCERS, config=PRODUCER,
                                   wire_partitions=PARTITIONS if wire else 0)
        add_run(results, WORKLOAD, produce_metric, broker.name, produced, *cpu_since(broker, before))
        before = broker.cpu_times()
        consumed = loadgen.consume(broker.bootstrap, topic, produced.partition_records, processes=CONSUMERS,
                                   config=client.CONSUMER, wire=wire)
        add_run(results, WORKLOAD, consume_metric, broker.name, consumed, *cpu_since(broker, before))
    except Exception as exc:  # one failed round is a recorded error, not the end of the suite
        results.error(WORKLOAD, produce_metric, broker.name, repr(exc), unit="records/s")
        return
    if wire:
        tailed_round(results, broker, f"{topic}-tailed", records, produced.partition_records)


def tailed_round(results: Results, broker: peers.Broker, topic: str, records: int,
                 partition_records: tuple[int, ...]) -> None:
    """The wire round's producers and consumers at once: the produce rate, the consumers' (first start to last
    record) and the broker's CPU per record produced, which pays for writing and for serving each record once."""
    produce_metric = f"produce, {PARTITIONS} partitions, acks=1, {PRODUCERS} wire producers, {CONSUMERS} tailing"
    consume_metric = f"consume while produced, {PARTITIONS} partitions, {CONSUMERS} wire consumers tailing"
    try:
        client.create_topic(broker.bootstrap, topic, PARTITIONS)
        before = broker.cpu_times()
        produced, consumed = loadgen.produce_while_consumed(
            broker.bootstrap, topic, records, partition_records, producers=PRODUCERS, consumers=CONSUMERS,
            config=PRODUCER, wire_partitions=PARTITIONS)
        add_run(results, WORKLOAD, produce_metric, broker.name, produced, *cpu_since(broker, before))
        results.add(WORKLOAD, consume_metric, broker.name, consumed.records_per_s, unit="records/s")
    except Exception as exc:
        results.error(WORKLOAD, produce_metric, broker.name, repr(exc), unit="records/s")


def built(results: Results, workload: str) -> bool:
    """Whether the load generator is built; if not, the workload's note says how to build it."""
    try:
        loadgen.require()
    except loadgen.Unavailable as exc:
        results.note(workload, "skipped", str(exc))
        return False
    return True


def add_run(results: Results, workload: str, metric: str, broker: str, done: loadgen.Run, broker_cpu: float,
            broker_kernel_cpu: float | None = None, *, unit: str = "records/s", per: str = "record") -> None:
    """The run's rate, the same records (or requests) per second of broker CPU (the rate a broker would reach with
    a core to itself, whatever else the machine ran) and, for the broker and the client, CPU per record (or per
    request) in microseconds and cores busy over the run's wall time; with `broker_kernel_cpu`, the part of the
    broker's CPU per record spent in the kernel too (socket copies, and for Odradek the copy of every byte into the
    page cache, which the peers, keeping records in their own memory, do not make)."""
    results.add(workload, metric, broker, done.records_per_s, unit=unit)
    results.add(workload, f"{per}s per broker CPU second, {metric}", broker, done.records / broker_cpu,
                unit=f"{per}s/CPU s")
    for side, cpu in (("broker", broker_cpu), ("client", done.client_cpu)):
        results.add(workload, f"{side} CPU per {per}, {metric}", broker, cpu / done.records * 1e6, unit="us",
                    better="lower")
        results.add(workload, f"{side} cores busy, {metric}", broker, cpu / done.seconds, unit="cores",
                    better=None)
    if broker_kernel_cpu is not None:
        results.add(workload, f"broker kernel CPU per {per}, {metric}", broker,
                    broker_kernel_cpu / done.records * 1e6, unit="us", better="lower")


def cpu_since(broker: peers.Broker, before: tuple[float, float]) -> tuple[float, float]:
    """(CPU, of which in the kernel) the broker has used since `before` (its `cpu_times()` then)."""
    return tuple(now - then for now, then in zip(broker.cpu_times(), before))
