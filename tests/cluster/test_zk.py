"""Kafka's znodes in a real ZooKeeper: registration, controller election, topics, partition state."""

from __future__ import annotations

import contextlib
import json
import pathlib
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator

import pytest
from kazoo.exceptions import NodeExistsError

from logstore.cluster.zk import (
    BrokerRegistration,
    DuplicateBrokerIdError,
    FencedControllerError,
    KafkaZkClient,
    LeaderAndIsr,
    TopicAssignment,
    ZkError,
    state_path,
    topic_id_from_text,
    topic_id_text,
    topic_path,
)
from logstore.cluster.zookeeper import ZooKeeperServer, free_port

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]


@pytest.fixture
def clients(zk_connect: str) -> Iterator[list[KafkaZkClient]]:
    made: list[KafkaZkClient] = []

    def make() -> KafkaZkClient:
        client = KafkaZkClient(zk_connect, session_timeout_ms=6000)
        client.start()
        made.append(client)
        return client

    made_by = [make() for _ in range(3)]
    yield made_by
    for client in made:
        client.close()


def registration(broker_id: int, port: int, rack: str | None = None) -> BrokerRegistration:
    return BrokerRegistration(broker_id, (("PLAINTEXT", "127.0.0.1", port),), rack)


def test_broker_registration_is_kafkas_json_and_ephemeral(clients: list[KafkaZkClient]) -> None:
    a, b, _ = clients
    a.register_broker(registration(1, 9092, "r1"))
    raw, _ = b.zk.get("/brokers/ids/1")
    value = json.loads(raw)
    assert value["endpoints"] == ["PLAINTEXT://127.0.0.1:9092"] and value["rack"] == "r1"
    assert (value["host"], value["port"], value["version"]) == ("127.0.0.1", 9092, 5)
    assert b.live_brokers() == {1: registration(1, 9092, "r1")}
    changed = threading.Event()
    b.live_brokers(watch=lambda event: changed.set())
    a.close()  # the session ends: the ephemeral registration goes with it
    assert changed.wait(10)
    assert b.live_brokers() == {}


def test_a_duplicate_broker_id_is_refused_and_the_first_broker_is_unharmed(
    clients: list[KafkaZkClient],
) -> None:
    a, b, _ = clients
    a.register_broker(registration(3, 9092))
    with pytest.raises(DuplicateBrokerIdError, match=r"broker.id=3 is already registered .*//127.0.0.1:9092"):
        b.register_broker(registration(3, 9093))
    a.register_broker(registration(3, 9092))  # its own session: re-registering is fine
    assert b.live_brokers()[3].endpoints == (("PLAINTEXT", "127.0.0.1", 9092),)


def test_the_cluster_id_is_made_once(clients: list[KafkaZkClient]) -> None:
    a, b, _ = clients
    assert a.get_or_create_cluster_id("first-id") == "first-id"
    assert b.get_or_create_cluster_id("second-id") == "first-id"


