"""The benchmark table's judgement of a row: a goal against one named peer (small requests: 2x Tansu) rather than
the best one, a goal against Kafka judged by the better of its two configurations while the best peer stays the best
broker without a JVM, and figures that describe rather than rank (cores busy) get no ratio to the peers."""

from __future__ import annotations

from bench.measure import KAFKA, Results
from bench.suite import Goal


def rows() -> dict[str, dict]:
    results = Results()
    for broker, rate, busy in (("odradek", 30_000, 0.9), ("tansu", 10_000, 0.8), ("noida-db", 100_000, 0.3)):
        results.add("small requests", "produce requests, 1 record each", broker, rate, unit="requests/s")
        results.add("small requests", "broker cores busy, produce requests", broker, busy, unit="cores", better=None)
    return {row["metric"]: row for row in results.rows()}


def test_a_goal_against_a_named_peer_compares_with_that_peer_not_the_best():
    row = rows()["produce requests, 1 record each"]
    assert row["best_peer"] == "noida-db"
    assert Goal("small requests", "produce requests", ">=2x Tansu", ratio=2.0, peer="tansu").check(row) == \
        ">=2x Tansu: met 3.00x/2.0x tansu"
    assert Goal("small requests", "produce requests", ">=1.5x best", ratio=1.5).check(row) == \
        ">=1.5x best: MISSED 0.30x/1.5x best peer"


def test_cores_busy_has_no_ratio_to_the_peers():
    row = rows()["broker cores busy, produce requests"]
    assert row["ratio_to_best_peer"] is None and row["best_peer"] is None
    assert row["summary"]["odradek"]["median"] == 0.9


def test_kafka_is_judged_by_its_better_configuration_and_is_not_the_best_peer():
    results = Results()
    for broker, ready in (("odradek", 0.5), ("tansu", 0.1), ("kafka", 12.0), ("kafka-tuned", 8.0)):
        results.add("startup", "ready, empty", broker, ready, unit="s", better="lower")
    [row] = results.rows()
    assert (row["best_peer"], row["ratio_to_best_peer"]) == ("tansu", 0.2)
    assert (row["kafka"], row["ratio_to_kafka"]) == ("kafka-tuned", 16.0)
    assert Goal("startup", "ready, empty", "<= 1/20 of Kafka's", ratio=20.0, peer=KAFKA).check(row) == \
        "<= 1/20 of Kafka's: MISSED 16.00x/20.0x kafka-tuned"
