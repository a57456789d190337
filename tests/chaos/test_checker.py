"""The checker on synthetic histories: a clean one (with the gaps and rewinds Kafka allows) has no anomaly, and each
of Jepsen's classes is detected, alone, in a history built to have exactly that one."""

from __future__ import annotations

import pytest

from .checker import ANOMALIES, Op, check


def send(value: bytes, partition: int, offset: int, process: str = "producer-0") -> list[Op]:
    return [Op(process, "send", "invoke", value=value),
            Op(process, "send", "ok", value=value, partition=partition, offset=offset)]


def poll(process: str, *records, read_committed: bool = False) -> Op:
    return Op(process, "poll", "ok", records=tuple(records), read_committed=read_committed)


def final(*records) -> Op:
    return poll("final", *records)


def clean_history() -> list[Op]:
    """Two partitions; partition 0 has a gap at offset 2 (a transaction marker), which no read skips over."""
    return [*send(b"a", 0, 0), *send(b"b", 0, 1), *send(b"c", 0, 3), *send(b"x", 1, 0),
            Op("consumer", "assign", "ok", partitions=(0, 1)),
            poll("consumer", (0, 0, b"a"), (0, 1, b"b"), (1, 0, b"x")),
            poll("consumer", (0, 3, b"c")),
            Op("consumer", "assign", "ok", partitions=(0,)),  # a rebalance: back to the committed offset
            poll("consumer", (0, 1, b"b"), (0, 3, b"c")),
            final((0, 0, b"a"), (0, 1, b"b"), (0, 3, b"c"), (1, 0, b"x"))]


def only(report, name: str) -> list:
    assert {k for k, v in report.counts().items() if v} == {name}, report.summary()
    return report.anomalies[name]


def test_a_clean_history_has_no_anomaly():
    report = check(clean_history())
    assert report.valid, report.summary()
    assert (report.acknowledged, report.polled_records, report.final_records) == (4, 6, 4)


def test_a_failed_send_that_was_written_anyway_is_no_anomaly():
    history = [*send(b"a", 0, 0), Op("p", "send", "invoke", value=b"t"), Op("p", "send", "fail", value=b"t",
               error="_MSG_TIMED_OUT"), final((0, 0, b"a"), (0, 1, b"t"))]
    report = check(history)
    assert report.valid and report.unacknowledged_seen == 1 and report.failed == 1


def test_lost_write():
    history = [*send(b"a", 0, 0), *send(b"b", 0, 1), final((0, 0, b"a"))]
    assert only(check(history), "lost-write") == [(b"b", (0, 1))]


def test_duplicate():
    history = [*send(b"a", 0, 0), final((0, 0, b"a"), (0, 1, b"a"))]
    assert only(check(history), "duplicate") == [(b"a", [(0, 0), (0, 1)])]


def test_inconsistent_offsets_between_two_reads():
    """A consumer read b at offset 1, then the log (after an unclean election, say) holds c there."""
    history = [*send(b"a", 0, 0), Op("p", "send", "invoke", value=b"b"), Op("p", "send", "info", value=b"b"),
               Op("p", "send", "invoke", value=b"c"), Op("p", "send", "info", value=b"c"),
               poll("consumer", (0, 0, b"a"), (0, 1, b"b")), final((0, 0, b"a"), (0, 1, b"c"))]
    assert only(check(history), "inconsistent-offsets") == [((0, 1), [b"b", b"c"])]


def test_inconsistent_offsets_between_an_ack_and_the_log():
    history = [*send(b"a", 0, 0), *send(b"b", 0, 0), final((0, 0, b"a"), (0, 1, b"b"))]
    assert only(check(history), "inconsistent-offsets") == [((0, 0), [b"a", b"b"])]


@pytest.mark.parametrize("polls", [
    [poll("c", (0, 0, b"a"), (0, 1, b"b")), poll("c", (0, 1, b"b"))],   # one poll to the next
    [poll("c", (0, 1, b"b"), (0, 0, b"a"))],                            # within a poll
], ids=["across-polls", "within-a-poll"])
def test_nonmonotonic_poll(polls):
    history = [*send(b"a", 0, 0), *send(b"b", 0, 1), Op("c", "assign", "ok", partitions=(0,)), *polls,
               final((0, 0, b"a"), (0, 1, b"b"))]
    assert len(only(check(history), "nonmonotonic-poll")) == 1


def test_poll_skip():
    history = [*send(b"a", 0, 0), *send(b"b", 0, 1), *send(b"c", 0, 2), poll("c", (0, 0, b"a"), (0, 2, b"c")),
               final((0, 0, b"a"), (0, 1, b"b"), (0, 2, b"c"))]
    assert only(check(history), "poll-skip") == [("c", 0, 0, 2, 1)]


def test_aborted_read_only_under_read_committed():
    history = [Op("t", "txn", "invoke", values=(b"a",)), Op("t", "txn", "fail", values=(b"a",)),
               poll("committed", (0, 0, b"a"), read_committed=True), poll("uncommitted", (0, 0, b"a"))]
    assert only(check(history), "aborted-read") == [("committed", (0, 0, b"a"))]


def test_every_class_is_reported_in_the_counts():
    assert set(check([]).counts()) == set(ANOMALIES)


def test_a_committed_transaction_s_value_never_read_is_lost():
    history = [Op("t", "txn", "invoke", values=(b"a", b"b")), Op("t", "txn", "ok", values=(b"a", b"b")),
               final((0, 0, b"a"))]
    assert only(check(history), "lost-write") == [(b"b", None)]


def test_an_acknowledgement_without_an_offset_counts_as_acknowledged():
    """librdkafka delivers a retried send the broker had already written with no offset (None): it is acknowledged
    all the same, lost if no read has it, and names no position (the checker once failed sorting offsets on it)."""
    history = clean_history() + [Op("producer-0", "send", "invoke", value=b"retried"),
                                 Op("producer-0", "send", "ok", value=b"retried", partition=1, offset=None)]
    report = check(history)
    assert report.acknowledged == 5
    assert only(report, "lost-write") == [(b"retried", (1, None))]


def test_only_duplicates_one_producer_wrote_in_rising_epochs_count_as_renumbered(tmp_path):
    """librdkafka's epoch bump renumbers messages it cannot know the fate of; a copy in the same epoch, or from
    another producer id, is the broker's duplicate and must stay an anomaly."""
    from odradek.records.batch import Record, encode_batch

    from .workload import renumbered_by_epoch_bumps

    def written(base_offset: int, count: int, producer_id: int, epoch: int) -> bytes:
        return encode_batch([Record(index, 0, None, b"v") for index in range(count)], base_offset=base_offset,
                            producer_id=producer_id, producer_epoch=epoch, base_sequence=0)

    partition_dir = tmp_path / "broker-1" / "t-0"
    partition_dir.mkdir(parents=True)
    (partition_dir / "00000000000000000000.log").write_bytes(
        written(0, 3, 7, 0) + written(3, 3, 7, 1) + written(6, 1, 8, 0))
    (partition_dir / "00000000000000000007.log").write_bytes(written(7, 2, 7, 1))
    duplicates = [(b"bumped", [(0, 1), (0, 7)]), (b"same-epoch", [(0, 4), (0, 8)]),
                  (b"two-producers", [(0, 2), (0, 6)]), (b"unknown-offset", [(0, 0), (0, 99)])]
    found = renumbered_by_epoch_bumps([tmp_path / "missing", tmp_path / "broker-1"], "t", duplicates)
    assert found == [(b"bumped", [(0, 1), (0, 7)], [(7, 0), (7, 1)])]
