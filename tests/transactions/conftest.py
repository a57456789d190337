"""A broker whose transaction checks run often enough for tests to watch timeouts abort transactions."""

from __future__ import annotations

import pytest

from odradek.embedded import BrokerProcess

SETTINGS = {"group.initial.rebalance.delay.ms": 0,
            "transaction.abort.timed.out.transaction.cleanup.interval.ms": 300,
            "transaction.state.log.num.partitions": 5}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    process = BrokerProcess(tmp_path_factory.mktemp("broker") / "data", settings=SETTINGS)
    process.start()
    yield process
    process.stop()
