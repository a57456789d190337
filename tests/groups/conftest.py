"""Helpers for group tests: consumer members run as child processes (tests/groups/member.py) and report their
assignments, so a test can watch a group split partitions and can SIGKILL a member."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

MEMBER_SCRIPT = Path(__file__).with_name("member.py")


class Member:
    def __init__(self, client: str, bootstrap: str, group: str, topic: str, session_ms: int = 6000,
                 instance_id: str | None = None):
        self.client = client
        self.assigned: list[int] = []
        self.callbacks: list[str] = []  # "assign"/"revoke", every rebalance callback it ran (confluent members)
        self.process = subprocess.Popen(
            [sys.executable, str(MEMBER_SCRIPT), client, bootstrap, group, topic, str(session_ms)]
            + ([instance_id] if instance_id else []),
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            report = json.loads(line)
            if "callback" in report:
                self.callbacks.append(report["callback"])
            else:
                self.assigned = report["assigned"]

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def stop(self, timeout: float = 15) -> None:
        if self.alive:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.kill()


def wait_for_split(members: list[Member], partitions: int, timeout: float) -> float:
    """Seconds until the live members own every partition exactly once, each at least one; fails on timeout."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        live = [m for m in members if m.alive]
        owned = [p for m in live for p in m.assigned]
        if sorted(owned) == list(range(partitions)) and all(m.assigned for m in live):
            return time.monotonic() - started
        time.sleep(0.05)
    raise AssertionError(f"no clean split after {timeout}s: {[(m.client, m.assigned) for m in members]}")


class Members:
    """The members a test started: `start(...)` one more, `wait_for_split(...)` on them; all stop at test end."""

    def __init__(self):
        self.started: list[Member] = []

    def start(self, *args, **kwargs) -> Member:
        member = Member(*args, **kwargs)
        self.started.append(member)
        return member

    def wait_for_split(self, partitions: int, timeout: float) -> float:
        return wait_for_split(self.started, partitions, timeout)


@pytest.fixture
def members():
    group = Members()
    yield group
    for member in group.started:
        member.stop(timeout=5)
