"""Produce and consume rates over TLS beside plaintext, on one broker in the same run.

The broker listens on PLAINTEXT and SSL (and SASL_SSL with SCRAM-SHA-512 unless --plaintext-only); for each listener
in turn, confluent-kafka produces --records records of --record-size bytes (acks=1, linger.ms=5) to its own topic and
then consumes them all from the start, each timed from the first call to the last record, --rounds times with the
listeners alternating. Plaintext fetches go out with sendfile; TLS ones are read into memory and encrypted, which is
the cost this measures. Beside the rates it reports the broker process's CPU time per MB, which a machine shared with
other work disturbs far less than it disturbs the rates. --plaintext-only runs with a tree that has no TLS (to
compare plaintext before and after a change). Run from the repository: `PYTHONPATH=$PWD python bench/tls_bench.py
[--records 200000] [--record-size 1024] [--rounds 2]`; the broker process runs the odradek that PYTHONPATH names.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import confluent_kafka
from confluent_kafka.admin import AdminClient, ScramCredentialInfo, ScramMechanism, UserScramCredentialUpsertion

from bench import client
from odradek.embedded import BrokerProcess, free_port

MB = 1024 * 1024


def cpu_seconds(pid: int) -> float:
    """The broker process's user + system CPU time so far (from /proc): steadier than rates on a busy machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def consume(bootstrap: str, client_config: dict, topic: str, records: int) -> float:
    consumer = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": topic,
                                         "enable.auto.commit": False, **client_config})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
    count, started = 0, time.perf_counter()
    while count < records:
        batch = consumer.consume(1000, 5)
        if not batch:
            raise RuntimeError(f"consumed {count} of {records} records")
        count += len(batch)
    elapsed = time.perf_counter() - started
    consumer.close()
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--record-size", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--plaintext-only", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="tls-bench-") as tmp:
        listeners = {"PLAINTEXT": {}}
        settings = {"log.segment.bytes": 1 << 30}
        if not args.plaintext_only:
            from tests.security.certificates import make_certificates

            certificates = make_certificates(Path(tmp))
            ports = {"SSL": free_port(), "SASL_SSL": free_port()}
            settings.update({
                "listeners": "PLAINTEXT://127.0.0.1:0," + ",".join(f"{n}://127.0.0.1:{p}" for n, p in ports.items()),
                "ssl.keystore.location": certificates.path("broker-keystore.pem"),
                "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
            tls = {"security.protocol": "SSL", "ssl.ca.location": certificates.path("ca.pem")}
            listeners["SSL"] = tls
            listeners["SASL_SSL"] = {**tls, "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
                                     "sasl.username": "bench", "sasl.password": "bench-secret"}
        with BrokerProcess(Path(tmp) / "data", settings=settings) as broker:
            addresses = {"PLAINTEXT": broker.bootstrap_servers}
            if not args.plaintext_only:
                addresses.update({name: f"127.0.0.1:{port}" for name, port in ports.items()})
                admin = AdminClient({"bootstrap.servers": broker.bootstrap_servers})
                admin.alter_user_scram_credentials(
                    [UserScramCredentialUpsertion("bench", ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096),
                                                  b"bench-secret")])["bench"].result(10)
            payload = b"x" * args.record_size
            rates = {name: {"produce": [], "consume": []} for name in listeners}
            cpu = {name: {"produce": [], "consume": []} for name in listeners}
            mb = args.records * args.record_size / MB
            pid = broker.process.pid
            for _ in range(args.rounds):
                for name, client_config in listeners.items():
                    topic = f"bench-{name.lower()}-{uuid.uuid4().hex[:6]}"
                    for phase, run in (("produce", lambda: client.produce_each(
                                           addresses[name], topic, args.records, payload,
                                           {"acks": "1", "queue.buffering.max.messages": 1_000_000,
                                            **client_config})),
                                       ("consume", lambda: consume(addresses[name], client_config, topic,
                                                                    args.records))):
                        cpu_before = cpu_seconds(pid)
                        rates[name][phase].append(mb / run())
                        cpu[name][phase].append((cpu_seconds(pid) - cpu_before) * 1000 / mb)
    print(f"{args.records} records of {args.record_size} B, {args.rounds} round(s); medians of MB/s and of the "
          "broker's CPU ms per MB:")
    for name in listeners:
        print(f"  {name:10} produce {statistics.median(rates[name]['produce']):7.1f} MB/s "
              f"{statistics.median(cpu[name]['produce']):6.2f} ms/MB   "
              f"consume {statistics.median(rates[name]['consume']):7.1f} MB/s "
              f"{statistics.median(cpu[name]['consume']):6.2f} ms/MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
