"""Bounded structure-aware fuzzing against a real broker process (issue 12; the cases are made in fuzz.py).

In the suite: a fixed seed and a fixed number of cases, so a failure reproduces. `make fuzz` runs this same test
for FUZZ_SECONDS with a random seed that it prints (FUZZ_SEED picks one). Either way the broker must stay up, log
no internal error, answer only with frames that decode, keep its RSS bounded, and a well-behaved client on another
topic must read back everything it wrote."""

from __future__ import annotations

import os
import random

import pytest

from odradek.embedded import BrokerProcess

from . import fuzz

SUITE_SEED = 12
SUITE_CASES = 3000
RSS_GROWTH_LIMIT_MB = 300


@pytest.fixture
def fuzzed_broker(tmp_path):
    process = BrokerProcess(tmp_path / "data", settings={
        "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 2,
        "auto.create.topics.enable": "true"})
    process.start()
    yield process
    process.close()


def test_fuzzed_requests_leave_the_broker_serving(fuzzed_broker):
    seconds = float(os.environ.get("FUZZ_SECONDS", 0)) or None
    seed = int(os.environ.get("FUZZ_SEED") or (random.SystemRandom().randrange(2**32) if seconds else SUITE_SEED))
    print(f"\nfuzz seed {seed} (FUZZ_SEED={seed} reproduces)")
    report = fuzz.run(fuzzed_broker, seed=seed, cases=None if seconds else SUITE_CASES, seconds=seconds,
                      progress=print)
    print(report.summary())
    for finding in report.findings:
        print(finding)
    assert not report.findings, f"{len(report.findings)} findings (seed {seed}); first: {report.findings[0]}"
    assert report.max_rss_mb - report.start_rss_mb < RSS_GROWTH_LIMIT_MB
    assert report.canary_read == report.canary_written > 0
    assert len(report.api_keys) == len(fuzz.API_BY_KEY)
