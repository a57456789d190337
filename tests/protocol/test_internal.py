"""Internal record schemas: byte layouts Kafka writes, kafka-python as oracle for the consumer protocol."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as KpAssignment
from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as KpSubscription

from odradek.protocol import ProtocolError
from odradek.protocol.internal import (CONSUMER_OFFSETS_KEY, ConsumerProtocolAssignment,
                                       ConsumerProtocolSubscription, GroupMetadataKey, GroupMetadataValue,
                                       OffsetCommitKey, OffsetCommitValue, TransactionLogKey,
                                       TransactionLogValue, decode_versioned, encode_versioned)

from .oracle import message_strategy, plain, to_kafka_python

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True)


@pytest.mark.parametrize("cls,kp_cls", [(ConsumerProtocolSubscription, KpSubscription),
                                        (ConsumerProtocolAssignment, KpAssignment)])
@pytest.mark.parametrize("version", range(4))
def test_consumer_protocol_against_kafka_python(cls, kp_cls, version):
    @SETTINGS
    @given(message_strategy(cls, version))
    def check(obj):
        ours = encode_versioned(cls, version, obj)
        assert plain(kp_cls.decode(ours), cls, version) == plain(obj, cls, version)
        theirs = to_kafka_python(obj, kp_cls, version).encode(version=version)
        assert theirs == ours
        assert decode_versioned(cls, theirs) == (version, obj)
    check()


@pytest.mark.parametrize("cls,versions", [
    (OffsetCommitKey, range(2)), (GroupMetadataKey, [2]), (OffsetCommitValue, range(5)),
    (GroupMetadataValue, range(5)), (TransactionLogKey, [0]), (TransactionLogValue, range(2))])
def test_roundtrip_every_version(cls, versions):
    for version in versions:
        @SETTINGS
        @given(message_strategy(cls, version))
        def check(obj):
            data = encode_versioned(cls, version, obj)
            got_version, got = decode_versioned(cls, data)
            assert got_version == version and plain(got, cls, version) == plain(obj, cls, version)
        check()


def test_consumer_offsets_key_family_picks_the_record_type():
    commit = encode_versioned(OffsetCommitKey, 1, OffsetCommitKey(group="g", topic="t", partition=3))
    assert commit == struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 3)
    assert decode_versioned(CONSUMER_OFFSETS_KEY, commit) == (1, OffsetCommitKey(group="g", topic="t", partition=3))
    group = encode_versioned(GroupMetadataKey, 2, GroupMetadataKey(group="g"))
    assert group == struct.pack(">hh", 2, 1) + b"g"
    assert decode_versioned(CONSUMER_OFFSETS_KEY, group) == (2, GroupMetadataKey(group="g"))
    with pytest.raises(ProtocolError):
        decode_versioned(CONSUMER_OFFSETS_KEY, struct.pack(">hh", 7, 1) + b"g")


def test_offset_commit_value_layouts():
    value = OffsetCommitValue(offset=10, leader_epoch=4, metadata="m", commit_timestamp=5, expire_timestamp=6)
    assert encode_versioned(OffsetCommitValue, 1, value) == struct.pack(">hqh", 1, 10, 1) + b"m" + struct.pack(
        ">qq", 5, 6)
    assert encode_versioned(OffsetCommitValue, 3, value) == struct.pack(">hqih", 3, 10, 4, 1) + b"m" + struct.pack(
        ">q", 5)
    # v4 is flexible: compact string and an empty tag section
    assert encode_versioned(OffsetCommitValue, 4, value) == struct.pack(">hqi", 4, 10, 4) + b"\x02m" + struct.pack(
        ">q", 5) + b"\x00"


def test_transaction_log_value_tagged_fields():
    value = TransactionLogValue(producer_id=1, previous_producer_id=7, producer_epoch=2, transaction_status=1,
                                transaction_partitions=None)
    data = encode_versioned(TransactionLogValue, 1, value)
    assert data.endswith(b"\x01" + b"\x00\x08" + struct.pack(">q", 7))  # one tagged field: tag 0, 8 bytes
    _, decoded = decode_versioned(TransactionLogValue, data)
    assert decoded == value
    with pytest.raises(ProtocolError, match="previous_producer_id"):  # tagged fields exist from v1 only
        encode_versioned(TransactionLogValue, 0, value)


def test_newer_consumer_protocol_versions_read_as_the_newest_known():
    data = encode_versioned(ConsumerProtocolSubscription, 3, ConsumerProtocolSubscription(topics=["a"]))
    newer = struct.pack(">h", 9) + data[2:] + b"future fields"
    assert decode_versioned(ConsumerProtocolSubscription, newer) == (9, ConsumerProtocolSubscription(topics=["a"]))


def test_truncated_internal_records_are_protocol_errors():
    data = encode_versioned(GroupMetadataValue, 3, GroupMetadataValue(members=[GroupMetadataValue.MemberMetadata()]))
    for end in range(len(data)):
        with pytest.raises(ProtocolError):
            decode_versioned(GroupMetadataValue, data[:end])