def test_one_controller_per_epoch_and_the_epoch_only_grows(clients: list[KafkaZkClient]) -> None:
    a, b, c = clients
    assert a.controller_id() is None and a.controller_epoch() == (0, -1)
    # Three brokers race for the same epoch: exactly one wins it.
    results: dict[int, tuple[int, int] | None] = {}
    barrier = threading.Barrier(3)

    def race(client: KafkaZkClient, broker_id: int) -> None:
        barrier.wait(10)
        results[broker_id] = client.try_become_controller(broker_id)

    threads = [threading.Thread(target=race, args=(client, i + 1)) for i, client in enumerate(clients)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    winners = [broker for broker, epoch in results.items() if epoch is not None]
    assert len(winners) == 1 and results[winners[0]] == (1, 1), results  # (epoch, its znode version)
    assert a.controller_id() == winners[0] and a.controller_epoch()[0] == 1
    # The controller's session ends: the next one gets a higher epoch.
    by_id = {1: a, 2: b, 3: c}
    gone = by_id.pop(winners[0])
    moved = threading.Event()
    survivor = next(iter(by_id.values()))
    survivor.controller_id(watch=lambda event: moved.set())
    gone.close()
    assert moved.wait(10)
    won = [client.try_become_controller(broker) for broker, client in sorted(by_id.items())]
    epochs = [None if w is None else w[0] for w in won]
    assert sorted(e for e in epochs if e is not None) == [2] and epochs.count(None) == 1
    # Resigning removes /controller only for its holder.
    holder = next(broker for broker, epoch in zip(sorted(by_id), epochs, strict=True) if epoch == 2)
    other = next(broker for broker in by_id if broker != holder)
    by_id[other].resign_controller(other)
    assert survivor.controller_id() == holder
    by_id[holder].resign_controller(holder)
    assert survivor.controller_id() is None and survivor.controller_epoch()[0] == 2


def test_topics_are_kafkas_json(clients: list[KafkaZkClient]) -> None:
    a, b, _ = clients
    topic_id = uuid.uuid4()
    assert topic_id_from_text(topic_id_text(topic_id)) == topic_id and len(topic_id_text(topic_id)) == 22
    assignment = TopicAssignment(topic_id, {0: (1, 2, 3), 1: (2, 3, 1)})
    a.create_topic("orders", assignment, {"retention.ms": "1000"})
    raw, _ = b.zk.get(topic_path("orders"))
    assert json.loads(raw) == {
        "version": 3,
        "topic_id": topic_id_text(topic_id),
        "partitions": {"0": [1, 2, 3], "1": [2, 3, 1]},
        "adding_replicas": {},
        "removing_replicas": {},
    }
    assert json.loads(b.zk.get("/config/topics/orders")[0]) == {
        "version": 1,
        "config": {"retention.ms": "1000"},
    }
    assert b.topics() == ["orders"] and b.topic_assignment("orders") == assignment
    assert b.topic_config("orders") == {"retention.ms": "1000"}
    moving = assignment.with_partition(0, (4, 2, 1, 3), adding=(4,), removing=(1, 3))
    a.set_topic_assignment("orders", moving)  # a reassignment in progress (KIP-455)
    raw, _ = b.zk.get(topic_path("orders"))
    assert json.loads(raw)["adding_replicas"] == {"0": [4]} and json.loads(raw)["removing_replicas"] == {
        "0": [1, 3]
    }
    found = b.topic_assignment("orders")
    assert found == moving and found.reassigning(0) and not found.reassigning(1)
    assert (found.target(0), found.original(0)) == ((4, 2), (2, 1, 3))
    with pytest.raises(NodeExistsError):
        b.create_topic("orders", assignment, {})
    a.mark_for_deletion("orders")
    a.mark_for_deletion("orders")  # twice: one mark
    assert b.topics_to_delete() == ["orders"]
    b.delete_topic_znodes("orders")
    assert b.topics() == [] and b.topics_to_delete() == [] and b.topic_config("orders") == {}
    assert b.topic_assignment("orders") is None


def test_partition_state_updates_are_conditional(clients: list[KafkaZkClient]) -> None:
    a, b, _ = clients
    assert a.try_become_controller(1) == (1, 1)
    made = a.create_partition_state("t", 0, LeaderAndIsr(1, 0, (1, 2, 3), controller_epoch=1))
    assert made.zk_version == 0
    raw, _ = b.zk.get(state_path("t", 0))
    assert json.loads(raw) == {
        "controller_epoch": 1,
        "leader": 1,
        "version": 1,
        "leader_epoch": 0,
        "isr": [1, 2, 3],
    }
    read = b.partition_state("t", 0)
    assert read == LeaderAndIsr(1, 0, (1, 2, 3), 1) and read is not None and read.zk_version == 0
    newer = a.update_partition_state("t", 0, LeaderAndIsr(2, 1, (2, 3), 1), expected_version=0)
    assert newer is not None and newer.zk_version == 1
    # A writer that read version 0 (a zombie controller) is refused.
    assert b.update_partition_state("t", 0, LeaderAndIsr(3, 1, (3,), 1), expected_version=0) is None
    assert b.partition_state("t", 0) == LeaderAndIsr(2, 1, (2, 3), 1)
    assert b.partition_state("t", 9) is None
    # Fenced: a write checked against /controller_epoch version 1 passes; once the epoch
    # moves on (a new controller), the same write is refused, whatever the state's version.
    fenced = a.update_partition_state(
        "t", 0, LeaderAndIsr(2, 2, (2,), 1), expected_version=1, epoch_version=1
    )
    assert fenced is not None and fenced.zk_version == 2
    a.resign_controller(1)
    assert b.try_become_controller(2) == (2, 2)
    with pytest.raises(FencedControllerError):
        a.update_partition_state("t", 0, LeaderAndIsr(1, 3, (1,), 1), expected_version=2, epoch_version=1)
    with pytest.raises(FencedControllerError):
        a.create_partition_state("t", 1, LeaderAndIsr(1, 0, (1,), 1), epoch_version=1)
    assert b.partition_state("t", 0) == LeaderAndIsr(2, 2, (2,), 1) and b.partition_state("t", 1) is None


def test_zookeeper_down_at_start_is_a_clear_error_after_retries(caplog: pytest.LogCaptureFixture) -> None:
    port = free_port()
    client = KafkaZkClient(f"127.0.0.1:{port}", connection_timeout_ms=2500, retry_backoff_ms=200)
    started = time.monotonic()
    with pytest.raises(ZkError, match=rf"cannot reach ZooKeeper at 127.0.0.1:{port} .* start it"):
        client.start()
    assert 2.0 <= time.monotonic() - started < 15
    retries = [r for r in caplog.records if "does not answer" in r.getMessage()]
    assert len(retries) >= 2  # it retried, with backoff, before giving up


def test_a_server_that_never_answers_the_handshake_is_left_within_seconds() -> None:
    """A connection accepted but never answered (a ZooKeeper still starting) is given up after
    about a second and tried again, not after the whole session timeout (kazoo's own wait, which
    lost sessions across a ZooKeeper restart): in 5 s with a 10 s session, several attempts."""
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    silent.settimeout(0.2)
    accepted: list[socket.socket] = []
    client = KafkaZkClient(f"127.0.0.1:{silent.getsockname()[1]}", session_timeout_ms=10_000)
    client.zk.start_async()  # kazoo's own connection loop, as after a lost connection
    try:
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            with contextlib.suppress(TimeoutError):
                accepted.append(silent.accept()[0])
    finally:
        client.zk.stop()
        client.zk.close()
        for connection in accepted:
            connection.close()
        silent.close()
    assert len(accepted) >= 3, len(accepted)


def test_a_restarted_zookeeper_keeps_every_znode(tmp_path: pathlib.Path) -> None:
    server = ZooKeeperServer(str(tmp_path / "zk"))
    server.start()
    try:
        client = KafkaZkClient(server.connect_string)
        client.start()
        client.create_topic("kept", TopicAssignment(uuid.uuid4(), {0: (1,)}), {})
        client.close()
        server.stop()
        server.start()
        again = KafkaZkClient(server.connect_string)
        again.start()
        assert again.topics() == ["kept"]
        again.close()
    finally:
        server.stop()


def test_zookeepers_own_log_names_an_expired_session(tmp_path: pathlib.Path) -> None:
    """zookeeper.log holds the server's session lines, to read beside the brokers' logs when a
    session is lost: a client killed with -9 has its session expired, by id, after its timeout."""
    server = ZooKeeperServer(str(tmp_path / "zk"))
    server.start()
    holder = (
        "import sys, time\n"
        "from kazoo.client import KazooClient\n"
        "zk = KazooClient(hosts=sys.argv[1], timeout=1.5)\n"
        "zk.start(timeout=30)\n"
        "print(hex(zk.client_id[0]), flush=True)\n"
        "time.sleep(60)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", holder, server.connect_string], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        session = proc.stdout.readline().strip()
        assert session.startswith("0x"), session
        proc.kill()  # the session is neither closed nor kept alive
        proc.wait(10)
        log = tmp_path / "zk" / "zookeeper.log"
        deadline = time.monotonic() + 30
        while f"Expiring session {session}," not in log.read_text(errors="replace"):
            assert time.monotonic() < deadline, log.read_text(errors="replace")[-3000:]
            time.sleep(0.2)
    finally:
        proc.kill()
        proc.wait(10)
        server.stop()
