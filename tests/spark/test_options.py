"""Option parsing, range splitting and the per-trigger rate limit: Spark's Kafka rules, without a session."""

from __future__ import annotations

import pytest

pytest.importorskip("pyspark")

from odradek.spark.kafka_io import OffsetRange  # noqa: E402
from odradek.spark.options import OptionError, parse_sink_options, parse_source_options  # noqa: E402
from odradek.spark.source import _rate_limit, split_ranges  # noqa: E402
from tests.security.conftest import certificates  # noqa: E402,F401 (a fixture: a CA for the TLS options)

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "a,b"}


def test_defaults_follow_spark():
    batch = parse_source_options(BASE, streaming=False)
    assert batch.subscription.topics == ("a", "b")
    assert (batch.starting.kind, batch.ending.kind) == ("earliest", "latest")
    assert batch.fail_on_data_loss and not batch.include_headers
    assert batch.client_config == {"bootstrap.servers": "127.0.0.1:9092"}
    streaming = parse_source_options(BASE, streaming=True)
    assert streaming.starting.kind == "latest" and streaming.ending is None


def test_timestamps_take_precedence_over_offsets():
    options = parse_source_options({**BASE, "startingOffsets": "earliest", "startingOffsetsByTimestamp":
                                    '{"a":{"0":5}}', "startingTimestamp": "7"}, streaming=False)
    assert (options.starting.kind, options.starting.timestamp) == ("timestamp", 7)
    options = parse_source_options({**BASE, "startingOffsetsByTimestamp": '{"a":{"0":5}}'}, streaming=False)
    assert options.starting.per_partition == {("a", 0): 5}


@pytest.mark.parametrize("options, message", [
    ({"subscribe": "a"}, "kafka.bootstrap.servers: required"),
    ({"kafka.bootstrap.servers": "x:1"}, "exactly one is required, got none"),
    ({**BASE, "assign": '{"a":[0]}'}, "exactly one is required, got subscribe, assign"),
    ({**BASE, "kafka.group.id": "g"}, "kafka.group.id: not supported"),
    ({**BASE, "kafka.auto.offset.reset": "earliest"}, "kafka.auto.offset.reset: not supported"),
    ({**BASE, "kafka.enable.auto.commit": "true"}, "kafka.enable.auto.commit: not supported"),
    ({**BASE, "kafka.value.deserializer": "x"}, "kafka.value.deserializer: not supported"),
    ({**BASE, "kafka.security.protocol": "SASL_SSL"}, "kafka.sasl.mechanism: GSSAPI is not spoken"),
    ({**BASE, "kafka.security.protocol": "TLS"}, "kafka.security.protocol: 'TLS' is not one of"),
    ({**BASE, "kafka.sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required;"},
     "kafka.sasl.jaas.config 'com.sun.security.auth.module.Krb5LoginModule': only PlainLoginModule"),
    ({**BASE, "kafka.ssl.truststore.location": "/x.jks"}, "kafka.ssl.truststore.type JKS cannot be read"),
    ({**BASE, "startingOffsets": "first"}, "startingOffsets: expected earliest, latest or JSON"),
    ({**BASE, "startingOffsets": "latest"}, "startingOffsets: latest is not valid"),
    ({**BASE, "startingOffsets": '{"a":{"0":-1}}'}, "startingOffsets: latest is not valid"),
    ({**BASE, "endingOffsets": "earliest"}, "endingOffsets: earliest is not valid"),
    ({**BASE, "endingOffsets": '{"a":{"0":-3}}'}, "endingOffsets: offsets must be >= 0"),
    ({**BASE, "minPartitions": "0"}, "minPartitions: must be a positive integer"),
    ({**BASE, "includeHeaders": "yes"}, "includeHeaders: expected true or false"),
    ({**BASE, "subscribePattern": "("} , "exactly one is required"),
    ({"kafka.bootstrap.servers": "x:1", "subscribePattern": "("}, "subscribePattern: not a valid regular"),
    ({"kafka.bootstrap.servers": "x:1", "assign": '{"a":0}'}, "assign: expected a list of partition numbers"),
])
def test_bad_options_fail_in_one_line_naming_the_option(options, message):
    with pytest.raises(OptionError) as failure:
        parse_source_options(options, streaming=False)
    assert message in str(failure.value) and "\n" not in str(failure.value)


def test_spark_connector_security_options_are_translated_and_never_shown(certificates):
    """kafka.* in Java's names, as Spark's connector takes them, become librdkafka's; the password shows in no
    repr, and in no error: a sink given a JKS truststore says so without echoing the JAAS entry."""
    secured = {**BASE, "kafka.security.protocol": "SASL_SSL", "kafka.sasl.mechanism": "SCRAM-SHA-512",
               "kafka.sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                                         'username="alice" password="hunter2";',
               "kafka.ssl.truststore.type": "PEM", "kafka.ssl.truststore.location": certificates.path("ca.pem")}
    options = parse_source_options(secured, streaming=False)
    assert options.client_config == {"bootstrap.servers": "127.0.0.1:9092", "security.protocol": "SASL_SSL",
                                     "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "alice",
                                     "sasl.password": "hunter2",
                                     "ssl.ca.location": certificates.path("ca.pem")}
    given_back = {f"kafka.{key}": value for key, value in options.client_config.items()}  # as the pipelines do
    assert parse_source_options({**BASE, **given_back}, streaming=False).client_config == options.client_config
    assert "hunter2" not in repr(options) and "hunter2" not in repr(parse_sink_options({**secured, "topic": "t"}))
    with pytest.raises(OptionError) as refused:
        parse_sink_options({**secured, "topic": "t", "kafka.ssl.truststore.type": "JKS"})
    assert "hunter2" not in str(refused.value)


def test_streaming_rejects_ending_offsets():
    with pytest.raises(OptionError, match="endingOffsets: not valid for streaming"):
        parse_source_options({**BASE, "endingOffsets": "latest"}, streaming=True)


def test_sink_options():
    assert parse_sink_options({"kafka.bootstrap.servers": "x:1", "topic": "t"}).topic == "t"
    with pytest.raises(OptionError, match="kafka.key.serializer: not supported"):
        parse_sink_options({"kafka.bootstrap.servers": "x:1", "kafka.key.serializer": "s"})


def test_min_partitions_splits_big_ranges_in_proportion():
    ranges = [OffsetRange("t", 0, 0, 10), OffsetRange("t", 1, 0, 30), OffsetRange("t", 2, 5, 1000),
              OffsetRange("t", 3, 7, 7)]
    pieces = split_ranges(ranges, 6)
    assert [(r.partition, r.size) for r in pieces if r.partition < 2] == [(0, 10), (1, 30)]
    big = [r for r in pieces if r.partition == 2]
    assert len(big) == 6 and big[0].start == 5 and big[-1].end == 1000
    assert all(a.end == b.start for a, b in zip(big, big[1:]))
    assert split_ranges(ranges, 2) == ranges[:3]  # enough ranges already; the empty one is dropped


def test_rate_limit_splits_by_lag_without_starving_small_partitions():
    starts = {("t", 0): 0, ("t", 1): 0, ("t", 2): 100}
    ends = {("t", 0): 900, ("t", 1): 99, ("t", 2): 101}
    limited = _rate_limit(starts, ends, 100)
    assert limited == {("t", 0): 90, ("t", 1): 9, ("t", 2): 101}
    assert _rate_limit(starts, ends, 10_000) == ends
