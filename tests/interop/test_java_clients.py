"""Kafka 4.3.1's Java producer and consumer against one `odradek serve` (the module's `broker`): the scenarios of
ClientScenarios (tests/java/src/odradek/interop/clients), run in one JVM, each asserted here on what a Java user
would notice: records read back once and in order, only committed transactions under read_committed, exactly-once
read-process-write whose aborted round leaves neither output nor offsets, partitions moving between two members
under range, cooperative-sticky and KIP-848's consumer protocol, a static member's restart within its session
keeping its partitions without a rebalance, seeks, offsetsForTimes and committed offsets, every codec and acks
setting, the record size limits, and KIP-848's regex subscription, static member and offsets."""

from __future__ import annotations

import uuid

import pytest

from tests.interop.java_scenarios import passed, run_scenarios

SCENARIOS = ["idempotent_producer", "transactions", "exactly_once", "classic_range", "classic_cooperative_sticky",
             "consumer_protocol", "static_membership", "seek_and_offsets", "codecs_and_limits",
             "consumer_protocol_features"]


@pytest.fixture(scope="module")
def lines(broker):
    return run_scenarios("ClientScenarios", broker.bootstrap_servers, "-", f"jc-{uuid.uuid4().hex[:6]}",
                         scenarios=SCENARIOS)


def test_idempotent_producer_writes_every_record_once_in_order(lines):
    details = passed(lines, "idempotent_producer")
    assert details["idempotent"], "enable.idempotence is the 4.x default: the producer must run idempotent"
    assert details["offsets_in_order"]
    assert (details["sent"], details["read"], details["read_equals_sent"]) == (2000, 2000, True)


def test_read_committed_sees_only_committed_transactions(lines):
    details = passed(lines, "transactions")
    assert details["read_committed"] == [f"{stem}{i}" for stem in "ac" for i in range(10)]
    assert details["read_committed_count"] == 20
    assert details["read_uncommitted_count"] == 30  # the aborted records are in the log, only filtered
    # Odradek advertises no transaction.version feature, so the 4.3 client runs transactions v1 (KIP-890's v2
    # needs the implicit partition add of Produce v12 and EndTxn v5's epoch bump)
    assert details["transaction_v2"] is False


def test_exactly_once_read_process_write(lines):
    details = passed(lines, "exactly_once")
    assert details["processed"] == 50
    assert details["output_equals_input"], details  # the aborted first round left no output behind
    assert details["output_count"] == 50
    assert details["committed_offset"] == 50


@pytest.mark.parametrize("name", ["classic_range", "classic_cooperative_sticky", "consumer_protocol"])
def test_second_member_takes_half_the_partitions(lines, name):
    details = passed(lines, name)
    assert details["first_alone"] and details["split"], details
    assert details["union_size"] == 4 and len(details["first"]) == len(details["second"]) == 2
    assert details["first_assigned"][0] == sorted(details["first"] + details["second"])


def test_cooperative_sticky_revokes_only_what_moves(lines):
    details = passed(lines, "classic_cooperative_sticky")
    # the first revocation is the rebalance's (the second is the close's): only the two partitions that moved
    assert details["first_revoked"][0] == details["second"]


def test_eager_range_revokes_everything_first(lines):
    details = passed(lines, "classic_range")
    assert len(details["first_revoked"][0]) == 4


def test_static_member_restart_keeps_its_partitions(lines):
    details = passed(lines, "static_membership")
    assert details["split"] and details["rejoined"], details
    assert details["same_assignment"], details
    assert details["staying_rebalanced"] is False


def test_seeks_offsets_for_times_and_committed_offsets(lines):
    details = passed(lines, "seek_and_offsets")
    assert details["after_seek_50"] == 50
    assert details["after_seek_to_beginning"] == 0
    assert details["position_at_end"] == 100
    # the first record at or after start + 30.5 s is record 31, at start + 31 s
    assert (details["offset_for_time"], details["offset_for_time_timestamp"]) == (31, 31000)
    assert details["offset_for_future"] == "null"
    assert (details["beginning"], details["end"]) == (0, 100)
    assert (details["committed"], details["committed_metadata"]) == (42, "checkpoint")
    assert details["group_resumes_at"] == 42


def test_every_codec_and_acks_setting_and_the_size_limits(lines):
    details = passed(lines, "codecs_and_limits")
    assert details["sent"] == 250 and details["read_equals_sent"]  # none, gzip, snappy, lz4, zstd; acks 0, 1, all
    assert details["first_header"] == "none"
    errors = "org.apache.kafka.common.errors."
    assert details["over_message_max_bytes"] == errors + "RecordTooLargeException"  # the broker's MESSAGE_TOO_LARGE
    assert details["over_max_request_size"] == errors + "RecordTooLargeException"  # the client's own check
    # a partition the topic does not have: the producer waits for it in metadata until max.block.ms
    assert details["unknown_partition"] == errors + "TimeoutException"
    assert details["partitions_for"] == 1


def test_consumer_protocol_regex_static_member_and_offsets(lines):
    details = passed(lines, "consumer_protocol_features")  # KIP-848: the broker resolves the regex
    assert details["regex_values"] == ["a", "b"] and len(details["regex_assignment"]) == 2
    assert details["committed_a"] == 1  # commitSync under the member epoch
    assert details["txn_committed_a"] == "1/eos"  # sendOffsetsToTransaction with the KIP-848 group's metadata
    assert details["static_rejoined_assignment"] == details["regex_assignment"]
