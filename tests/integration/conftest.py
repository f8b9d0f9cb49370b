"""Fixtures: a real ``logstore broker`` process per test (see brokerkit.py)."""

from __future__ import annotations

import os
from collections.abc import Iterator

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
