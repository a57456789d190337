"""What TLS costs Odradek: the C load generator producing and consuming 1 KiB records over its PLAINTEXT and its SSL
listener, one broker listening on both, in alternation.

Plaintext fetches go out with sendfile; TLS ones are read into memory and encrypted, and every produced byte is
decrypted, which is the cost this measures (as bench/tls_bench.py does with the Python client, and SASL_SSL too).
Odradek only: the peers are not set up with certificates here. Certificates come from tests/security/certificates.py
(openssl); the clients trust its CA. Rows give records/s and, for broker and client, CPU per record and cores busy.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from bench import client, loadgen, peers
from bench.measure import Results
from bench.workloads.loadgen import CONSUMERS, PARTITIONS, PRODUCER, PRODUCERS, add_run, built
from odradek.embedded import BrokerProcess

WORKLOAD = "tls"
RECORD_SIZE = 1024


def run(results: Results, brokers: list[str], sizes) -> None:
    if "odradek" not in brokers or not built(results, WORKLOAD):
        return
    from tests.security.certificates import make_certificates

    with tempfile.TemporaryDirectory(prefix="bench-tls-") as tmp:
        certificates = make_certificates(Path(tmp))
        ssl_port = peers.free_port()
        settings = {"listeners": f"PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:{ssl_port}",
                    "ssl.keystore.location": certificates.path("broker-keystore.pem")}
        with BrokerProcess(Path(tmp) / "data", settings=settings) as broker:
            listeners = {"PLAINTEXT": (broker.bootstrap_servers, {}),
                         "SSL": (f"127.0.0.1:{ssl_port}",
                                 {"security.protocol": "SSL", "ssl.ca.location": certificates.path("ca.pem")})}
            for round_number in range(sizes.repeat):
                for name, (bootstrap, security) in listeners.items():
                    one_round(results, broker, f"tls{round_number}-{name}", name, bootstrap, security,
                              sizes.tls_records)


def one_round(results: Results, broker: BrokerProcess, topic: str, listener: str, bootstrap: str, security: dict,
              records: int) -> None:
    produce_metric = f"produce, {listener}, 1 KiB records, {PRODUCERS} C producers"
    consume_metric = f"consume, {listener}, 1 KiB records, {CONSUMERS} C consumers"
    try:
        client.create_topic(broker.bootstrap_servers, topic, PARTITIONS)
        before = peers.cpu_seconds(broker.process.pid)
        produced = loadgen.produce(bootstrap, topic, records, processes=PRODUCERS, size=RECORD_SIZE,
                                   config={**PRODUCER, **security})
        add_run(results, WORKLOAD, produce_metric, "odradek", produced,
                peers.cpu_seconds(broker.process.pid) - before)
        before = peers.cpu_seconds(broker.process.pid)
        consumed = loadgen.consume(bootstrap, topic, produced.partition_records, processes=CONSUMERS,
                                   config={**client.CONSUMER, **security})
        add_run(results, WORKLOAD, consume_metric, "odradek", consumed,
                peers.cpu_seconds(broker.process.pid) - before)
    except Exception as exc:  # one failed round is a recorded error, not the end of the suite
        results.error(WORKLOAD, produce_metric, "odradek", repr(exc), unit="records/s")
