"""Kafka 4.3.1's command-line tools against three `odradek serve` brokers on ZooKeeper (cluster3: replication factor
3, min.insync.replicas 2): kafka-topics' view of replicas and ISRs, also while a broker is down
(--under-replicated-partitions, --unavailable-partitions), kafka-reassign-partitions moving replicas with the data
kept, and kafka-leader-election's preferred and unclean elections. What the tools print must agree with
`odradek topics describe` on leaders, replicas and ISRs."""

from __future__ import annotations

import json
import uuid

import pytest
from confluent_kafka import Producer

from odradek.embedded import wait_until
from tests.interop.kafka_tools import ToolShell, described_partitions, odradek, odradek_offsets


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    tools = ToolShell(tmp_path_factory.mktemp("kafka-tools-cluster") / "tools.log")
    yield tools
    tools.close()


def describe(shell: ToolShell, bootstrap: str, *args: object) -> dict[tuple[str, int], dict[str, str]]:
    return described_partitions(shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--describe",
                                          *args).stdout)


def facts(partitions: dict) -> dict[tuple[str, int], tuple[str, str, list[str]]]:
    """Leader, replicas and ISR (sorted: the tools may order an ISR differently) of described partitions."""
    return {key: (fields["Leader"], fields["Replicas"], sorted(fields["Isr"].split(",")) if fields["Isr"] else [])
            for key, fields in partitions.items()}


def ours(bootstrap: str, topic: str) -> dict:
    return facts(described_partitions(odradek("topics", "describe", topic, "-b", bootstrap)))


def produce(bootstrap: str, topic: str, count: int, acks: str = "all") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 5})
    failures = []
    for i in range(count):
        producer.produce(topic, b"value %d" % i, key=b"key %d" % i,
                         on_delivery=lambda err, msg: err and failures.append(err))
    assert producer.flush(60) == 0 and not failures, failures


def in_sync(shell: ToolShell, bootstrap: str, topic: str) -> bool:
    return all(len(fields["Isr"].split(",")) == len(fields["Replicas"].split(","))
               for fields in describe(shell, bootstrap, "--topic", topic).values())


def test_describe_agrees_and_shows_what_a_stopped_broker_leaves(cluster3, shell):
    bootstrap, name = cluster3.bootstrap_servers, f"tools-rf3-{uuid.uuid4().hex[:6]}"
    alone = f"tools-on-3-{uuid.uuid4().hex[:6]}"
    shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", name, "--partitions", 3,
              "--replication-factor", 3)
    shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", alone,
              "--replica-assignment", "3")
    produce(bootstrap, name, 30)
    assert wait_until(lambda: in_sync(shell, bootstrap, name), 60, 0.5)
    theirs = facts(describe(shell, bootstrap, "--topic", name))
    assert theirs == ours(bootstrap, name)
    assert all(sorted(replicas.split(",")) == ["1", "2", "3"] and leader in replicas.split(",")
               for leader, replicas, _ in theirs.values())
    assert facts(describe(shell, bootstrap, "--topic", alone)) == ours(bootstrap, alone) == {
        (alone, 0): ("3", "3", ["3"])}

    cluster3.broker(3).stop()
    try:
        def degraded():
            under = describe(shell, bootstrap, "--under-replicated-partitions")
            return under if {key for key in under if key[0] == name} == {(name, p) for p in range(3)} else None
        under = wait_until(degraded, 60, 0.5)
        assert under, "the topic's partitions never showed as under-replicated"
        for key in [(name, p) for p in range(3)]:
            leader, replicas, isr = facts(under)[key]
            assert isr == ["1", "2"] and leader in ("1", "2") and sorted(replicas.split(",")) == ["1", "2", "3"]
        at_min_isr = describe(shell, bootstrap, "--at-min-isr-partitions")  # ISR 2 of 3, min.insync.replicas 2
        assert {key for key in at_min_isr if key[0] == name} == {(name, p) for p in range(3)}
        unavailable = describe(shell, bootstrap, "--unavailable-partitions")
        assert [key for key in unavailable if key[0] in (name, alone)] == [(alone, 0)]
        assert unavailable[alone, 0]["Leader"] == "none"
        ours_now = {**ours(bootstrap, name), **ours(bootstrap, alone)}  # odradek shows the same leaders and ISRs
        assert {key: facts(under)[key] for key in ours_now if key[0] == name} == {
            key: value for key, value in ours_now.items() if key[0] == name}
        assert facts(unavailable)[alone, 0] == ours_now[alone, 0] == ("none", "3", ["3"])
    finally:
        cluster3.broker(3).start()
    assert wait_until(lambda: not [key for key in describe(shell, bootstrap, "--under-replicated-partitions")
                                   if key[0] == name], 90, 1)
    assert not [key for key in describe(shell, bootstrap, "--unavailable-partitions") if key[0] == alone]
    assert sum(end for _, end in odradek_offsets(bootstrap, name).values()) == 30


