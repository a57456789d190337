"""The `odradek` command as a user runs it (`python -m odradek ...` in a subprocess) against a real broker:
output, exit codes and one-line errors for topics, produce, consume, groups and the pipelines' options."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from odradek.cli.main import build_parser
from odradek.client import Admin, Producer, murmur2_partitioner
from odradek.embedded import BrokerProcess, wait_until
from tests.chaos.proxy import Proxy

import odradek as odradek_package
from .run import odradek, odradek_command


def _subcommands(parser, prefix=()):
    for action in parser._actions:
        if action.__class__.__name__ == "_SubParsersAction":
            for name, child in action.choices.items():
                yield prefix + (name,), child
                yield from _subcommands(child, prefix + (name,))


def test_every_command_and_option_has_help(capsys):
    commands = list(_subcommands(build_parser()))
    assert {("serve",), ("topics", "create"), ("produce",), ("consume",), ("groups", "reset-offsets"),
            ("perf", "produce"), ("perf", "consume"), ("dump-log",), ("mirror",)} <= {path for path, _ in commands}
    for path, parser in commands:
        assert parser.description, path
        undocumented = [action.dest for action in parser._actions if action.option_strings and not action.help]
        assert undocumented == [], path
        with pytest.raises(SystemExit) as exit:
            build_parser().parse_args([*path, "--help"])
        assert exit.value.code == 0
        assert "usage: odradek " + " ".join(path) in capsys.readouterr().out


def test_version():
    shown = odradek(None, "--version")
    assert shown.returncode == 0 and shown.stdout == f"odradek {odradek_package.__version__}\n"


def test_usage_errors_exit_2_and_unreachable_cluster_is_one_line_exit_1():
    bad = odradek(None, "topics", "create")
    assert bad.returncode == 2 and "required: topic" in bad.stderr
    down = odradek(None, "topics", "list", "--bootstrap-server", "127.0.0.1:1", "--timeout", "1")
    assert down.returncode == 1
    assert down.stderr.startswith("odradek: ") and down.stderr.count("\n") == 1, down.stderr


def test_topics_lifecycle(broker, topic_name):
    created = odradek(broker, "topics", "create", topic_name, "--partitions", "3", "--config", "retention.ms=60000")
    assert created.returncode == 0, created.stderr
    assert created.stdout == f"Created topic {topic_name}.\n"

    again = odradek(broker, "topics", "create", topic_name)
    assert again.returncode == 1
    assert again.stderr.startswith("odradek: TOPIC_ALREADY_EXISTS") and again.stderr.count("\n") == 1
    assert odradek(broker, "topics", "create", topic_name, "--if-not-exists").returncode == 0

    listed = odradek(broker, "topics", "list")
    assert topic_name in listed.stdout.split() and "__consumer_offsets" not in listed.stdout

    altered = odradek(broker, "topics", "alter", topic_name, "--partitions", "5", "--config", "cleanup.policy=compact",
                      "--delete-config", "retention.ms")
    assert altered.returncode == 0, altered.stderr
    described = odradek(broker, "topics", "describe", topic_name)
    lines = described.stdout.splitlines()
    assert lines[0] == (f"Topic: {topic_name}\tPartitionCount: 5\tReplicationFactor: 1\t"
                        f"Configs: cleanup.policy=compact")
    assert lines[1] == f"\tTopic: {topic_name}\tPartition: 0\tLeader: 1\tReplicas: 1\tIsr: 1\tOffsets: 0..0"
    assert len(lines) == 6

    deleted = odradek(broker, "topics", "delete", topic_name)
    assert deleted.returncode == 0 and deleted.stdout == f"Deleted topic {topic_name}.\n"
    missing = odradek(broker, "topics", "delete", topic_name)
    assert missing.returncode == 1 and "UNKNOWN_TOPIC_OR_PART" in missing.stderr
    assert odradek(broker, "topics", "delete", topic_name, "--if-exists").returncode == 0
    assert odradek(broker, "topics", "describe", topic_name).returncode == 1


def test_produce_keys_headers_then_consume_as_json(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 4)
    lines = [f"key-{i}:value {i}" for i in range(40)] + ["no key here"]
    produced = odradek(broker, "produce", topic_name, "--key-separator", ":", "--header", "source=cli",
                       "--header", "n=1", input="\n".join(lines) + "\n")
    assert produced.returncode == 0, produced.stderr
    assert "Produced 41 record(s)" in produced.stderr

    consumed = odradek(broker, "consume", topic_name, "--from-beginning", "--format", "json",
                       "--max-messages", "41", "--idle-timeout-ms", "5000")
    assert consumed.returncode == 0, consumed.stderr
    records = [json.loads(line) for line in consumed.stdout.splitlines()]
    assert len(records) == 41 and "Processed a total of 41 messages" in consumed.stderr
    by_value = {record["value"]: record for record in records}
    for i in range(40):
        record = by_value[f"value {i}"]
        assert record["key"] == f"key-{i}"
        assert record["headers"] == {"source": "cli", "n": "1"}
        assert record["partition"] == murmur2_partitioner(f"key-{i}".encode(), 4)  # Java's partitioning
    assert by_value["no key here"]["key"] is None


def test_consume_from_offset_and_from_time_raw(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 1)
    now = int(time.time() * 1000)
    with Producer(broker.bootstrap_servers) as producer:
        for i in range(10):
            producer.send(topic_name, f"v{i}", f"k{i}", timestamp_ms=now - 10_000 + i * 1000)
    from_offset = odradek(broker, "consume", topic_name, "--partition", "0", "--offset", "7", "--print-key",
                          "--idle-timeout-ms", "1500")
    assert from_offset.returncode == 0, from_offset.stderr
    assert from_offset.stdout.splitlines() == ["k7\tv7", "k8\tv8", "k9\tv9"]
    from_time = odradek(broker, "consume", topic_name, "--from-time", str(now - 2500), "--max-messages", "2")
    assert from_time.stdout.splitlines() == ["v8", "v9"]
    latest = odradek(broker, "consume", topic_name, "--idle-timeout-ms", "1000")
    assert latest.returncode == 0 and latest.stdout == ""


def test_produce_to_a_partition_from_a_file(broker, topic_name, tmp_path):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 3)
    source = tmp_path / "lines.txt"
    source.write_text("a\nb\nc\n")
    assert odradek(broker, "produce", topic_name, "--file", str(source), "--partition", "2").returncode == 0
    only_2 = odradek(broker, "consume", topic_name, "--partition", "2", "--from-beginning", "--max-messages", "3")
    assert only_2.stdout.splitlines() == ["a", "b", "c"]
    bad_partition = odradek(broker, "produce", topic_name, "--partition", "9", input="x\n")
    assert bad_partition.returncode == 1 and bad_partition.stderr.startswith("odradek: ")


def test_groups_describe_lag_reset_and_delete(broker, topic_name):
    group = f"g-{topic_name}"
    Admin(broker.bootstrap_servers).create_topic(topic_name, 2)
    base = int(time.time() * 1000) - 100_000
    with Producer(broker.bootstrap_servers) as producer:
        for i in range(20):
            producer.send(topic_name, f"v{i}", partition=i % 2, timestamp_ms=base + i * 1000)
    consumed = odradek(broker, "consume", topic_name, "--group", group, "--from-beginning", "--max-messages", "12")
    assert consumed.returncode == 0, consumed.stderr
    assert len(consumed.stdout.splitlines()) == 12

    listed = odradek(broker, "groups", "list")
    assert listed.stdout.splitlines()[0].split() == ["GROUP", "STATE"]
    assert any(line.split()[0] == group for line in listed.stdout.splitlines()[1:])

    described = odradek(broker, "groups", "describe", group)
    assert described.returncode == 0, described.stderr
    rows = [line.split() for line in described.stdout.splitlines()[2:]]
    assert described.stdout.splitlines()[1].split() == ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET",
                                                         "LOG-END-OFFSET", "LAG", "CONSUMER-ID", "HOST", "CLIENT-ID"]
    assert all(row[0] == group and row[6:] == ["-", "-", "-"] for row in rows)  # no member now
    assert sum(int(row[3]) for row in rows) == 12 and sum(int(row[5]) for row in rows) == 8
    assert all(row[4] == "10" for row in rows)

    dry = odradek(broker, "groups", "reset-offsets", group, "--topic", topic_name, "--to-earliest")
    assert dry.returncode == 0 and "Dry run" in dry.stderr
    assert [row.split()[3] for row in dry.stdout.splitlines()[1:]] == ["0", "0"]
    assert Admin(broker.bootstrap_servers).committed_offsets(group) != {(topic_name, 0): 0, (topic_name, 1): 0}

    to_time = odradek(broker, "groups", "reset-offsets", group, "--all-topics", "--to-datetime",
                      str(base + 15_000), "--execute")
    assert to_time.returncode == 0, to_time.stderr
    assert Admin(broker.bootstrap_servers).committed_offsets(group) == {(topic_name, 0): 8, (topic_name, 1): 7}
    assert odradek(broker, "groups", "reset-offsets", group, "--topic", topic_name, "--to-offset", "3",
                   "--execute").returncode == 0
    assert Admin(broker.bootstrap_servers).committed_offsets(group) == {(topic_name, 0): 3, (topic_name, 1): 3}
    beyond = odradek(broker, "groups", "reset-offsets", group, "--topic", topic_name, "--to-offset", "99")
    assert [row.split()[3] for row in beyond.stdout.splitlines()[1:]] == ["10", "10"]  # clamped to the log end
    assert odradek(broker, "groups", "reset-offsets", group, "--topic", topic_name, "--to-latest",
                   "--execute").returncode == 0
    lag = odradek(broker, "groups", "describe", group).stdout.splitlines()[2:]
    assert [row.split()[5] for row in lag] == ["0", "0"]

    assert odradek(broker, "groups", "delete", group).stdout == f"Deleted group {group}.\n"
    gone = odradek(broker, "groups", "delete", group)
    assert gone.returncode == 1 and gone.stderr.count("\n") == 1


def test_consume_reads_past_500_records_alone_and_in_a_group(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 3)
    with Producer(broker.bootstrap_servers) as producer:
        for i in range(1200):
            producer.send(topic_name, f"v{i}", f"k{i}")
    alone = odradek(broker, "consume", topic_name, "--from-beginning", "--idle-timeout-ms", "2000")
    assert alone.returncode == 0, alone.stderr
    assert sorted(alone.stdout.splitlines()) == sorted(f"v{i}" for i in range(1200))
    group = f"g-{topic_name}"
    grouped = odradek(broker, "consume", topic_name, "--group", group, "--from-beginning", "--idle-timeout-ms", "3000")
    assert len(grouped.stdout.splitlines()) == 1200 and "Processed a total of 1200 messages" in grouped.stderr
    assert sum(Admin(broker.bootstrap_servers).committed_offsets(group).values()) == 1200


def test_ctrl_c_reports_commits_what_was_printed_and_exits_130(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 2)
    with Producer(broker.bootstrap_servers) as producer:
        for i in range(10):
            producer.send(topic_name, f"v{i}")
    group = f"g-{topic_name}"
    consumer = subprocess.Popen(odradek_command("consume", topic_name, "--group", group, "--from-beginning",
                                                "--bootstrap-server", broker.bootstrap_servers),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        lines = [consumer.stdout.readline() for _ in range(10)]
        # at once, while it may still be between writing the lines and storing their offsets: what it printed
        # is what it counts and commits all the same
        consumer.send_signal(signal.SIGINT)
        rest, errors = consumer.communicate(timeout=60)
    finally:
        consumer.kill()
    assert consumer.returncode == 130 and rest == "" and len(lines) == 10, (lines, rest, errors)
    assert errors == "Processed a total of 10 messages\n"
    assert sum(Admin(broker.bootstrap_servers).committed_offsets(group).values()) == 10


def test_groups_describe_shows_each_members_host_and_client_id(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 1)
    group = f"g-{topic_name}"
    reader = subprocess.Popen(odradek_command("consume", topic_name, "--group", group, "--consumer-property",
                                              "client.id=cli-reader", "--bootstrap-server", broker.bootstrap_servers),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: Admin(broker.bootstrap_servers).describe_group(group).state == "STABLE",
                          timeout=60)
        with Producer(broker.bootstrap_servers) as producer:
            producer.send_sync(topic_name, "hello")
        assert reader.stdout.readline() == "hello\n"
        described = odradek(broker, "groups", "describe", group)
    finally:
        reader.send_signal(signal.SIGINT)
        reader.communicate(timeout=60)
    [row] = [line.split() for line in described.stdout.splitlines()[2:]]
    assert row[:3] == [group, topic_name, "0"] and row[6].startswith("cli-reader-")
    assert row[7:] == ["/127.0.0.1", "cli-reader"]  # as Kafka's coordinator gives the host, and the client's id


def _one_line_error(result, code: int, *words: str) -> None:
    assert result.returncode == code, (result.returncode, result.stderr)
    assert result.stderr.startswith("odradek: ") and result.stderr.count("\n") == 1, result.stderr
    assert all(word in result.stderr for word in words), result.stderr


def test_mistakes_a_new_user_makes_get_one_line_and_kafka_exit_codes(broker, topic_name):
    Admin(broker.bootstrap_servers).create_topic(topic_name, 6)
    _one_line_error(odradek(broker, "consume", topic_name, "-p", "9", timeout=30), 1,
                    f"'{topic_name}' has partitions 0..5, not 9")
    _one_line_error(odradek(broker, "groups", "describe", f"no-such-{topic_name}"), 1,
                    "GROUP_ID_NOT_FOUND", f"'no-such-{topic_name}' does not exist")
    _one_line_error(odradek(broker, "topics", "delete", f"no-such-{topic_name}"), 1,
                    f"'no-such-{topic_name}'", "UNKNOWN_TOPIC_OR_PART")
    _one_line_error(odradek(None, "produce", topic_name, "--bootstrap-server", "127.0.0.1:1", input="x\n"), 1,
                    "connection refused: 127.0.0.1:1")
    # arguments that cannot go together are usage errors: exit 2, as argparse's own
    _one_line_error(odradek(broker, "consume", topic_name, "--group", "g", "-p", "1"), 2, "--partition")
    _one_line_error(odradek(broker, "topics", "alter", topic_name), 2, "nothing to alter")
    bad_port = odradek(None, "serve", "--port", "99999")
    assert bad_port.returncode == 2 and "Traceback" not in bad_port.stderr
    assert bad_port.stderr.splitlines()[-1] == ("odradek serve: error: argument --port: "
                                                "expected a port number from 0 to 65535, got '99999'")


def test_pipelines_name_the_broker_as_every_other_command(broker, topic_name):
    env = {"ODRADEK_BOOTSTRAP_SERVER": broker.bootstrap_servers}
    generated = odradek(None, "pipeline", "generate", "orders", "--count", "7", "--topic", topic_name, env=env)
    assert generated.returncode == 0, generated.stderr
    old_scripts = odradek(None, "pipeline", "generate", "orders", "--count", "3", "--topic", topic_name,
                          "--bootstrap-servers", broker.bootstrap_servers)
    assert old_scripts.returncode == 0, old_scripts.stderr
    shown = odradek(None, "pipeline", "warehouse-load", "--help").stdout
    assert "--bootstrap-server HOST:PORT" in shown and "--bootstrap-servers" not in shown
    [described] = Admin(broker.bootstrap_servers).describe_topics([topic_name])
    assert sum(p.latest_offset for p in described.partitions) == 10


def test_idle_timeout_counts_from_joining_the_group(tmp_path, topic_name):
    """A broker as `odradek serve` runs (group.initial.rebalance.delay.ms 3000, Kafka's default): joining a new group
    takes over 3 s, which a 1 s --idle-timeout-ms must not count as idle."""
    with BrokerProcess(tmp_path / "data") as served:
        Admin(served.bootstrap_servers).create_topic(topic_name, 2)
        with Producer(served.bootstrap_servers) as producer:
            for i in range(5):
                producer.send(topic_name, f"v{i}")
        consumed = odradek(served, "consume", topic_name, "--group", f"g-{topic_name}", "--from-beginning",
                           "--idle-timeout-ms", "1000")
    assert consumed.returncode == 0, consumed.stderr
    assert sorted(consumed.stdout.splitlines()) == [f"v{i}" for i in range(5)]


def test_idle_timeout_counts_from_reaching_the_end_over_a_slow_link(broker, tmp_path, topic_name):
    """Connecting, finding the start offsets and the first fetches are not idleness: over a link where every
    connection takes 0.7 s to open, a 300 ms --idle-timeout-ms still prints every record there is, with and
    without a group, and the mirror still copies every one."""
    served = BrokerProcess(tmp_path / "data")
    slow = Proxy(lambda: (served.host, served.port), "slow", connect_delay=0.7)
    served.settings["advertised.listeners"] = f"PLAINTEXT://{slow.address}"
    try:
        with served:
            Admin(served.bootstrap_servers).create_topic(topic_name, 2)
            with Producer(served.bootstrap_servers) as producer:
                for i in range(5):
                    producer.send(topic_name, f"v{i}")
            through_the_link = ("--bootstrap-server", slow.address, "--idle-timeout-ms", "300")
            alone = odradek(None, "consume", topic_name, "--from-beginning", *through_the_link)
            grouped = odradek(None, "consume", topic_name, "--group", f"g-{topic_name}", "--from-beginning",
                              *through_the_link)
            mirrored = odradek(None, "mirror", "--target", broker.bootstrap_servers, "--topics", topic_name,
                               "--commit-interval-ms", "100", *through_the_link)
    finally:
        slow.close()
    for consumed in (alone, grouped):
        assert consumed.returncode == 0, consumed.stderr
        assert sorted(consumed.stdout.splitlines()) == [f"v{i}" for i in range(5)]
    assert mirrored.returncode == 0, mirrored.stderr
    assert "Mirrored 5 record(s)." in mirrored.stderr


def test_mirror_idle_timeout_counts_from_joining_the_source_group(broker, tmp_path, topic_name):
    """As consume's: a source broker as `odradek serve` runs it, whose new groups take over 3 s to join."""
    with BrokerProcess(tmp_path / "source") as source:
        Admin(source.bootstrap_servers).create_topic(topic_name, 2)
        with Producer(source.bootstrap_servers) as producer:
            for i in range(5):
                producer.send(topic_name, f"v{i}")
        mirrored = odradek(source, "mirror", "--target", broker.bootstrap_servers, "--topics", topic_name,
                           "--idle-timeout-ms", "1000")
    assert mirrored.returncode == 0, mirrored.stderr
    assert "Mirrored 5 record(s)." in mirrored.stderr
    copied = odradek(broker, "consume", topic_name, "--from-beginning", "--idle-timeout-ms", "1000")
    assert sorted(copied.stdout.splitlines()) == [f"v{i}" for i in range(5)]
