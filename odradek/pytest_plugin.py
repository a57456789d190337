"""The pytest plugin (registered as `odradek` under pytest11): a real broker for users' own test suites.

`odradek_broker` gives each test a fresh in-process broker (odradek.embedded.Broker) with its data in the test's
tmp_path, on a free port: it starts in well under a second, with no JVM and no Docker. Nothing is imported until
a test asks for the fixture, so the plugin costs nothing in suites that do not use it.
"""

from __future__ import annotations

import pytest


@pytest.fixture
def odradek_broker(tmp_path):
    """A running broker; use `odradek_broker.bootstrap_servers` as your clients' bootstrap.servers."""
    from odradek.embedded import Broker

    with Broker(data_dir=tmp_path / "odradek-broker") as broker:
        yield broker
