"""Debian's kcat (librdkafka 2.0.2, strict about ApiVersions) lists, produces and consumes."""

from __future__ import annotations

import shutil
import subprocess

import pytest

pytestmark = pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed (make test installs it)")


def kcat(broker, *args, stdin: str | None = None) -> str:
    result = subprocess.run(["kcat", "-b", broker.bootstrap_servers, *args], input=stdin, capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_list_metadata(broker):
    listing = kcat(broker, "-L")
    assert f"broker 1 at 127.0.0.1:{broker.port}" in listing


def test_produce_and_consume(broker, topic_name):
    lines = [f"key{i}:value {i}" for i in range(100)]
    kcat(broker, "-P", "-t", topic_name, "-K:", "-z", "snappy", stdin="\n".join(lines) + "\n")
    out = kcat(broker, "-C", "-t", topic_name, "-o", "beginning", "-e", "-K:", "-f", "%k:%s:%o\n")
    assert out.splitlines() == [f"key{i}:value {i}:{i}" for i in range(100)]
