"""A share group's configs as plain code (odradek/coordinator/share_configs.py): Kafka's checks (INVALID_CONFIG for a
bad value, a value outside the broker's group.share.min/max bounds, an unknown name), ISO-8601 reset durations, and
the settings in force (the group's value, else the broker's synonym)."""

from __future__ import annotations

import pytest

from odradek.config import resolve_broker_config
from odradek.coordinator.share_configs import duration_ms, settings, validate
from odradek.errors import ErrorCode, KafkaError

BROKER = resolve_broker_config({"group.share.record.lock.duration.ms": "20000",
                                "group.share.max.delivery.count.limit": "6"})


@pytest.mark.parametrize("text, ms", [("PT1H", 3_600_000), ("P1DT2M", 86_520_000), ("PT0.25S", 250),
                                      ("pt10s", 10_000), ("PT", None), ("P", None), ("-PT1H", None),
                                      ("PT-1H", None), ("1h", None), ("P1DT", None)])
def test_reset_durations_are_java_duration_text(text, ms):
    assert duration_ms(text) == ms


@pytest.mark.parametrize("configs, message", [
    ({"share.auto.offset.reset": "by_duration:PT-5M"}, "String must be one of"),
    ({"share.isolation.level": "READ_COMMITTED"}, "must be one of read_committed, read_uncommitted"),
    ({"share.record.lock.duration.ms": "999"}, "Value must be at least 1000"),
    ({"share.record.lock.duration.ms": "61000"}, "must be less than or equal to group.share.max.record.lock"),
    ({"share.delivery.count.limit": "7"}, "must be less than or equal to group.share.max.delivery.count.limit"),
    ({"share.session.timeout.ms": "50000"}, "Unknown group config name: share.session.timeout.ms"),
])
def test_refused_configs_are_invalid_config(configs, message):
    with pytest.raises(KafkaError) as refused:
        validate(configs, BROKER)
    assert refused.value.code == ErrorCode.INVALID_CONFIG and message in refused.value.message


def test_settings_are_the_groups_over_the_brokers():
    default = settings({}, BROKER)
    assert (default.lock_duration_ms, default.delivery_limit, default.auto_offset_reset, default.read_committed) == (
        20000, 5, "latest", False)
    own = settings({"share.record.lock.duration.ms": "15000", "share.delivery.count.limit": "6",
                    "share.auto.offset.reset": "by_duration:PT30M", "share.isolation.level": "read_committed"},
                   BROKER)
    assert (own.lock_duration_ms, own.delivery_limit, own.reset_duration_ms, own.read_committed) == (
        15000, 6, 1_800_000, True)
