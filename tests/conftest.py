"""Shared fixtures of the suite: segment directories, and real broker processes.

``broker_factory`` / ``broker`` / ``fast_broker`` start ``python -m logstore broker``
on 127.0.0.1 (tests/kit/brokerkit.py) for every test of a broker process, and check
each exits cleanly after the test; ``zookeeper`` / ``zk_connect`` / ``cluster``
(tests/kit/zookeeper_fixtures.py) do the same for brokers in a ZooKeeper cluster.

Every folder of tests/ is a package (an ``__init__.py`` in each) rather than pytest's
``--import-mode=importlib``: test modules of the same name in two folders
(tests/client/test_transactions.py, tests/coordinator/txn/test_transactions.py) get
distinct names, the kits are one ordinary package (``from tests.kit.brokerkit import
...``; pytest puts the repository's root on ``sys.path``, the first folder up without
an ``__init__.py``), a test module may import another's helpers, and the kits' scripts
run as ``python -m tests.kit.librdkafka_suite`` from the root.

Tiers are markers, not folders (pyproject.toml lists them; test_architecture.py checks
each test module names its tier, and :func:`pytest_collection_modifyitems` that a test
starting broker processes is not in the unit tier).
"""

from __future__ import annotations

import os
import pathlib
from collections.abc import Iterator
from typing import Any

import pytest

from tests.kit.brokerkit import BrokerProcess, stop_all

pytest_plugins = ["tests.kit.zookeeper_fixtures"]

FAST_GROUPS = {"group.initial.rebalance.delay.ms": "0", "group.min.session.timeout.ms": "1000"}
"""Groups start at once (no initial rebalance delay) and sessions may be as short as 1 s."""


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


@pytest.fixture
def fast_broker(broker_factory: Any) -> BrokerProcess:
    return broker_factory(FAST_GROUPS)  # type: ignore[no-any-return]


PROCESS_FIXTURES = frozenset({"broker", "broker_factory", "fast_broker", "cluster", "zookeeper", "zk_connect", "spark"})
PROCESS_TIERS = ("integration", "crash", "external")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test that starts processes through a fixture (even through another fixture) is marked with
    a process tier, so ``-m unit`` and ``-m "not integration"`` never start a broker."""
    wrong = [
        item.nodeid
        for item in items
        if PROCESS_FIXTURES & set(getattr(item, "fixturenames", ()))
        and not any(item.get_closest_marker(tier) for tier in PROCESS_TIERS)
    ]
    if wrong:
        raise pytest.UsageError(
            f"tests that start processes without a tier of {', '.join(PROCESS_TIERS)} "
            "(set the module's pytestmark):\n" + "\n".join(wrong)
        )
