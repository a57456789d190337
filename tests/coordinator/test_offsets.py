"""__consumer_offsets layout and formats, and offset retention rules."""

from __future__ import annotations

from odradek.coordinator.classic import ClassicGroup, ClassicGroupConfig, ClassicMember, GroupState
from odradek.coordinator.offsets import OffsetAndMetadata, OffsetStore
from odradek.coordinator.offsets_topic import (GroupRecord, OffsetRecord, group_metadata_record, java_string_hash,
                                               offset_commit_record, parse_record, partition_for,
                                               restore_classic_group)

CONFIG = ClassicGroupConfig(6000, 1800000, 0, 100)


def test_group_partition_is_javas_hash_masked_not_negated():
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("polygenelubricants") == -2**31  # Math.abs would stay negative; Utils.abs gives 0
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("hello", 50) == 99162322 % 50
    assert java_string_hash("\U0001F600") == (0xD83D * 31 + 0xDE00)  # UTF-16 code units, like Java


def test_offset_commit_records_use_kafka_versions_and_round_trip():
    committed = OffsetAndMetadata(42, 3, "meta", 1000)
    key, value = offset_commit_record("g", "t", 7, committed)
    assert key[:2] == b"\x00\x01" and value[:2] == b"\x00\x03"
    assert parse_record(key, value) == OffsetRecord("g", "t", 7, committed)
    explicit = committed._replace(expire_timestamp_ms=5000)
    key, value = offset_commit_record("g", "t", 7, explicit)
    assert value[:2] == b"\x00\x01" and parse_record(key, value).committed.expire_timestamp_ms == 5000
    key, tombstone = offset_commit_record("g", "t", 7, None)
    assert tombstone is None and parse_record(key, None) == OffsetRecord("g", "t", 7, None)


def test_group_metadata_round_trips_into_a_stable_group():
    group = ClassicGroup("g", CONFIG, 0)
    group.protocol_type, group.protocol_name, group.generation, group.leader = "consumer", "range", 4, "m1"
    group.members["m1"] = ClassicMember("m1", "i1", "client", "/10.0.0.1", 10000, 30000, "consumer",
                                        [("range", b"sub")], b"assigned")
    key, value = group_metadata_record("g", group)
    assert key[:2] == b"\x00\x02" and value[:2] == b"\x00\x03"
    record = parse_record(key, value)
    assert isinstance(record, GroupRecord)
    restored = restore_classic_group("g", record.value, CONFIG, now_ms=100)
    assert restored.state is GroupState.STABLE and restored.generation == 4 and restored.leader == "m1"
    member = restored.members["m1"]
    assert (member.instance_id, member.metadata("range"), member.assignment) == ("i1", b"sub", b"assigned")
    assert restored.static_members == {"i1": "m1"}
    assert parse_record(*group_metadata_record("g", None)) == GroupRecord("g", None)


def test_retention_counts_from_empty_time_or_commit_time_and_honours_explicit_expiry():
    store = OffsetStore()
    store.commit("g", ("t", 0), OffsetAndMetadata(1, -1, "", commit_timestamp_ms=100), 0)
    store.commit("g", ("t", 1), OffsetAndMetadata(1, -1, "", commit_timestamp_ms=100, expire_timestamp_ms=150), 0)
    assert store.expired("g", 200, retention_ms=1000, empty_since_ms=None) == [("t", 1)]
    assert store.expired("g", 1100, retention_ms=1000, empty_since_ms=None) == [("t", 0), ("t", 1)]
    assert store.expired("g", 1100, retention_ms=1000, empty_since_ms=500) == [("t", 1)]
    store.remove("g", ("t", 0))
    store.remove("g", ("t", 1))
    assert not store.has_offsets("g")


def test_a_commit_written_before_the_one_held_does_not_replace_it():
    """Appends complete out of order (the waits for the in-sync replicas, a transaction's marker): the record's log
    offset decides, as Kafka's olderThan."""
    store = OffsetStore()
    assert store.commit("g", ("t", 0), OffsetAndMetadata(50, -1, "", 0), 149)
    assert not store.commit("g", ("t", 0), OffsetAndMetadata(11, -1, "", 0), 110)
    assert store.get("g", ("t", 0)).offset == 50
    assert store.commit("g", ("t", 0), OffsetAndMetadata(51, -1, "", 0), 150)
    store.remove("g", ("t", 0))
    assert store.commit("g", ("t", 0), OffsetAndMetadata(7, -1, "", 0), 20)  # a removed offset holds no position
    assert store.get("g", ("t", 0)).offset == 7
