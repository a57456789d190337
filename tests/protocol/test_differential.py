"""Differential tests: our codec against kafka-python (every API and version it defines that we advertise) and
kio (the APIs kafka-python lacks), both directions, with hypothesis values derived from our schemas."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from odradek.protocol import API_BY_KEY
from odradek.protocol.codec import decoder, encoder

from .oracle import (kafka_python_class, kio_class, kio_roundtrip, message_strategy, plain, to_kafka_python)

SETTINGS = settings(max_examples=12, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _encode(cls, version, obj) -> bytes:
    w: list = []
    encoder(cls, version)(obj, w)
    return b"".join(w)


def _decode(cls, version, data):
    obj, end = decoder(cls, version)(memoryview(data), 0)
    assert end == len(data)
    return obj


def _cases(oracle_has):
    for a in sorted(API_BY_KEY.values(), key=lambda a: a.key):
        for kind in ("request", "response"):
            for version in range(a.min_version, a.max_version + 1):
                if oracle_has(a, kind, version):
                    yield pytest.param(a, kind, version, id=f"{a.name}{kind.title()}-v{version}")


def _kafka_python_has(a, kind, version):
    kp = kafka_python_class(a.key, kind)
    return kp is not None and version <= kp.max_version


def _kio_has(a, kind, version):
    return kafka_python_class(a.key, kind) is None


def _without_error(obj):
    obj.error_code = 0
    return obj


@pytest.mark.parametrize("api,kind,version", list(_cases(_kafka_python_has)))
def test_against_kafka_python(api, kind, version):
    cls = getattr(api, kind)
    kp_cls = kafka_python_class(api.key, kind)
    skip_tagged = not cls._schema.write_tagged
    strategy = message_strategy(cls, version)
    if api.key == 18 and kind == "response":
        # kafka-python reads any ApiVersions response with an error as v0 (what a broker sends on error)
        strategy = strategy.map(_without_error)

    @SETTINGS
    @given(strategy)
    def check(obj):
        expected = plain(obj, cls, version, skip_tagged)
        ours = _encode(cls, version, obj)
        # ours -> kafka-python
        assert plain(kp_cls.decode(ours, version=version), cls, version, skip_tagged) == expected
        # kafka-python -> ours
        theirs = to_kafka_python(obj, kp_cls, version).encode(version=version)
        assert plain(_decode(cls, version, theirs), cls, version, skip_tagged) == expected

    check()


@pytest.mark.parametrize("api,kind,version", list(_cases(_kio_has)))
def test_against_kio(api, kind, version):
    cls = getattr(api, kind)
    kio_cls = kio_class(api.key, version, kind)

    @SETTINGS
    @given(message_strategy(cls, version, kio_safe=True))
    def check(obj):
        ours = _encode(cls, version, obj)
        theirs = kio_roundtrip(kio_cls, ours)  # kio reads our bytes and writes back what it read
        assert theirs == ours
        assert plain(_decode(cls, version, theirs), cls, version) == plain(obj, cls, version)

    check()
