"""A real ZooKeeper (Debian's package, run by Java) for the cluster's tests.

One server serves the whole directory (starting one costs ~1 s); each test
gets its own chroot (``zk_connect``), so tests never see each other's znodes.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from kazoo.client import KazooClient

from logstore.cluster.zookeeper import ZooKeeperServer


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
    root.start(timeout=10)
    try:
        root.ensure_path(chroot)
    finally:
        root.stop()
        root.close()
    return zookeeper.connect_string + chroot
