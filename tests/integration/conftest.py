"""Fixtures: a real ``logstore broker`` process per test (see brokerkit.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from brokerkit import BrokerProcess, free_port

__all__ = ["BrokerProcess", "free_port"]


@pytest.fixture
def broker_factory(tmp_path: object) -> Iterator[object]:
    """Make brokers with overrides: ``broker_factory({"num.partitions": "3"})``."""
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None) -> BrokerProcess:
        data_dir = os.path.join(str(tmp_path), f"data-{len(started)}")
        broker = BrokerProcess(data_dir, overrides).start()
        started.append(broker)
        return broker

    yield make
    for broker in started:
        if broker.alive:
            assert broker.stop() == 0, broker.log_text()[-3000:]


@pytest.fixture
def broker(broker_factory: object) -> BrokerProcess:
    return broker_factory()  # type: ignore[operator, no-any-return]


FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
"""Groups start at once (no initial rebalance delay) and sessions may be as short as 1 s."""


@pytest.fixture
def fast_broker(broker_factory: Any) -> BrokerProcess:
    return broker_factory(FAST_GROUPS)  # type: ignore[no-any-return]
