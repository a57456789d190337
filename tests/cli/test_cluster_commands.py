"""The commands against a three-broker cluster as a developer runs one: `odradek cluster up --data-dir` (its
output, the line that restarts a broker by hand, run as printed, the broker death it reports, the same ports when
run again on the same directory); `reassign --generate` as kafka-reassign-partitions prints it; and, while a
broker is down, `topics describe` answering from Metadata at once with the partitions it leaves offline or
under-replicated (filtered as kafka-topics' --under-replicated-partitions and --unavailable-partitions do) and
`groups describe` answering from the group's new coordinator. The brokers, which join by zookeeper.connect, do not
call it a setting they do not use."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from odradek.client import Admin, Producer
from odradek.embedded import wait_until

from .run import odradek, odradek_command

READY_LINE = "Ctrl-C stops them all.\n"
BY_HAND = "To restart one broker by hand (after it stopped), with exactly its settings:\n"


@dataclass
class Up:
    """A running `odradek cluster up`, with what it printed."""
    process: subprocess.Popen
    lines: list[str]

    @property
    def ports(self) -> list[str]:
        """ZooKeeper's port, then the brokers'."""
        return re.findall(r"127\.0\.0\.1:(\d+)", "".join(line for line in self.lines
                                                            if line.startswith(("zookeeper ", "broker "))))

    def bootstrap(self, node_id: int) -> str:
        return f"127.0.0.1:{self.ports[node_id]}"

    def serve_line(self, node_id: int) -> str:
        return self.lines[self.lines.index(BY_HAND) + node_id].strip()

    def broker_pid(self, data_dir: Path, node_id: int) -> int:
        """The `odradek serve` child serving broker node_id (by its data directory)."""
        directory = str(data_dir / f"broker-{node_id}").encode()
        children = [int(child) for task in Path(f"/proc/{self.process.pid}/task").iterdir()
                    for child in (task / "children").read_text().split()]
        [pid] = [child for child in children
                 if {b"serve", directory} <= set(Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0"))]
        return pid

    def down(self) -> None:
        self.process.send_signal(signal.SIGINT)
        _, errors = self.process.communicate(timeout=120)
        assert self.process.returncode == 0, errors


def cluster_up(data_dir: Path, brokers: int = 3) -> Up:
    process = subprocess.Popen(odradek_command("cluster", "up", "--brokers", str(brokers), "--data-dir",
                                               str(data_dir)),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: list[str] = []
    while not lines or lines[-1] != READY_LINE:
        line = process.stdout.readline()
        assert line, (lines, process.stderr.read() if process.poll() is not None else "")
        lines.append(line)
    return Up(process, lines)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cli-cluster") / "cluster"


@pytest.fixture(scope="module")
def up(data_dir):
    started = cluster_up(data_dir)
    yield started
    if started.process.poll() is None:
        started.down()


def test_reassign_generate_proposes_a_spread_beside_the_current_assignment(up, topic_name, tmp_path):
    admin = Admin(up.bootstrap(1))
    admin.create_topic(topic_name, 4, 2)
    current = {(topic_name, p.partition): p.replicas for p in admin.topic_layouts()[topic_name]}
    topics = tmp_path / "topics.json"
    topics.write_text(json.dumps({"version": 1, "topics": [{"topic": topic_name}]}))
    generated = odradek(None, "reassign", "--generate", str(topics), "--broker-list", "2,3", "--bootstrap-server",
                        up.bootstrap(1))
    assert generated.returncode == 0, generated.stderr
    lines = generated.stdout.splitlines()
    assert lines[0] == "Current partition replica assignment" and lines[2:4] == [
        "", "Proposed partition reassignment configuration"] and len(lines) == 5
    shown = json.loads(lines[1])["partitions"]
    assert {(p["topic"], p["partition"]): p["replicas"] for p in shown} == current
    assert all(p["log_dirs"] == ["any", "any"] for p in shown)
    proposed = json.loads(lines[4])
    assert proposed["version"] == 1 and [p["partition"] for p in proposed["partitions"]] == [0, 1, 2, 3]
    assert all(sorted(p["replicas"]) == [2, 3] for p in proposed["partitions"])
    assert sorted(p["replicas"][0] for p in proposed["partitions"]) == [2, 2, 3, 3]  # leaders spread


def test_a_dead_broker_is_reported_and_costs_describe_no_wait(up, data_dir, topic_name):
    admin = Admin(up.bootstrap(1))
    solo, triple, group = f"{topic_name}-rf1", f"{topic_name}-rf3", f"g-{topic_name}"
    admin.create_topic(solo, 3, 1)  # one partition on each broker
    admin.create_topic(triple, 2, 3)
    with Producer(up.bootstrap(1)) as producer:
        for i in range(4):
            producer.send_sync(triple, f"v{i}", partition=i % 2)
    admin.set_group_offsets(group, {(triple, 0): 1, (triple, 1): 2})
    # the group's coordinator (the leader of __consumer_offsets) is the one to go, unless it is broker 1, asked below
    coordinator = admin.topic_layouts(include_internal=True)["__consumer_offsets"][0].leader
    down = coordinator if coordinator != 1 else 3
    by_hand = up.serve_line(down)
    assert by_hand.startswith(f"odradek serve --data-dir {data_dir / f'broker-{down}'} --host 127.0.0.1 "
                              f"--port {up.ports[down]} ") and f"zookeeper.connect={up.bootstrap(0)}" in by_hand

    os.kill(up.broker_pid(data_dir, down), signal.SIGKILL)
    assert up.process.stderr.readline() == (f"odradek: broker {down} ({up.bootstrap(down)}) died with exit code -9; "
                                            f"see {data_dir / f'broker-{down}.broker.log'}\n")
    assert wait_until(lambda: all(down not in p.isr for p in admin.topic_layouts()[triple]), timeout=60)
    started = time.monotonic()
    described = odradek(None, "topics", "describe", solo, triple, "--timeout", "60", "-b", up.bootstrap(1))
    assert time.monotonic() - started < 30  # nothing waited on the dead broker (the timeout is 60 s)
    assert described.returncode == 0, described.stderr
    lines = described.stdout.splitlines()
    offline = [line for line in lines if f"Replicas: {down}\t" in line and solo in line]
    assert len(offline) == 1 and "\tLeader: none\t" in offline[0] and offline[0].endswith("\tOffsets: -")
    shrunk = [line for line in lines if f"Topic: {triple}\tPartition:" in line]
    assert len(shrunk) == 2 and all(str(down) not in line.split("Isr: ")[1].split("\t")[0] for line in shrunk)
    assert all(line.endswith("\tOffsets: 0..2") for line in shrunk)
    under = odradek(None, "topics", "describe", "--under-replicated-partitions", "-b", up.bootstrap(1))
    assert under.returncode == 0, under.stderr
    assert sorted(line.split("\t")[2] for line in under.stdout.splitlines() if triple in line) == [
        "Partition: 0", "Partition: 1"]
    assert not any(line.startswith("Topic:") for line in under.stdout.splitlines())  # partitions only
    unavailable = odradek(None, "topics", "describe", solo, triple, "--unavailable-partitions", "-b", up.bootstrap(1))
    assert unavailable.stdout.splitlines() == offline, unavailable.stdout
    offsets = odradek(None, "groups", "describe", group, "--timeout", "60", "-b", up.bootstrap(1))
    assert offsets.returncode == 0, offsets.stderr
    assert sorted(line.split()[3] for line in offsets.stdout.splitlines()[2:]) == ["1", "2"]

    shell = f'odradek() {{ "{sys.executable}" -m odradek "$@"; }}\n{by_hand}'
    restarted = subprocess.Popen(["bash", "-c", shell], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                 text=True, start_new_session=True)
    try:
        assert f"ready on 127.0.0.1:{up.ports[down]}" in restarted.stdout.readline()
        assert wait_until(lambda: down in Admin(up.bootstrap(1)).topic_layouts()[triple][0].isr, timeout=60)
    finally:
        os.killpg(restarted.pid, signal.SIGTERM)
        restarted.wait(60)
    for node_id in (1, 2, 3):
        log = (data_dir / f"broker-{node_id}.broker.log").read_text()
        assert "'zookeeper.connect' is a Kafka setting this broker does not use" not in log


def test_cluster_up_again_on_its_data_dir_keeps_its_ports(up, data_dir):
    ports = up.ports
    up.down()
    again = cluster_up(data_dir, brokers=1)  # ZooKeeper and broker 1 are enough to see
    again.down()
    assert again.ports == ports[:2]
