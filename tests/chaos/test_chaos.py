"""Chaos runs against a real three-broker cluster (tests/chaos/workload.py): the suite's short run with a fixed
seed, a rolling restart under load, and `make chaos`'s long runs (CHAOS_SECONDS, CHAOS_SEED; skipped otherwise).

Topic settings come from CHAOS_RF and CHAOS_MIN_ISR (default 1 and 1, the cluster as it is; 3 and 2 once
replication lands) and CHAOS_UNCLEAN (unclean.leader.election.enable): the same runs then prove replication."""

from __future__ import annotations

import os
import time

import pytest

from .workload import Settings, run, table


def topic_settings() -> dict:
    config = {"min.insync.replicas": os.environ.get("CHAOS_MIN_ISR", "1")}
    if os.environ.get("CHAOS_UNCLEAN"):
        config["unclean.leader.election.enable"] = os.environ["CHAOS_UNCLEAN"]
    return {"replication_factor": int(os.environ.get("CHAOS_RF", "1")), "topic_config": config}


def test_a_short_chaos_run_has_no_anomaly(cluster):
    outcome = run(cluster, Settings(seconds=45, seed=1, **topic_settings()))
    print("\n" + table([outcome]))
    assert len(outcome.faults) >= 3, outcome.faults
    assert outcome.report.acknowledged > 1000
    assert outcome.valid, outcome.summary()


def test_a_rolling_restart_under_load_loses_nothing_and_clients_keep_going(cluster):
    """Each broker stopped cleanly and started again in turn: no acknowledged record lost, and acknowledgements
    never stop for more than a few seconds (the other brokers' partitions keep taking writes)."""
    outcome = run(cluster, Settings(seconds=40, seed=2, faults=("restart",), fault_seconds=(1.0, 1.0),
                                    calm_seconds=(3.0, 3.0), in_turn=True, **topic_settings()))
    print("\n" + table([outcome]))
    assert sorted({node for _, _, node, _ in outcome.faults}) == [1, 2, 3], outcome.faults
    assert outcome.valid, outcome.summary()
    assert outcome.longest_ack_gap < 5, outcome.longest_ack_gap


@pytest.mark.skipif("CHAOS_SECONDS" not in os.environ, reason="make chaos: CHAOS_SECONDS (and CHAOS_SEED)")
def test_long_chaos(cluster):
    """Runs of up to 120 s, seeds CHAOS_SEED, CHAOS_SEED+1, ..., until CHAOS_SECONDS have passed; the table."""
    seconds = float(os.environ["CHAOS_SECONDS"])
    seed = int(os.environ.get("CHAOS_SEED") or time.time_ns() % 1_000_000)
    print(f"\nCHAOS_SEED={seed} CHAOS_SECONDS={seconds:g}")
    deadline = time.monotonic() + seconds
    outcomes = []
    while (left := deadline - time.monotonic()) > 10:
        outcomes.append(run(cluster, Settings(seconds=min(120, left), seed=seed + len(outcomes), **topic_settings())))
        print(table(outcomes[-1:]), flush=True)
    print("\n" + table(outcomes))
    assert all(outcome.valid for outcome in outcomes), [o.summary() for o in outcomes if not o.valid]
