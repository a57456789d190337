"""One Apache Kafka 4.3.1 (KRaft, one node) and one `odradek serve` with the same settings, for every differential
test in this package: the JVM takes tens of seconds to start on a loaded machine, so it starts once.

Both run an authorizer (Kafka's StandardAuthorizer; Odradek takes the same class name) with
allow.everyone.if.no.acl.found=true, so that the ANONYMOUS principal of a plaintext connection may do anything on a
resource without ACLs and the authorization cases deny it by ACLs of their own, the same on both. The internal
topics have one partition each, and a new group's first rebalance does not wait.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from pathlib import Path

import pytest

from odradek.embedded import BrokerProcess
from tests.jvm import KafkaServer

from .harness import Case, Outcome, Pair, Step

ROOT = Path(__file__).resolve().parent.parent.parent

SETTINGS = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true", "super.users": "User:admin",
    "auto.create.topics.enable": "true", "num.partitions": 1, "default.replication.factor": 1,
    "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1, "offsets.topic.replication.factor": 1,
    "transaction.state.log.num.partitions": 1, "transaction.state.log.replication.factor": 1,
    "transaction.state.log.min.isr": 1,
}

# What both must have before the cases run: the coordinators' topics (Kafka creates them at the first FindCoordinator)
# and the cluster-wide dynamic default that kafka-storage format writes in Kafka 4 (KIP-966), given to Odradek too
WARM_UP = Case("warm-up", [
    Step("IncrementalAlterConfigs", 1, {"validate_only": False, "resources": [
        {"resource_type": 4, "resource_name": "", "configs": [
            {"name": "min.insync.replicas", "config_operation": 0, "value": "1"}]}]}),
    Step("FindCoordinator", 4, {"key_type": 0, "coordinator_keys": ["warm-up"]}, retry=frozenset({15, 14}),
         settle=90),
    Step("FindCoordinator", 4, {"key_type": 1, "coordinator_keys": ["warm-up"]}, retry=frozenset({15, 14}),
         settle=90),
])


@pytest.fixture(scope="package")
def pair(tmp_path_factory) -> Pair:
    kafka = KafkaServer(settings=SETTINGS, heap="384m")
    failure: list[BaseException] = []

    def start_kafka() -> None:
        try:
            kafka.start(timeout=180)
        except BaseException as exc:  # noqa: BLE001 - raised below, in the fixture
            failure.append(exc)

    starter = threading.Thread(target=start_kafka)
    starter.start()
    odradek = BrokerProcess(tmp_path_factory.mktemp("differential") / "data", settings=SETTINGS)
    try:
        odradek.start()
        starter.join()
        if failure:
            raise failure[0]
        pair = Pair(kafka.ports[1], odradek.port)
        for outcome in pair.run(WARM_UP):
            assert "error_code': 0" in repr(outcome.kafka) and "error_code': 0" in repr(outcome.odradek), outcome
        yield pair
    finally:
        starter.join()
        odradek.stop()
        kafka.close()


@pytest.fixture(scope="package")
def seeded(pair):
    """The shared topic, filled the same on both."""
    from .cases import SEED

    for outcome in pair.run(SEED):
        assert not outcome.differences, outcome
    return SEED


class Summary:
    """Per (api, version, case) triple: whether every answer agreed, or differed only where the allowlist says."""

    def __init__(self):
        self.triples: dict[tuple, str] = {}
        self.used: set = set()  # the allowlist entries that allowed a difference

    def record(self, outcome: Outcome, all_allowed: bool) -> None:
        verdict = "agree" if not outcome.differences else "allowed" if all_allowed else "differ"
        rank = {"agree": 0, "allowed": 1, "differ": 2}
        previous = self.triples.get(outcome.triple, "agree")
        self.triples[outcome.triple] = max(previous, verdict, key=rank.get)

    def lines(self) -> list[str]:
        counts = defaultdict(int)
        by_api = defaultdict(lambda: defaultdict(int))
        for (api_name, _, _), verdict in self.triples.items():
            counts[verdict] += 1
            by_api[api_name][verdict] += 1
        lines = [f"differential: {len(self.triples)} (api, version, case) triples: {counts['agree']} agree, "
                 f"{counts['allowed']} differ only where allowlisted, {counts['differ']} differ"]
        lines += [f"  {name}: {d['agree']} agree, {d['allowed']} allowlisted, {d['differ']} differ"
                  for name, d in sorted(by_api.items())]
        return lines


_SUMMARY = Summary()


@pytest.fixture(scope="package")
def summary() -> Summary:
    return _SUMMARY


def pytest_terminal_summary(terminalreporter):
    if _SUMMARY.triples:
        lines = _SUMMARY.lines()
        for line in lines:
            terminalreporter.write_line(line)
        (ROOT / "build").mkdir(exist_ok=True)
        (ROOT / "build" / "differential-summary.txt").write_text("\n".join(lines) + "\n")
