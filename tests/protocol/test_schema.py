"""The generated classes and the DSL's own rules."""

from __future__ import annotations

import pytest

from odradek.protocol.apis import (ConsumerGroupDescribeResponse, FetchRequest, MetadataResponse, ProduceResponse)
from odradek.protocol.schema import INT32, NEW, STRING, ZERO_UUID, array, field, message, struct


def test_nested_structs_are_class_attributes():
    assert ProduceResponse.TopicProduceResponse.__name__ == "TopicProduceResponse"
    assert ProduceResponse.PartitionProduceResponse.__name__ == "PartitionProduceResponse"
    assert MetadataResponse.MetadataResponseBroker.__name__ == "MetadataResponseBroker"
    # a common struct used in several places is one class
    assert ConsumerGroupDescribeResponse.Member._schema.fields[8].type is ConsumerGroupDescribeResponse.Assignment


def test_defaults_slots_eq_repr():
    p = ProduceResponse.PartitionProduceResponse(index=1)
    assert (p.log_append_time_ms, p.error_message, p.record_errors) == (-1, None, [])
    assert p.current_leader == ProduceResponse.LeaderIdAndEpoch(leader_id=-1, leader_epoch=-1)
    assert FetchRequest().max_bytes == 0x7FFFFFFF and FetchRequest.FetchTopic().topic_id == ZERO_UUID
    assert MetadataResponse().cluster_authorized_operations == -2147483648
    with pytest.raises(AttributeError):
        p.not_a_field = 1
    with pytest.raises(TypeError):
        ProduceResponse.PartitionProduceResponse(1)  # keyword-only
    assert p == ProduceResponse.PartitionProduceResponse(index=1) and p != ProduceResponse.PartitionProduceResponse()
    assert repr(p).startswith("PartitionProduceResponse(index=1, error_code=0,")


def test_mutable_defaults_are_fresh():
    a, b = ProduceResponse.PartitionProduceResponse(), ProduceResponse.PartitionProduceResponse()
    a.record_errors.append(1)
    assert b.record_errors == [] and a.current_leader is not b.current_leader


def test_the_constructor_refuses_what_the_schema_lacks_and_takes_the_new_marker_as_not_given():
    Partition = ProduceResponse.PartitionProduceResponse
    with pytest.raises(TypeError, match="unexpected keyword argument 'base_ofset'"):
        Partition(index=1, base_ofset=5)
    with pytest.raises(TypeError, match="keyword arguments only"):
        Partition(1, base_offset=5)
    p = Partition(index=2, record_errors=NEW, current_leader=NEW, error_message="x")
    assert (p.index, p.record_errors, p.error_message, p.current_leader.leader_id) == (2, [], "x", -1)
    given = [ProduceResponse.BatchIndexAndErrorMessage(batch_index=3)]
    assert Partition(record_errors=given).record_errors is given  # a given value is kept, not copied


def test_init_called_again_resets_every_field_not_given():
    p = ProduceResponse.PartitionProduceResponse(index=4, base_offset=9)
    ProduceResponse.PartitionProduceResponse.__init__(p, base_offset=10)
    assert (p.index, p.base_offset) == (0, 10)
    p.__init__(index=5)
    assert (p.index, p.base_offset) == (5, 0)
    with pytest.raises(TypeError):
        ProduceResponse.PartitionProduceResponse.__init__(FetchRequest(), index=1)  # not one of its objects


def test_a_subclass_constructs_through_its_own_init():
    class Tagged(ProduceResponse.PartitionProduceResponse):
        __slots__ = ("note",)

        def __init__(self, note, **fields):
            super().__init__(**fields)
            self.note = note
    t = Tagged("n", index=3)
    assert (t.note, t.index, t.base_offset, t.record_errors) == ("n", 3, 0, [])


def test_two_different_structs_with_one_name_are_refused():
    one = struct("Item", [field("a", INT32, "0+")])
    other = struct("Item", [field("b", STRING, "0+")])
    with pytest.raises(ValueError, match="two different structs named Item"):
        message("Bad", valid_versions="0", flexible_versions="none",
                fields=[field("x", array(one), "0+"), field("y", array(other), "0+")])
