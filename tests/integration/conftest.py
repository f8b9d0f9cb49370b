"""Fixtures: a real ``logstore broker`` process per test (see brokerkit.py)."""

from __future__ import annotations

from typing import Any

import pytest
from brokerkit import BrokerProcess, free_port

__all__ = ["BrokerProcess", "free_port"]


FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
"""Groups start at once (no initial rebalance delay) and sessions may be as short as 1 s."""


@pytest.fixture
def fast_broker(broker_factory: Any) -> BrokerProcess:
    return broker_factory(FAST_GROUPS)  # type: ignore[no-any-return]
