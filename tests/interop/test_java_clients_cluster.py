"""Kafka 4.3.1's Java clients against three `odradek serve` brokers with replication factor 3 and
min.insync.replicas 2 (`cluster3`): transactions, exactly-once and a cooperative group across brokers
(ClientScenarios in one JVM); the AdminClient's reassignment and preferred election, which move a leader here;
and an idempotent acks=all producer that keeps sending while one broker is stopped and restarted, every
acknowledged record then read back once. test_long_acks_all_through_kills (INTEROP_SECONDS) repeats the
kill -9 and restart of a broker, one after the other, for that long."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
import uuid

import pytest

from tests.interop.java_scenarios import passed, run_scenarios, run_together
from tests.jvm import TOOL_JVM_OPTIONS, compiled_classes, java_command

ERRORS = "org.apache.kafka.common.errors."


@pytest.fixture(scope="module")
def both(cluster3):
    """ClientScenarios and AdminScenarios' reassignment side by side (before any broker is restarted)."""
    return run_together(
        lambda: run_scenarios("ClientScenarios", cluster3.bootstrap_servers, "-", f"jcc-{uuid.uuid4().hex[:6]}",
                              scenarios=["transactions", "exactly_once", "classic_cooperative_sticky"]),
        lambda: run_scenarios("AdminScenarios", cluster3.bootstrap_servers, "-", f"jac-{uuid.uuid4().hex[:6]}",
                              scenarios=["reassignments", "cluster"]))


@pytest.fixture(scope="module")
def lines(both):
    return both[0]


def test_transactions_across_brokers(lines):
    details = passed(lines, "transactions")
    assert details["read_committed_count"] == 20 and details["read_uncommitted_count"] == 30
    assert details["read_committed"] == [f"{stem}{i}" for stem in "ac" for i in range(10)]


def test_exactly_once_across_brokers(lines):
    details = passed(lines, "exactly_once")
    assert (details["processed"], details["output_count"], details["committed_offset"]) == (50, 50, 50)
    assert details["output_equals_input"]


def test_cooperative_group_across_brokers(lines):
    details = passed(lines, "classic_cooperative_sticky")
    assert details["split"] and details["union_size"] == 4
    assert details["first_revoked"][0] == details["second"]


def test_reassignment_and_preferred_election_move_the_leader(both):
    admin = both[1]
    details = passed(admin, "reassignments")
    assert len(details["target"]) == 3 and details["replicas_after"] == details["target"]
    # the reversed replica list makes the last replica preferred: the election moves leadership to it
    assert details["elect_preferred_after"] in ("none", ERRORS + "ElectionNotNeededException")
    assert details["leader_after"] == details["target"][0]
    assert refused_class(details["unknown_broker"]) == "InvalidReplicaAssignmentException"
    assert passed(admin, "cluster")["nodes"] == [1, 2, 3]


def refused_class(thrown: str) -> str:
    return thrown.removeprefix(ERRORS)


class ThroughRestart:
    """ClientScenarios' acks_all_through_restart as a process: started, told to stop on stdin, its line read."""

    def __init__(self, bootstrap_servers: str):
        self.process = subprocess.Popen(
            java_command("odradek.interop.clients.ClientScenarios",
                         [bootstrap_servers, "-", f"jcr-{uuid.uuid4().hex[:6]}", "acks_all_through_restart"],
                         jvm_options=TOOL_JVM_OPTIONS, extra_classpath=[compiled_classes()]),
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.lines: list[dict] = []
        self.producing = threading.Event()
        self.stderr: list[str] = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.process.stderr), daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith("{"):
                parsed = json.loads(line)
                self.lines.append(parsed)
                if parsed.get("producing"):
                    self.producing.set()

    def wait_producing(self, timeout: float = 120) -> None:
        assert self.producing.wait(timeout), "no acknowledged record:\n" + "".join(self.stderr[-40:])

    def finish(self, timeout: float = 300) -> dict:
        self.process.stdin.write("stop\n")
        self.process.stdin.flush()
        self.process.wait(timeout)
        results = [line for line in self.lines if line.get("name") == "acks_all_through_restart"]
        assert results, "no result line:\n" + "".join(self.stderr[-40:])
        return passed({"acks_all_through_restart": results[0]}, "acks_all_through_restart")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def assert_nothing_acknowledged_lost(details: dict) -> None:
    assert details["acknowledged"] > 0
    assert details["lost"] == [], details
    assert details["duplicates"] == 0, details  # idempotence: retries through the restart wrote nothing twice
    assert details["read"] == details["acknowledged"]


def bounce(cluster, node_id: int, *, kill: bool, down_seconds: float) -> None:
    broker = cluster.broker(node_id)
    broker.kill() if kill else broker.stop()
    time.sleep(down_seconds)
    broker.start(timeout=60)


def test_acks_all_through_a_broker_restart(cluster3):
    producer = ThroughRestart(cluster3.bootstrap_servers)
    try:
        producer.wait_producing()
        bounce(cluster3, 2, kill=False, down_seconds=3)
        time.sleep(3)  # producing on, the restarted broker fetching its way back
        details = producer.finish()
    finally:
        producer.close()
    assert_nothing_acknowledged_lost(details)
    assert details["failures"] == []


@pytest.mark.skipif(not os.environ.get("INTEROP_SECONDS"), reason="a long run: set INTEROP_SECONDS")
def test_long_acks_all_through_kills(cluster3):
    producer = ThroughRestart(cluster3.bootstrap_servers)
    deadline = time.monotonic() + float(os.environ["INTEROP_SECONDS"])
    try:
        producer.wait_producing()
        node = 1
        while time.monotonic() < deadline:
            bounce(cluster3, node, kill=True, down_seconds=8)  # past zookeeper.session.timeout.ms: leaders move
            time.sleep(10)
            node = node % 3 + 1
        details = producer.finish()
    finally:
        producer.close()
    assert_nothing_acknowledged_lost(details)
