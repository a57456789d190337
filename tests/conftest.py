"""Shared fixtures: a real `odradek serve` process per test module (started once, used by every test in it), a
topic name per test, and a settable clock for the storage-level tests."""

from __future__ import annotations

import uuid

import pytest

from odradek.embedded import BrokerProcess


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    """One broker process for the module; tests use their own topic names so they do not see each other."""
    data_dir = tmp_path_factory.mktemp("broker") / "data"
    process = BrokerProcess(data_dir, settings={"group.initial.rebalance.delay.ms": 0})
    process.start()
    yield process
    process.stop()


class Clock:
    """A settable millisecond clock, passed as `now_ms` to logs, log managers and the cleaner."""

    def __init__(self, now: int = 2_000_000_000_000):
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def topic_name(request) -> str:
    return f"{request.node.name[:40].replace('[', '-').replace(']', '')}-{uuid.uuid4().hex[:8]}"
