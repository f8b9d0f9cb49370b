"""Shared fixtures of the suite: segment directories, and real broker processes.

``broker_factory`` / ``broker`` start ``python -m logstore broker`` on
127.0.0.1 (tests/integration/brokerkit.py) for the integration and Spark
tests alike, and check each exits cleanly after the test.
"""

from __future__ import annotations

import os
import pathlib
import sys
from collections.abc import Iterator
from typing import Any

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent / "integration"))

from brokerkit import BrokerProcess, stop_all


@pytest.fixture
def segment_dir(tmp_path: pathlib.Path) -> str:
    """A fresh directory for one partition's segments."""
    path = tmp_path / "topic-0"
    path.mkdir()
    return str(path)


@pytest.fixture
def broker_factory(tmp_path: pathlib.Path) -> Iterator[Any]:
    """Make brokers with overrides: ``broker_factory({"num.partitions": "3"})``."""
    started: list[BrokerProcess] = []

    def make(overrides: dict[str, str] | None = None) -> BrokerProcess:
        data_dir = os.path.join(str(tmp_path), f"data-{len(started)}")
        broker = BrokerProcess(data_dir, overrides).start()
        started.append(broker)
        return broker

    yield make
    stop_all(started)


@pytest.fixture
def broker(broker_factory: Any) -> BrokerProcess:
    return broker_factory()  # type: ignore[no-any-return]
