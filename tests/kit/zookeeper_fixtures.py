"""A real ZooKeeper (Debian's package, run by Java) for the cluster's tests (tests/conftest.py
loads these fixtures as a plugin, so a cluster test may stand beside the package it tests).

One server serves the whole run (started by the first test that asks; one costs ~1 s); each test
gets its own chroot (``zk_connect``), so tests never see each other's znodes.
"""

from __future__ import annotations

import os
import pathlib
import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest
from kazoo.client import KazooClient

from logstore.cluster.zookeeper import ZooKeeperServer
from tests.kit.brokerkit import stop_all
from tests.kit.clusterkit import BrokerProcess


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(str(tmp_path_factory.mktemp("zookeeper")))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zk_connect(zookeeper: ZooKeeperServer) -> str:
    """``host:port/chroot``: a fresh namespace of the shared server."""
    chroot = f"/test-{uuid.uuid4().hex[:12]}"
    root = KazooClient(hosts=zookeeper.connect_string)
    root.start(timeout=30)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()
    return zookeeper.connect_string + chroot


@pytest.fixture
def cluster(zk_connect: str, tmp_path: pathlib.Path) -> Iterator[Callable[..., BrokerProcess]]:
    """``cluster(broker_id, rack=None, wrapper=(), **overrides)`` starts a broker process in this
    test's cluster (a 6 s ZooKeeper session; ``wrapper``: see BrokerProcess); every one still
    running is stopped cleanly at the end."""
    started: list[BrokerProcess] = []

    def start(broker_id: int, rack: str | None = None, wrapper: Sequence[str] = (), **overrides: str) -> BrokerProcess:
        settings = {"zookeeper.connect": zk_connect, "broker.id": str(broker_id),
                    "zookeeper.session.timeout.ms": "6000", **overrides}  # fmt: skip
        if rack is not None:
            settings["broker.rack"] = rack
        broker = BrokerProcess(str(tmp_path / f"broker-{broker_id}" / "data"), settings, wrapper=wrapper)
        os.makedirs(os.path.dirname(broker.data_dir), exist_ok=True)
        started.append(broker)
        return broker.start()

    yield start
    stop_all(started)