def test_reassign_generate_execute_verify_and_the_data_stays(cluster3, shell, tmp_path):
    bootstrap, name = cluster3.bootstrap_servers, f"tools-move-{uuid.uuid4().hex[:6]}"
    shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", name,
              "--replica-assignment", "1:2,2:1")
    produce(bootstrap, name, 100)
    before = odradek_offsets(bootstrap, name)
    assert sum(end for _, end in before.values()) == 100

    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": name}]}))
    generated = shell.run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--generate",
                          "--topics-to-move-json-file", topics, "--broker-list", "2,3").stdout
    current_json, proposed_json = [line for line in generated.splitlines() if line.startswith("{")]
    current = {(p["topic"], p["partition"]): p["replicas"] for p in json.loads(current_json)["partitions"]}
    proposed = {(p["topic"], p["partition"]): p["replicas"] for p in json.loads(proposed_json)["partitions"]}
    assert current == {(name, 0): [1, 2], (name, 1): [2, 1]}
    assert set(proposed) == set(current) and all(sorted(replicas) == [2, 3] for replicas in proposed.values())

    plan = tmp_path / "plan.json"
    plan.write_text(proposed_json)
    executed = shell.run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--execute",
                         "--reassignment-json-file", plan, "--throttle", 50_000_000).stdout
    assert "Successfully started partition reassignments" in executed and "The inter-broker throttle limit was set" \
        in executed

    def verified():
        out = shell.run("kafka-reassign-partitions", "--bootstrap-server", bootstrap, "--verify",
                        "--reassignment-json-file", plan).stdout
        return out if all(f"Reassignment of partition {name}-{p} is completed." in out for p in (0, 1)) else None
    done = wait_until(verified, 90, 1)
    assert done and "Clearing broker-level throttles on brokers 1,2,3" in done and \
        f"Clearing topic-level throttles on topic {name}" in done
    for node in (1, 2, 3):  # --verify took the throttle the execution set off every broker again
        throttles = shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type",
                              "brokers", "--entity-name", node).stdout
        assert "replication.throttled.rate" not in throttles
    moved = ours(bootstrap, name)
    assert facts(describe(shell, bootstrap, "--topic", name)) == moved
    for key, replicas in proposed.items():
        leader, shown, isr = moved[key]
        assert shown == ",".join(map(str, replicas)) and sorted(isr) == ["2", "3"] and leader in ("2", "3")

    assert odradek_offsets(bootstrap, name) == before  # and every record is still there to read
    printed = shell.run("kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", name,
                        "--from-beginning", "--max-messages", 100, "--timeout-ms", 30000).stdout
    assert sorted(printed.split("\n")[:100]) == sorted(f"value {i}" for i in range(100))


def test_leader_election_preferred_and_unclean(cluster3, shell):
    bootstrap = cluster3.bootstrap_servers
    preferred, unclean = f"tools-pref-{uuid.uuid4().hex[:6]}", f"tools-unclean-{uuid.uuid4().hex[:6]}"
    shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", preferred,
              "--replica-assignment", "1:2:3")
    shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--create", "--topic", unclean,
              "--replica-assignment", "2:3", "--config", "min.insync.replicas=1")
    produce(bootstrap, preferred, 10)
    produce(bootstrap, unclean, 10)
    assert wait_until(lambda: in_sync(shell, bootstrap, preferred) and in_sync(shell, bootstrap, unclean), 60, 0.5)

    cluster3.broker(1).stop()  # its leadership moves to another replica, and stays there once it is back
    cluster3.broker(1).start()
    assert wait_until(lambda: in_sync(shell, bootstrap, preferred), 90, 0.5)
    assert describe(shell, bootstrap, "--topic", preferred)[preferred, 0]["Leader"] != "1"
    elected = shell.run("kafka-leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred",
                        "--topic", preferred, "--partition", 0).stdout
    assert f"Successfully completed leader election (PREFERRED) for partitions {preferred}-0" in elected
    assert ours(bootstrap, preferred)[preferred, 0][0] == "1"
    again = shell.run("kafka-leader-election", "--bootstrap-server", bootstrap, "--election-type", "preferred",
                      "--topic", preferred, "--partition", 0).stdout
    assert f"Valid replica already elected for partitions {preferred}-0" in again

    # broker 3 falls out of the ISR, broker 2 takes more records alone and stops: only 3, which lacks them, is left
    cluster3.broker(3).stop()
    try:
        assert wait_until(lambda: ours(bootstrap, unclean)[unclean, 0][2] == ["2"], 60, 0.5)
        produce(bootstrap, unclean, 5)
        cluster3.broker(2).stop()
        cluster3.broker(3).start()
        assert wait_until(lambda: ours(bootstrap, unclean)[unclean, 0][0] == "none", 60, 0.5)
        refused = shell.run("kafka-leader-election", "--bootstrap-server", bootstrap, "--election-type",
                            "preferred", "--topic", unclean, "--partition", 0, expect_failure=True)
        assert "PreferredLeaderNotAvailableException" in refused.stdout + refused.stderr
        elected = shell.run("kafka-leader-election", "--bootstrap-server", bootstrap, "--election-type", "unclean",
                            "--topic", unclean, "--partition", 0).stdout
        assert f"Successfully completed leader election (UNCLEAN) for partitions {unclean}-0" in elected
        assert wait_until(lambda: ours(bootstrap, unclean)[unclean, 0][:1] == ("3",), 30, 0.5)
        assert facts(describe(shell, bootstrap, "--topic", unclean)) == ours(bootstrap, unclean)
        assert odradek_offsets(bootstrap, unclean)[0][1] == 10  # the five only broker 2 had are lost, as Kafka loses
    finally:
        for node in (2, 3):
            if cluster3.broker(node).process is None:
                cluster3.broker(node).start()
    assert wait_until(lambda: in_sync(shell, bootstrap, unclean), 90, 0.5)
    assert odradek_offsets(bootstrap, unclean)[0][1] == 10
