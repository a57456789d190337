"""Records per second through the REST proxy (odradek.restproxy) beside confluent-kafka's native producer, on one
broker in the same run.

One broker process and one `odradek rest-proxy` process in front of it; each way produces --records records of
--record-size bytes to its own topic (one partition per way), timed from the first request to the last answer:
- native: confluent-kafka's Producer (linger.ms=5, acks=all), flushed;
- v2 batches: POST /topics/{topic} with --batch records a request (binary format), --clients threads at once;
- v3 stream: one POST /v3/.../records per client thread, its body a stream of JSON records, answered line by line;
- v3 single: POST /v3/.../records with one record a request, --clients threads at once (--single-records of them).
Writes bench/results/<date>-rest-proxy.json (meta: date, host, CPUs, load before and after, sizes, versions, commit;
rows: one per way). Run from the repository: `PYTHONPATH=$PWD python bench/rest_proxy_bench.py [--records 100000]`.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import datetime
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import confluent_kafka
import httpx

from bench import client
from odradek.client import Admin
from odradek.embedded import BrokerProcess, free_port

RESULTS = Path(__file__).parent / "results"
BINARY = "application/vnd.kafka.binary.v2+json"


def spread(work, clients: int, total: int) -> float:
    """`work(count)` in `clients` threads at once, `total` records between them; the wall time of it all."""
    shares = [total // clients + (1 if index < total % clients else 0) for index in range(clients)]
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for done in [pool.submit(work, share) for share in shares]:
            done.result()
    return time.perf_counter() - started


def v2_batches(url: str, topic: str, payload: bytes, batch: int):
    body = json.dumps({"records": [{"value": base64.b64encode(payload).decode()}] * batch}).encode()

    def work(count: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            for start in range(0, count, batch):
                size = min(batch, count - start)
                content = body if size == batch else json.dumps(
                    {"records": [{"value": base64.b64encode(payload).decode()}] * size}).encode()
                answer = http.post(f"/topics/{topic}", content=content, headers={"Content-Type": BINARY})
                if answer.status_code != 200 or any(o["error_code"] for o in answer.json()["offsets"]):
                    raise RuntimeError(answer.text[:200])
    return work


def v3_stream(url: str, cluster: str, topic: str, payload: bytes):
    line = json.dumps({"value": {"type": "BINARY", "data": base64.b64encode(payload).decode()}}).encode()

    def work(count: int) -> None:
        def body():
            for _ in range(count // 100):
                yield line * 100
            yield line * (count % 100)
        with httpx.Client(base_url=url, timeout=300) as http:
            answer = http.post(f"{cluster}/topics/{topic}/records", content=body(),
                               headers={"Content-Type": "application/json"})
            results = answer.text.splitlines()
            if len(results) != count or any(json.loads(r)["error_code"] != 200 for r in results[-3:]):
                raise RuntimeError(f"{len(results)} results of {count}: {results[-1][:200] if results else ''}")
    return work


def v3_single(url: str, cluster: str, topic: str, payload: bytes):
    record = {"value": {"type": "BINARY", "data": base64.b64encode(payload).decode()}}

    def work(count: int) -> None:
        with httpx.Client(base_url=url, timeout=120) as http:
            for _ in range(count):
                answer = http.post(f"{cluster}/topics/{topic}/records", json=record)
                if answer.status_code != 200:
                    raise RuntimeError(answer.text[:200])
    return work


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--batch", type=int, default=500, help="records per v2 request")
    parser.add_argument("--clients", type=int, default=4, help="HTTP client threads")
    parser.add_argument("--single-records", type=int, default=5_000, help="records of the v3 single way")
    args = parser.parse_args()
    payload = os.urandom(args.record_size)
    load_before = " ".join(f"{value:.2f}" for value in os.getloadavg())
    with tempfile.TemporaryDirectory() as directory:
        broker = BrokerProcess(Path(directory) / "data").start()
        proxy_port = free_port()
        proxy = subprocess.Popen([sys.executable, "-m", "odradek", "rest-proxy", "--port", str(proxy_port),
                                  "--bootstrap-server", broker.bootstrap_servers], stdout=subprocess.PIPE, text=True)
        try:
            proxy.stdout.readline()
            url = f"http://127.0.0.1:{proxy_port}"
            admin = Admin(broker.bootstrap_servers)
            cluster = httpx.get(f"{url}/v3/clusters").json()["data"][0]["metadata"]["self"]
            ways = {
                "native (confluent-kafka)": lambda topic: client.produce_each(
                    broker.bootstrap_servers, topic, args.records, payload, {"acks": "all"}),
                f"v2 binary, {args.batch} records a request": lambda topic: spread(
                    v2_batches(url, topic, payload, args.batch), args.clients, args.records),
                "v3 streamed records": lambda topic: spread(v3_stream(url, cluster, topic, payload), args.clients,
                                                            args.records),
                "v3 one record a request": lambda topic: spread(v3_single(url, cluster, topic, payload),
                                                                args.clients, args.single_records),
            }
            rows = []
            for index, (name, run) in enumerate(ways.items()):
                topic = f"bench-{index}"
                admin.create_topic(topic, 1)
                count = args.single_records if "one record" in name else args.records
                seconds = run(topic)
                rows.append({"way": name, "records": count, "seconds": round(seconds, 3),
                             "records_per_s": round(count / seconds), "MB_per_s": round(
                                 count * args.record_size / seconds / 1e6, 2)})
                print(f"{name:40} {rows[-1]['records_per_s']:>9,} records/s", flush=True)
        finally:
            proxy.terminate()
            proxy.wait(30)
            broker.stop()
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    now = datetime.datetime.now(datetime.timezone.utc)
    meta = {"date": now.strftime("%Y-%m-%d %H:%M"), "host": platform.node(), "cpus": os.cpu_count(),
            "load_before": load_before, "load_after": " ".join(f"{value:.2f}" for value in os.getloadavg()),
            "sizes": {"records": args.records, "record_size": args.record_size, "batch": args.batch,
                      "clients": args.clients, "single_records": args.single_records},
            "versions": {"python": platform.python_version(), "librdkafka": confluent_kafka.libversion()[0],
                         "confluent-kafka": confluent_kafka.version(), "odradek commit": commit}}
    RESULTS.mkdir(exist_ok=True)
    path = RESULTS / f"{now:%Y-%m-%d}-rest-proxy.json"
    path.write_text(json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
