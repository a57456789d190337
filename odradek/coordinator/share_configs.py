"""A share group's configs: the share.* keys of Kafka's GroupConfig that Odradek serves on a GROUP config resource.

Kafka keeps a group's configs beside its topics' (a ConfigRecord of resource type GROUP); Odradek keeps them in the
catalogue (odradek/cluster/metadata.py, `group_configs`) and describes and alters them through DescribeConfigs and
IncrementalAlterConfigs (odradek/broker/handlers/configs.py). This module is what they mean, plain code: the keys
with Kafka 4.3's names, defaults and ranges, the checks Kafka's GroupConfig.validate makes (an unknown name, a bad
value, a value outside the broker's group.share.min/max.* bounds: INVALID_CONFIG), and the settings in force for a
group (`settings`): its own value of a key, else the broker's synonym (group.share.record.lock.duration.ms...),
else Kafka's default.

share.auto.offset.reset is where a share-partition with no state starts: `latest` (the high watermark), `earliest`
(the log start) or `by_duration:<ISO-8601 duration>` (the first record at most that long ago, PnDTnHnMn.nS as Java's
Duration.parse reads it, not negative). share.isolation.level read_committed makes a share-partition read up to the
last stable offset and archive the records of aborted transactions instead of delivering them.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from odradek.config import ConfigKey, ConfigType
from odradek.errors import ErrorCode, KafkaError

AUTO_OFFSET_RESET = "share.auto.offset.reset"
ISOLATION_LEVEL = "share.isolation.level"
LOCK_DURATION = "share.record.lock.duration.ms"
DELIVERY_LIMIT = "share.delivery.count.limit"
READ_COMMITTED, READ_UNCOMMITTED = "read_committed", "read_uncommitted"
BY_DURATION = "by_duration:"

# Java's Duration.parse, without its negative parts (a reset duration may not be negative)
_DURATION = re.compile(r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE)


def duration_ms(text: str) -> int | None:
    """An ISO-8601 duration (P1D, PT1H30M, PT0.5S) in ms; None if it is not one."""
    match = _DURATION.fullmatch(text.strip())
    if match is None or not any(match.groups()[:4]) or text.strip().upper().endswith("T"):
        return None
    days, hours, minutes, seconds, fraction = match.groups()
    ms = ((int(days or 0) * 24 + int(hours or 0)) * 60 + int(minutes or 0)) * 60_000 + int(seconds or 0) * 1000
    return ms + int((fraction or "").ljust(3, "0")[:3] or 0)


def _offset_reset_refusal(value: str) -> str | None:
    if value in ("latest", "earliest"):
        return None
    if value.startswith(BY_DURATION) and duration_ms(value[len(BY_DURATION):]) is not None:
        return None
    return "String must be one of: latest, earliest, by_duration:PnDTnHnMn.nS"


GROUP_CONFIGS: dict[str, ConfigKey] = {key.name: key for key in (
    ConfigKey(AUTO_OFFSET_RESET, ConfigType.STRING, "latest", "Where a share-partition without state starts: "
              "latest, earliest or by_duration:<ISO-8601 duration>", check=_offset_reset_refusal),
    ConfigKey(ISOLATION_LEVEL, ConfigType.STRING, READ_UNCOMMITTED, "read_committed delivers no record of an "
              "aborted transaction and reads up to the last stable offset",
              choices=(READ_COMMITTED, READ_UNCOMMITTED)),
    ConfigKey(LOCK_DURATION, ConfigType.INT, 30000, "How long a member holds an acquired record",
              broker_synonyms=("group.share.record.lock.duration.ms",), minimum=1000),
    ConfigKey(DELIVERY_LIMIT, ConfigType.INT, 5, "Deliveries of a record before it is archived",
              broker_synonyms=("group.share.delivery.count.limit",), minimum=2),
)}
# the broker keys a group's value must lie between, as Kafka's GroupConfig.validateValues checks
BOUNDS = {LOCK_DURATION: ("group.share.min.record.lock.duration.ms", "group.share.max.record.lock.duration.ms"),
          DELIVERY_LIMIT: ("group.share.min.delivery.count.limit", "group.share.max.delivery.count.limit")}


@dataclasses.dataclass(frozen=True)
class ShareGroupSettings:
    lock_duration_ms: int
    delivery_limit: int
    auto_offset_reset: str  # latest, earliest or by_duration:<duration>
    read_committed: bool

    @property
    def reset_duration_ms(self) -> int | None:
        """by_duration's duration in ms; None for latest and earliest."""
        if not self.auto_offset_reset.startswith(BY_DURATION):
            return None
        return duration_ms(self.auto_offset_reset[len(BY_DURATION):])


def group_config_key(name: str) -> ConfigKey:
    key = GROUP_CONFIGS.get(name)
    if key is None:
        raise KafkaError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    return key


def validate(configs: Mapping[str, str], broker_config: Mapping) -> None:
    """KafkaError(INVALID_CONFIG) unless every name is a served group config with a value Kafka takes."""
    for name, raw in configs.items():
        value = group_config_key(name).parse(raw)
        if name in BOUNDS:
            lowest, highest = BOUNDS[name]
            if value < broker_config[lowest]:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} must be greater than or equal to {lowest}")
            if value > broker_config[highest]:
                raise KafkaError(ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {highest}")


def value_in_force(name: str, configs: Mapping[str, str], broker_config: Mapping):
    """The group's value of `name`, else its broker synonym's, else Kafka's default."""
    key = GROUP_CONFIGS[name]
    if name in configs:
        return key.parse(configs[name])
    for synonym in key.broker_synonyms:
        return broker_config[synonym]
    return key.default


def settings(configs: Mapping[str, str], broker_config: Mapping) -> ShareGroupSettings:
    """What a group with these stored configs runs with."""
    return ShareGroupSettings(
        lock_duration_ms=value_in_force(LOCK_DURATION, configs, broker_config),
        delivery_limit=value_in_force(DELIVERY_LIMIT, configs, broker_config),
        auto_offset_reset=value_in_force(AUTO_OFFSET_RESET, configs, broker_config),
        read_committed=value_in_force(ISOLATION_LEVEL, configs, broker_config) == READ_COMMITTED)
