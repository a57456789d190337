"""Kafka 4.3.1's own command-line tools against one `odradek serve`, run as bin/kafka-*.sh runs them: what each
prints must be true of the broker, and agree with `odradek`'s own commands where both show the same fact
(partitions, leaders, replicas, offsets, lag). The cluster's tools (reassignment, elections, under-replicated
partitions) are in test_kafka_tools_cluster.py, the secured listener's in test_kafka_tools_secured.py."""

from __future__ import annotations

import json
import os
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.embedded import wait_until
from tests.interop.kafka_tools import ToolShell, described_partitions, odradek, odradek_offsets, tab_table, table
from tests.jvm import start_tool

DAY_MS = 86_400_000


@pytest.fixture(scope="module")
def shell(tmp_path_factory):
    tools = ToolShell(tmp_path_factory.mktemp("kafka-tools") / "tools.log")
    yield tools
    tools.close()


def create_topic(bootstrap: str, name: str, partitions: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result(30)


def produce(bootstrap: str, topic: str, records: list[tuple[int, bytes, int]]) -> list[tuple[int, int, int]]:
    """(partition, value, timestamp) records written in order; (partition, offset, timestamp) of each."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    written = []
    for partition, value, timestamp in records:
        producer.produce(topic, value, partition=partition, timestamp=timestamp,
                         on_delivery=lambda err, msg, ts=timestamp: written.append(
                             err or (msg.partition(), msg.offset(), ts)))
        producer.flush(30)  # one batch per record: each its own timestamp, offsets in the order given
    assert all(isinstance(each, tuple) for each in written) and len(written) == len(records), written
    return written


@pytest.fixture(scope="module")
def timed_topic(broker, shell):
    """Two partitions of 20 records each, record i of a partition stamped a day ago plus i seconds, except offset 7
    of partition 1, stamped 100 s after that day-old base (so its max timestamp is not its last record):
    (topic, {(partition, offset): timestamp})."""
    name = f"timed-{uuid.uuid4().hex[:8]}"
    create_topic(broker.bootstrap_servers, name, 2)
    base = int(time.time() * 1000) - DAY_MS
    records = [(partition, b"v%d" % i, (base + 100_000 if (partition, i) == (1, 7) else base + i * 1000))
               for partition in (0, 1) for i in range(20)]
    written = produce(broker.bootstrap_servers, name, records)
    return name, base, {(partition, offset): ts for partition, offset, ts in written}


def test_topics_create_describe_alter_delete_agree_with_odradek(broker, shell):
    bootstrap, name = broker.bootstrap_servers, f"tools-topic-{uuid.uuid4().hex[:8]}"
    topics = ("kafka-topics", "--bootstrap-server", bootstrap)
    created = shell.run(*topics, "--create", "--topic", name, "--partitions", 2, "--replication-factor", 1,
                        "--config", "retention.ms=3600000")
    assert f"Created topic {name}." in created.stdout
    assert name in shell.run(*topics, "--list").stdout.split()
    described = shell.run(*topics, "--describe", "--topic", name)
    header = described.stdout.splitlines()[0]
    assert "PartitionCount: 2" in header and "ReplicationFactor: 1" in header and "retention.ms=3600000" in header
    topic_id = header.split("TopicId: ")[1].split()[0]
    theirs = described_partitions(described.stdout)
    ours = described_partitions(odradek("topics", "describe", name, "-b", bootstrap))
    assert sorted(theirs) == sorted(ours) == [(name, 0), (name, 1)]
    for key in theirs:
        assert [theirs[key][field] for field in ("Leader", "Replicas", "Isr")] == \
               [ours[key][field] for field in ("Leader", "Replicas", "Isr")] == ["1", "1", "1"]

    shell.run(*topics, "--alter", "--topic", name, "--partitions", 4)
    by_id = shell.run(*topics, "--describe", "--topic-id", topic_id)
    assert f"Topic: {name}\tTopicId: {topic_id}\tPartitionCount: 4" in by_id.stdout
    assert sorted(described_partitions(by_id.stdout)) == sorted(
        described_partitions(odradek("topics", "describe", name, "-b", bootstrap))) == [(name, p) for p in range(4)]

    shell.run(*topics, "--delete", "--topic", name)
    assert wait_until(lambda: name not in odradek("topics", "list", "-b", bootstrap).split(), 30, 0.5)
    gone = shell.run(*topics, "--describe", "--topic", name, expect_failure=True)
    assert f"Topic '{name}' does not exist" in gone.stdout + gone.stderr


def test_configs_of_topics_and_brokers(broker, shell):
    bootstrap, name = broker.bootstrap_servers, f"tools-configs-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, 1)
    configs = ("kafka-configs", "--bootstrap-server", bootstrap)
    topic, one_broker = ("--entity-type", "topics", "--entity-name", name), ("--entity-type", "brokers",
                                                                             "--entity-name", 1)
    shell.run(*configs, "--alter", *topic, "--add-config", "retention.ms=120000,cleanup.policy=[compact,delete]")
    shell.run(*configs, "--alter", *topic, "--delete-config", "retention.ms")
    described = shell.run(*configs, "--describe", *topic).stdout
    assert "cleanup.policy=compact,delete" in described and "retention.ms" not in described
    everything = shell.run(*configs, "--describe", *topic, "--all").stdout
    assert "cleanup.policy=compact,delete sensitive=false synonyms={DYNAMIC_TOPIC_CONFIG:" in everything
    assert "segment.bytes=1073741824" in everything

    shell.run(*configs, "--alter", *one_broker, "--add-config", "log.cleaner.backoff.ms=20000")
    shell.run(*configs, "--alter", "--entity-type", "brokers", "--entity-default", "--add-config",
              "log.retention.ms=7200000")
    try:
        check_broker_configs(shell, configs, topic, one_broker)
    finally:  # the module's other topics keep the broker's defaults
        shell.run(*configs, "--alter", "--entity-type", "brokers", "--entity-default", "--delete-config",
                  "log.retention.ms")
        shell.run(*configs, "--alter", *one_broker, "--delete-config", "log.cleaner.backoff.ms")
    assert "retention.ms=604800000 " in shell.run(*configs, "--describe", *topic, "--all").stdout


def check_broker_configs(shell: ToolShell, configs: tuple, topic: tuple, one_broker: tuple) -> None:
    """What kafka-configs shows once broker 1 has log.cleaner.backoff.ms and the cluster default log.retention.ms."""
    own = shell.run(*configs, "--describe", *one_broker).stdout
    assert "log.cleaner.backoff.ms=20000 sensitive=false synonyms={DYNAMIC_BROKER_CONFIG:log.cleaner.backoff.ms=20000" \
           in own
    cluster_default = shell.run(*configs, "--describe", "--entity-type", "brokers", "--entity-default").stdout
    assert "log.retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:" \
           "log.retention.ms=7200000}" in cluster_default
    all_of_broker = shell.run(*configs, "--describe", *one_broker, "--all").stdout
    assert "num.partitions=1 " in all_of_broker and "log.retention.ms=7200000 " in all_of_broker
    retention = shell.run(*configs, "--describe", *topic, "--all").stdout  # now following the cluster default
    assert "retention.ms=7200000 sensitive=false synonyms={DYNAMIC_DEFAULT_BROKER_CONFIG:log.retention.ms=7200000" \
           in retention


def loggers(text: str) -> dict[str, str]:
    return dict(line.split()[0].split("=", 1) for line in text.splitlines() if "sensitive=" in line)


def test_broker_loggers_described_set_and_unset(broker, shell):
    """Kafka's broker-loggers entity is the broker's loggers (Python's, under log4j's level names); before the fix
    DescribeConfigs and IncrementalAlterConfigs refused resource type 8 and the tool died with a stack trace."""
    bootstrap = broker.bootstrap_servers
    args = ("--bootstrap-server", bootstrap, "--entity-type", "broker-loggers", "--entity-name", 1)
    before = loggers(shell.run("kafka-configs", *args, "--describe").stdout)
    assert before["root"] == "INFO" and before["odradek.coordinator"] == "INFO"
    set_levels = shell.run("kafka-configs", *args, "--alter", "--add-config",
                           "odradek.coordinator=TRACE,odradek.storage=WARN")
    unknown = shell.run("kafka-configs", *args, "--alter", "--add-config", "no.such.logger=DEBUG",
                        expect_failure=True)
    assert "Completed updating config for broker-logger 1." in set_levels.stdout
    assert "Invalid broker logger(s): no.such.logger" in unknown.stdout + unknown.stderr
    after = loggers(shell.run("kafka-configs", *args, "--describe").stdout)
    assert (after["odradek.coordinator"], after["odradek.storage"], after["root"]) == ("TRACE", "WARN", "INFO")
    shell.run("kafka-configs", *args, "--alter", "--delete-config", "odradek.coordinator,odradek.storage")
    unset = loggers(shell.run("kafka-configs", *args, "--describe").stdout)
    assert (unset["odradek.coordinator"], unset["odradek.storage"]) == ("INFO", "INFO")


def test_scram_users_and_client_quotas(broker, shell):
    bootstrap, user = broker.bootstrap_servers, f"tool-user-{uuid.uuid4().hex[:6]}"
    shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users", "--entity-name",
              user, "--add-config", "SCRAM-SHA-512=[iterations=8192,password=s3cret]")
    twice = shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users",
                      "--entity-name", user, "--add-config", "SCRAM-SHA-256=[password=pw],SCRAM-SHA-512=[password=x]",
                      expect_failure=True)  # one user's credentials once a request, as Kafka's controller says
    assert "DuplicateResourceException: A user credential cannot be altered twice in the same request" in twice.stderr
    shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users", "--entity-name",
              user, "--add-config", "SCRAM-SHA-256=[password=pw]")
    shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users", "--entity-name",
              user, "--entity-type", "clients", "--entity-name", "billing", "--add-config",
              "producer_byte_rate=1048576,consumer_byte_rate=2097152")
    shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "clients",
              "--entity-default", "--add-config", "request_percentage=50")
    described = shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "users",
                          "--entity-name", user).stdout
    assert "SCRAM-SHA-512=iterations=8192" in described and "SCRAM-SHA-256=iterations=4096" in described
    listed = table(odradek("users", "list", user, "-b", bootstrap), "USER")
    assert sorted((row["MECHANISM"], row["ITERATIONS"]) for row in listed) == [("SCRAM-SHA-256", "4096"),
                                                                              ("SCRAM-SHA-512", "8192")]
    quotas = shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "users",
                       "--entity-name", user, "--entity-type", "clients", "--entity-name", "billing").stdout
    assert f"Quota configs for user-principal '{user}', client-id 'billing' are " in quotas
    assert "producer_byte_rate=1048576.0" in quotas and "consumer_byte_rate=2097152.0" in quotas
    every = shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--describe", "--entity-type", "clients",
                      "--entity-default").stdout
    assert "Quota configs for the default client-id are request_percentage=50.0" in every
    shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--alter", "--entity-type", "users", "--entity-name",
              user, "--delete-config", "SCRAM-SHA-256")
    assert "SCRAM-SHA-256" not in shell.run("kafka-configs", "--bootstrap-server", bootstrap, "--describe",
                                            "--entity-type", "users", "--entity-name", user).stdout


def committed_lag(bootstrap: str, group: str) -> dict[tuple[str, int], dict[str, str]]:
    """`odradek groups describe`'s table, by (topic, partition)."""
    return {(row["TOPIC"], int(row["PARTITION"])): row
            for row in table(odradek("groups", "describe", group, "-b", bootstrap), "TOPIC")}


def caught_up(bootstrap: str, group: str, partitions: int) -> bool:
    """Whether the group exists and has committed the log end of every one of its topic's partitions."""
    try:
        lag = committed_lag(bootstrap, group)
    except AssertionError:  # not there yet
        return False
    return len(lag) == partitions and all(row["LAG"] == "0" for row in lag.values())


def test_consumer_groups_describe_reset_and_delete(broker, shell, timed_topic, tmp_path):
    bootstrap, (topic, base, stamps) = broker.bootstrap_servers, timed_topic
    group = f"tools-group-{uuid.uuid4().hex[:6]}"
    consumer = start_tool("kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic, "--group",
                          group, "--from-beginning", "--consumer-property", "auto.commit.interval.ms=100",
                          log_path=tmp_path / "consumer.log")
    try:
        assert wait_until(lambda: caught_up(bootstrap, group, 2), 90, 0.5), (tmp_path / "consumer.log").read_text()
        args = ("--bootstrap-server", bootstrap, "--describe", "--group", group)
        offsets = table(shell.run("kafka-consumer-groups", *args, "--offsets").stdout, "GROUP")
        members = table(shell.run("kafka-consumer-groups", *args, "--members", "--verbose").stdout, "GROUP")
        state = table(shell.run("kafka-consumer-groups", *args, "--state").stdout, "GROUP")
        listed = table(shell.run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--list", "--state").stdout,
                       "GROUP")
    finally:
        consumer.terminate()
        consumer.wait(30)
    ours = committed_lag(bootstrap, group)
    assert {(row["TOPIC"], int(row["PARTITION"])): (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"])
            for row in offsets} == {key: (row["CURRENT-OFFSET"], row["LOG-END-OFFSET"], row["LAG"])
                                    for key, row in ours.items()} == {(topic, 0): ("20", "20", "0"),
                                                                      (topic, 1): ("20", "20", "0")}
    assert len(members) == 1 and members[0]["#PARTITIONS"] == "2" and members[0]["CLIENT-ID"].startswith("console")
    assert offsets[0]["CONSUMER-ID"] == members[0]["CONSUMER-ID"]
    assert (state[0]["STATE"], state[0]["#MEMBERS"], state[0]["ASSIGNMENT-STRATEGY"]) == ("Stable", "1", "range")
    assert {"GROUP": group, "STATE": "Stable"} in listed
    internal = shell.run("kafka-topics", "--bootstrap-server", bootstrap, "--describe", "--topic",
                         "__consumer_offsets").stdout.splitlines()[0]  # Kafka's configs for it, made by the group
    assert set(internal.split("Configs: ")[1].split(",")) == {"compression.type=producer", "cleanup.policy=compact",
                                                              "segment.bytes=104857600"}

    reset = ("--bootstrap-server", bootstrap, "--reset-offsets", "--group", group, "--topic", topic)
    wait_until(lambda: "Empty" in shell.run("kafka-consumer-groups", *args, "--state").stdout, 30, 0.5)
    dry = table(shell.run("kafka-consumer-groups", *reset, "--to-earliest", "--dry-run").stdout, "GROUP")
    assert {row["NEW-OFFSET"] for row in dry} == {"0"}
    assert {row["CURRENT-OFFSET"] for row in committed_lag(bootstrap, group).values()} == {"20"}  # a dry run

    moment = base + 12_500  # records 13.. of each partition are stamped at or after it (and partition 1's offset 7)
    at_time = table(shell.run("kafka-consumer-groups", *reset, "--to-datetime",
                              time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(moment // 1000)) + ".500Z",
                              "--execute").stdout, "GROUP")
    expected = {p: min(o for (q, o), ts in stamps.items() if q == p and ts >= moment) for p in (0, 1)}
    assert {int(row["PARTITION"]): int(row["NEW-OFFSET"]) for row in at_time} == expected == {0: 13, 1: 7}
    assert {p: int(row["CURRENT-OFFSET"]) for (_, p), row in committed_lag(bootstrap, group).items()} == expected

    shifted = table(shell.run("kafka-consumer-groups", *reset, "--shift-by", "-5", "--execute").stdout, "GROUP")
    assert {int(row["PARTITION"]): int(row["NEW-OFFSET"]) for row in shifted} == {0: 8, 1: 2}
    lag = committed_lag(bootstrap, group)
    assert {p: (row["CURRENT-OFFSET"], row["LAG"]) for (_, p), row in lag.items()} == {0: ("8", "12"),
                                                                                       1: ("2", "18")}
    described = table(shell.run("kafka-consumer-groups", *args, "--offsets").stdout, "GROUP")
    assert {int(row["PARTITION"]): (row["CURRENT-OFFSET"], row["LAG"]) for row in described} == {
        p: (row["CURRENT-OFFSET"], row["LAG"]) for (_, p), row in lag.items()}

    deleted = shell.run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--delete-offsets", "--group",
                        group, "--topic", f"{topic}:1").stdout
    assert table(deleted, "TOPIC") == [{"TOPIC": topic, "PARTITION": "1", "STATUS": "Successful"}]
    assert list(committed_lag(bootstrap, group)) == [(topic, 0)]
    assert "successful" in shell.run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--delete", "--group",
                                     group).stdout
    assert group not in shell.run("kafka-consumer-groups", "--bootstrap-server", bootstrap, "--list").stdout.split()
    gone = shell.run("kafka-consumer-groups", *args, expect_failure=True)
    # Kafka's answer to ConsumerGroupDescribe, which the admin client keeps when DescribeGroups says the same
    assert f"GroupIdNotFoundException: Group {group} not found." in gone.stdout


def offsets_of(text: str) -> dict[int, int]:
    """kafka-get-offsets' `topic:partition:offset` lines, by partition."""
    return {int(line.split(":")[-2]): int(line.split(":")[-1]) for line in text.split() if line.count(":") >= 2}


def test_get_offsets_by_spec_and_time_then_delete_records(broker, shell, timed_topic, tmp_path):
    bootstrap, (topic, base, stamps) = broker.bootstrap_servers, timed_topic
    args = ("--bootstrap-server", bootstrap, "--topic", topic)
    latest, earliest, earliest_local, max_timestamp, at_time, after_all = (
        offsets_of(shell.run("kafka-get-offsets", *args, "--time", spec).stdout)
        for spec in ("-1", "-2", "-4", "-3", str(base + 4_500), str(base + 30 * DAY_MS)))
    assert earliest_local == earliest  # no tiered storage: the local log is the whole log
    ours = odradek_offsets(bootstrap, topic)
    assert latest == {p: end for p, (_, end) in ours.items()} == {0: 20, 1: 20}
    assert earliest == {p: start for p, (start, _) in ours.items()} == {0: 0, 1: 0}
    assert max_timestamp == {0: 19, 1: 7}  # partition 1's offset 7 is stamped after its last record
    assert at_time == {0: 5, 1: 5}
    assert after_all == {}  # no record at or after that time: the tool prints no offset for either partition

    plan = tmp_path / "delete.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [{"topic": topic, "partition": 1, "offset": 15}]}))
    done = shell.run("kafka-delete-records", "--bootstrap-server", bootstrap, "--offset-json-file", plan).stdout
    assert f"partition: {topic}-1\tlow_watermark: 15" in done
    assert offsets_of(shell.run("kafka-get-offsets", *args, "--time", "-2").stdout) == {0: 0, 1: 15}
    assert odradek_offsets(bootstrap, topic) == {0: (0, 20), 1: (15, 20)}


def test_log_dirs_sizes_are_the_segment_files(broker, shell, timed_topic):
    topic = timed_topic[0]
    out = shell.run("kafka-log-dirs", "--bootstrap-server", broker.bootstrap_servers, "--describe", "--topic-list",
                    topic, "--broker-list", 1).stdout
    described = json.loads(out.strip().splitlines()[-1])
    [broker_dirs] = described["brokers"]
    [log_dir] = broker_dirs["logDirs"]
    assert broker_dirs["broker"] == 1 and log_dir["error"] is None
    assert log_dir["logDir"] == str(broker.data_dir)
    sizes = {entry["partition"]: entry["size"] for entry in log_dir["partitions"]}
    on_disk = {f"{topic}-{p}": sum(f.stat().st_size for f in (broker.data_dir / f"{topic}-{p}").glob("*.log"))
               for p in (0, 1)}
    assert sizes == on_disk and all(size > 0 for size in sizes.values())


def test_features_none_finalized_and_updates_refused(broker, shell):
    """Odradek finalizes no feature and serves no UpdateFeatures: describe lists nothing, and an upgrade or a
    downgrade fails as Kafka's tool fails against a broker without the API, one line each, no trace."""
    args = ("--bootstrap-server", broker.bootstrap_servers)
    assert shell.run("kafka-features", *args, "describe").stdout.strip() == ""
    for action in (("upgrade", "--feature", "transaction.version=2"),
                   ("downgrade", "--feature", "group.version=0"),
                   ("upgrade", "--release-version", "4.0")):
        refused = shell.run("kafka-features", *args, *action, expect_failure=True)
        assert "does not support UPDATE_FEATURES" in refused.stdout + refused.stderr, action


def test_perf_tests_summaries_count_every_record(broker, shell):
    bootstrap, topic = broker.bootstrap_servers, f"tools-perf-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 2)
    produced = shell.run("kafka-producer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                         "--num-records", 5000, "--record-size", 100, "--throughput", -1,
                         "--command-property", "acks=all", "linger.ms=5").stdout
    summary = produced.strip().splitlines()[-1]
    assert summary.startswith("5000 records sent, ") and " ms avg latency, " in summary and "99.9th." in summary
    assert sum(end for _, end in odradek_offsets(bootstrap, topic).values()) == 5000
    consumed = shell.run("kafka-consumer-perf-test", "--bootstrap-server", bootstrap, "--topic", topic,
                         "--num-records", 5000, "--timeout", 60000).stdout
    header, line = consumed.strip().splitlines()[-2:]
    row = dict(zip((name.strip() for name in header.split(",")), (value.strip() for value in line.split(","))))
    assert int(row["data.consumed.in.nMsg"]) == 5000
    assert float(row["data.consumed.in.MB"]) == pytest.approx(5000 * 100 / 1024 / 1024, abs=0.001)


def events(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def acked_offsets(log: Path, expected: int) -> set[tuple[int, int]]:
    """(partition, offset) of every record a verifiable producer saw acknowledged; all `expected` of them."""
    produced = events(log.read_text())
    acked = {(e["partition"], e["offset"]) for e in produced if e["name"] == "producer_send_success"}
    assert [e for e in produced if e["name"] == "tool_data"][0]["acked"] == len(acked) == expected
    return acked


def consumed_offsets(logs: list[Path]) -> set[tuple[int, int]]:
    """(partition, offset) of every record verifiable consumers reported consuming (their runs of offsets)."""
    runs = [p for log in logs for e in events(log.read_text()) if e["name"] == "records_consumed"
            for p in e["partitions"]]
    return {(run["partition"], offset) for run in runs for offset in range(run["minOffset"], run["maxOffset"] + 1)}


def verifiable_consumer(bootstrap: str, topic: str, group: str, log: Path):
    process = start_tool("kafka-verifiable-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                         "--group-id", group, "--reset-policy", "earliest", "--session-timeout", 10000, log_path=log)
    assert wait_until(lambda: "partitions_assigned" in log.read_text(), 90, 0.2), log.read_text()
    return process


def stop(*processes) -> None:
    for process in processes:
        if process is not None and process.poll() is None:
            process.terminate()
            process.wait(30)


def test_verifiable_producer_and_consumers_across_a_rebalance(broker, tmp_path):
    """Kafka's system-test clients: every record the producer saw acknowledged is consumed by the group, while a
    second consumer joins and the partitions are shared out again."""
    bootstrap, topic, group = broker.bootstrap_servers, f"tools-verify-{uuid.uuid4().hex[:6]}", "verifiers"
    create_topic(bootstrap, topic, 4)
    logs = [tmp_path / "first.log", tmp_path / "second.log"]
    first = verifiable_consumer(bootstrap, topic, group, logs[0])
    producer = second = None
    try:
        producer = start_tool("kafka-verifiable-producer", "--bootstrap-server", bootstrap, "--topic", topic,
                              "--max-messages", 1000, "--throughput", 500, "--acks", -1, "--repeating-keys", 50,
                              log_path=tmp_path / "producer.log")
        assert wait_until(lambda: "records_consumed" in logs[0].read_text(), 90, 0.2)
        second = verifiable_consumer(bootstrap, topic, group, logs[1])
        assert producer.wait(120) == 0
        acked = acked_offsets(tmp_path / "producer.log", 1000)
        assert wait_until(lambda: acked <= consumed_offsets(logs), 90, 0.5), sorted(acked - consumed_offsets(logs))
    finally:
        stop(producer, first, second)
    firsts, seconds = events(logs[0].read_text()), events(logs[1].read_text())
    assert sum(e["name"] == "partitions_assigned" for e in firsts) >= 2  # the rebalance the second one caused
    second_share = [e["partitions"] for e in seconds if e["name"] == "partitions_assigned"]
    assert second_share and second_share[0]  # it was given partitions of its own
    assert all(e["success"] for e in firsts + seconds if e["name"] == "offsets_committed")
    assert caught_up(bootstrap, group, 4)


@pytest.mark.skipif(not os.environ.get("INTEROP_SECONDS"), reason="a soak run: set INTEROP_SECONDS")
def test_long_verifiable_clients_through_repeated_rebalances(broker, tmp_path):
    """For INTEROP_SECONDS: the verifiable producer writes at 200 records/s while a second consumer joins and
    leaves the group every ~10 s; every acknowledged record is consumed and the group ends caught up."""
    seconds = float(os.environ["INTEROP_SECONDS"])
    bootstrap, topic, group = broker.bootstrap_servers, f"tools-soak-{uuid.uuid4().hex[:6]}", "soak-verifiers"
    create_topic(bootstrap, topic, 6)
    count = int(seconds * 200)
    logs = [tmp_path / "stable.log"]
    stable = verifiable_consumer(bootstrap, topic, group, logs[0])
    producer = joiner = None
    try:
        producer = start_tool("kafka-verifiable-producer", "--bootstrap-server", bootstrap, "--topic", topic,
                              "--max-messages", count, "--throughput", 200, "--acks", -1, "--repeating-keys", 100,
                              log_path=tmp_path / "producer.log")
        deadline = time.monotonic() + seconds
        while producer.poll() is None and time.monotonic() < deadline + 60:
            if joiner is None:
                logs.append(tmp_path / f"joiner-{len(logs)}.log")
                joiner = verifiable_consumer(bootstrap, topic, group, logs[-1])
            else:
                stop(joiner)
                joiner = None
            time.sleep(10)
        assert producer.wait(120) == 0
        acked = acked_offsets(tmp_path / "producer.log", count)
        assert wait_until(lambda: acked <= consumed_offsets(logs), 120, 1), len(acked - consumed_offsets(logs))
    finally:
        stop(producer, stable, joiner)
    assert sum(e["name"] == "partitions_assigned" for e in events(logs[0].read_text())) >= 3
    assert caught_up(bootstrap, group, 6)


def test_console_producer_and_consumer_round_trip_keys_and_headers(broker, shell):
    bootstrap, topic = broker.bootstrap_servers, f"tools-console-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic, 1)
    shell.run("kafka-console-producer", "--bootstrap-server", bootstrap, "--topic", topic,
              "--reader-property", "parse.key=true", "--reader-property", "key.separator=:",
              "--reader-property", "parse.headers=true",
              input="source:tool,trace:1\tk1:hello\nsource:tool\tk2:world\n")
    odradek("produce", topic, "--key-separator", ":", "--header", "source=odradek", "-b", bootstrap,
            input="k3:from odradek\n")
    printed = shell.run("kafka-console-consumer", "--bootstrap-server", bootstrap, "--topic", topic,
                        "--from-beginning", "--max-messages", 3, "--timeout-ms", 30000,
                        "--formatter-property", "print.key=true", "--formatter-property", "print.headers=true",
                        "--formatter-property", "key.separator=|").stdout
    assert printed.splitlines()[:3] == ["source:tool,trace:1|k1|hello", "source:tool|k2|world",
                                        "source:odradek|k3|from odradek"]
    ours = [json.loads(line) for line in odradek("consume", topic, "--from-beginning", "--format", "json",
                                                 "--max-messages", 3, "-b", bootstrap).splitlines()]
    assert [(record["key"], record["value"]) for record in ours] == [("k1", "hello"), ("k2", "world"),
                                                                     ("k3", "from odradek")]
    assert "trace" in json.dumps(ours[0]) and "source" in json.dumps(ours[1])


def test_transactions_list_describe_find_hanging_and_abort(broker, shell):
    bootstrap, topic, txn = broker.bootstrap_servers, f"tools-txn-{uuid.uuid4().hex[:6]}", "tools-open-txn"
    create_topic(bootstrap, topic, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn, "transaction.timeout.ms": 600000})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, b"uncommitted %d" % i)
    producer.flush(30)
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-reader-{uuid.uuid4().hex[:6]}",
                       "isolation.level": "read_committed"})
    try:  # the open transaction holds the last stable offset at its first record
        assert reader.get_watermark_offsets(TopicPartition(topic, 0), 10) == (0, 0)
    finally:
        reader.close()
    args = ("--bootstrap-server", bootstrap)
    listed = tab_table(shell.run("kafka-transactions", *args, "list").stdout)
    [mine] = [row for row in listed if row["TransactionalId"] == txn]
    assert (mine["Coordinator"], mine["TransactionState"]) == ("1", "Ongoing")
    [described] = tab_table(shell.run("kafka-transactions", *args, "describe", "--transactional-id", txn).stdout)
    assert (described["ProducerId"], described["TransactionState"], described["TopicPartitions"]) == (
        mine["ProducerId"], "Ongoing", f"{topic}-0")
    assert described["TransactionTimeoutMs"] == "600000"
    [open_state] = tab_table(shell.run("kafka-transactions", *args, "describe-producers", "--topic", topic,
                                       "--partition", 0).stdout)
    assert (open_state["ProducerId"], open_state["LastSequence"], open_state["CurrentTransactionStartOffset"]) == (
        mine["ProducerId"], "4", "0")
    internal = shell.run("kafka-topics", *args, "--describe", "--topic", "__transaction_state").stdout.splitlines()[0]
    assert set(internal.split("Configs: ")[1].split(",")) == {  # Kafka's configs for it (min ISR 1 on one node)
        "compression.type=uncompressed", "cleanup.policy=compact", "min.insync.replicas=1", "segment.bytes=104857600",
        "unclean.leader.election.enable=false"}
    hanging = shell.run("kafka-transactions", *args, "find-hanging", "--broker-id", 1, "--max-transaction-timeout",
                        0).stdout  # open past 0 minutes, but its coordinator still has it: not hanging
    assert tab_table(hanging) == []

    shell.run("kafka-transactions", *args, "abort", "--topic", topic, "--partition", 0, "--start-offset", 0)
    [aborted] = tab_table(shell.run("kafka-transactions", *args, "describe-producers", "--topic", topic,
                                    "--partition", 0).stdout)
    assert aborted["CurrentTransactionStartOffset"] == "None"
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": f"txn-reader-{uuid.uuid4().hex[:6]}",
                       "isolation.level": "read_committed"})
    try:  # a read_committed ListOffsets: the last stable offset, past the five records and the abort marker
        assert reader.get_watermark_offsets(TopicPartition(topic, 0), 10) == (0, 6)
    finally:
        reader.close()
    assert offsets_of(shell.run("kafka-get-offsets", *args, "--topic", topic).stdout) == {0: 6}
    producer.abort_transaction(30)  # its coordinator ends it too (one more marker), and the producer goes quiet
    assert producer.flush(10) == 0
