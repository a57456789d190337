"""What broker-side schema validation (`confluent.value.schema.validation`, odradek/broker/schema_validation.py)
costs per record: records/s and the broker's CPU per record producing the same Avro records to a topic with it off
and to one with it on, on one broker with the schema registry beside it (`schema.registry.port`), in the same run.

The records are confluent-kafka AvroSerializer's (a record of a long and a 60-character string, ~70 bytes framed),
--distinct of them serialized once and sent in turn, --records in all per topic, through bench.client's throughput
producer (acks=1, linger 5 ms, 1 MB batches), uncompressed; off and on alternate for --rounds rounds, medians.
The broker's CPU is bench.peers' accounting (its threads, the registry's among them, and its worker processes).
Writes bench/results/<date>-schema-validation.json (meta: date, host, CPUs, load before and after, sizes,
versions, commit; rows: one per setting). Run from the repository:
`PYTHONPATH=$PWD python bench/schema_validation_bench.py [--records 200000]`.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import tempfile
from pathlib import Path

import confluent_kafka
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext

from bench import client
from bench.peers import cpu_seconds
from odradek.embedded import BrokerProcess, free_port

RESULTS = Path(__file__).parent / "results"
ORDER = json.dumps({"type": "record", "name": "Order", "namespace": "com.acme", "fields": [
    {"name": "id", "type": "long"}, {"name": "item", "type": "string"}]})
SETTINGS = {"off": {}, "on": {"confluent.value.schema.validation": "true"}}


def one_run(broker: BrokerProcess, registry: SchemaRegistryClient, topic: str, configs: dict, records: int,
            distinct: int) -> tuple[float, float]:
    """(records/s, broker CPU us per record) producing `records` Avro records to a new topic with `configs`."""
    client.create_topic(broker.bootstrap_servers, topic, 1, configs=configs)
    serializer = AvroSerializer(registry, ORDER)
    context = SerializationContext(topic, MessageField.VALUE)
    messages = [{"value": serializer({"id": index, "item": f"{index:060d}"}, context)} for index in range(distinct)]
    producer = client.producer(broker.bootstrap_servers, acks="1", **client.THROUGHPUT_PRODUCER)
    before = cpu_seconds(broker.process.pid)
    rate = client.produce(producer, topic, records, 1, messages=messages)
    return rate, (cpu_seconds(broker.process.pid) - before) / records * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--distinct", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    load_before = " ".join(f"{value:.2f}" for value in os.getloadavg())
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in SETTINGS}
    with tempfile.TemporaryDirectory(prefix="bench-schema-validation-") as data_dir:
        port = free_port()
        broker = BrokerProcess(Path(data_dir) / "data", settings={"schema.registry.port": port}).start()
        try:
            registry = SchemaRegistryClient({"url": f"http://127.0.0.1:{port}"})
            one_run(broker, registry, "warm-up", SETTINGS["on"], args.distinct, args.distinct)
            value_bytes = len(AvroSerializer(registry, ORDER)({"id": 1, "item": f"{1:060d}"},
                                                              SerializationContext("warm-up", MessageField.VALUE)))
            for round_number in range(args.rounds):
                for name, configs in SETTINGS.items():
                    figures[name].append(one_run(broker, registry, f"r{round_number}-{name}", configs,
                                                 args.records, args.distinct))
        finally:
            broker.stop()
    rows = []
    for name in SETTINGS:
        rates, cpus = zip(*figures[name])
        rows.append({"validation": name, "records": args.records, "records_per_s": round(statistics.median(rates)),
                     "broker_cpu_us_per_record": round(statistics.median(cpus), 2),
                     "rounds": [{"records_per_s": round(rate), "broker_cpu_us_per_record": round(cpu, 2)}
                                for rate, cpu in figures[name]]})
        print(f"validation {name:3}: {rows[-1]['records_per_s']:>10,} records/s, "
              f"{rows[-1]['broker_cpu_us_per_record']:6.2f} us broker CPU per record")
    now = datetime.datetime.now(datetime.timezone.utc)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    meta = {"date": now.strftime("%Y-%m-%d %H:%M"), "host": platform.node(), "cpus": os.cpu_count(),
            "load_before": load_before, "load_after": " ".join(f"{value:.2f}" for value in os.getloadavg()),
            "sizes": {"records": args.records, "distinct": args.distinct, "rounds": args.rounds,
                      "value_bytes": value_bytes},
            "versions": {"python": platform.python_version(), "librdkafka": confluent_kafka.libversion()[0],
                         "confluent-kafka": confluent_kafka.version(), "odradek commit": commit}}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{now:%Y-%m-%d}-schema-validation.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
