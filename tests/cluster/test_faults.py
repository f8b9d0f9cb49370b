"""The fault tests (slow tier, in CI): a replicated workload under a nemesis, then the checker.

ZooKeeper and three broker processes; idempotent acks=all producers into a
topic at replication factor 3 with min.insync.replicas=2; at least 50 faults,
one at a time, process and network faults mixed: kill -9 (also of the
controller), SIGSTOP/SIGCONT short of the ZooKeeper session and past it (a
zombie leader, or a zombie controller), SIGTERM and restart; a broker cut off
from the other brokers, one cut off from ZooKeeper only (past its session: a
zombie leader that must be fenced), one direction of a broker-broker link
dropped, a slow link, connections reset. The network faults need network
namespaces (root, ``ip``, ``tc``: ``bench/netfaults.py``); where the machine
cannot, the mixed test skips with the reason and the process-only test runs
instead. The engine is ``bench/chaos.py`` (its module doc says what the
checker proves); ``bench/chaos.py --faults 1000`` runs the same for longer.
"""

from __future__ import annotations

import os
import pathlib
import shutil
import socket
import subprocess
import sys
import tempfile
import time

import pytest

from bench import chaos, netfaults

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]

FAULTS = 50
NETWORK_UNAVAILABLE = netfaults.unavailable()


def _keep(workdir: pathlib.Path) -> str:
    """A copy of a failed run's brokers' logs and data where later test runs do not clean up
    (``$LOGSTORE_ARTIFACTS``, else the temp dir's ``logstore-artifacts``)."""
    root = os.environ.get("LOGSTORE_ARTIFACTS") or os.path.join(tempfile.gettempdir(), "logstore-artifacts")
    target = os.path.join(root, f"chaos-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
    shutil.copytree(workdir, target, symlinks=True, ignore_dangling_symlinks=True, dirs_exist_ok=True)
    return target


def _run_and_check(tmp_path: pathlib.Path, network: bool) -> chaos.Report:
    lines: list[str] = []
    try:
        report = chaos.run(
            FAULTS, 900, seed=12, session_ms=3000, rate=600, workdir=str(tmp_path), network=network,
            say=lines.append,
        )  # fmt: skip
    except Exception:
        print(f"kept for a look: {_keep(tmp_path)}")
        raise
    if not report.ok:
        lines.append(f"kept the run's logs and data for a look: {_keep(tmp_path)}")
    table = report.table()
    assert sum(report.faults.values()) >= FAULTS, table
    assert set(report.faults) >= {"kill", "pause", "zombie", "term"}, table  # each kind at least once
    assert report.acknowledged > 1000 and report.read >= report.acknowledged, table
    assert report.ok, table + "\n" + "\n".join(lines[-20:])
    return report


@pytest.mark.skipif(NETWORK_UNAVAILABLE is not None, reason=str(NETWORK_UNAVAILABLE))
def test_fifty_process_and_network_faults_lose_and_duplicate_nothing(tmp_path: pathlib.Path) -> None:
    report = _run_and_check(tmp_path, network=True)
    assert set(report.faults) >= set(chaos.NETWORK_FAULTS), report.table()  # each network kind too
    own = [n for n in netfaults.namespaces() if n.startswith(f"{netfaults.PREFIX}{os.getpid()}-")]
    assert not own, f"namespaces left behind: {own}"


@pytest.mark.skipif(
    NETWORK_UNAVAILABLE is None,
    reason="the mixed test above runs the process faults too (namespaces work here)",
)
def test_fifty_process_faults_lose_and_duplicate_nothing(tmp_path: pathlib.Path) -> None:
    _run_and_check(tmp_path, network=False)


@pytest.mark.skipif(NETWORK_UNAVAILABLE is not None, reason=str(NETWORK_UNAVAILABLE))
def test_the_network_faults_do_what_they_say(tmp_path: pathlib.Path) -> None:
    """Each fault, probed with real TCP connections between namespaces: it does what it says, and only that."""
    net = netfaults.Net(["a", "b", "c"])
    net.create()
    try:
        servers = {m: net.run_in(m, lambda: subprocess.Popen([sys.executable, "-c", ECHO_SERVER]))
                   for m in ("a", "b", "c")}  # fmt: skip
        forwarder = net.forward("b", 7000)

        def reaches(src: str, dst: str) -> bool:
            return net.run_in(src, lambda: _echo(net.address[dst]))

        netfaults.wait_until(
            lambda: all(reaches(s, d) for s in "abc" for d in "abc" if s != d), "echo servers", 10
        )
        net.block("a", "b")  # one way: a's packets to b dropped, so no connection either way; c unaffected
        assert not reaches("a", "b") and not reaches("b", "a")
        assert reaches("a", "c") and reaches("c", "b")
        assert _echo("127.0.0.1", forwarder.port)  # clients still reach b
        net.heal()
        assert reaches("a", "b") and reaches("b", "a")
        net.cut("a", "c")
        assert not reaches("c", "a") and reaches("b", "a") and reaches("c", "b")
        net.heal()
        assert reaches("c", "a")

        def echo_seconds(size: int) -> float:  # size bytes from a to b's echo and back
            def transfer() -> float:
                started = time.monotonic()
                with socket.create_connection((net.address["b"], 7000), timeout=30) as s:
                    s.sendall(b"x" * size)
                    got = 0
                    while got < size:
                        data = s.recv(65536)
                        assert data, "the echo closed early"
                        got += len(data)
                return time.monotonic() - started

            return net.run_in("a", transfer)

        assert echo_seconds(48_000) < 0.75  # healthy: not the slow pipe's bound below
        net.slow("b", 300, 256)  # 256 kbit/s = 32 KB/s each way: 48 KB cannot pass in under 1.4 s
        assert echo_seconds(48_000) >= 0.75
        net.heal()
        assert echo_seconds(48_000) < 0.75

        held = net.run_in("a", lambda: socket.create_connection((net.address["b"], 7000), timeout=5))
        with held:
            held.sendall(b"ping")
            assert held.recv(16) == b"ping"
            assert net.reset_connections("b") >= 1  # b's end aborted: a gets a RST
            held.settimeout(5)
            with pytest.raises(ConnectionResetError):
                held.sendall(b"ping")
                held.recv(16)
        for server in servers.values():
            server.kill()
            server.wait(10)
    finally:
        net.destroy()
    assert not [n for n in netfaults.namespaces() if n.startswith(net.tag)], "namespaces left behind"


ECHO_SERVER = """
import socket, threading
listener = socket.create_server(("0.0.0.0", 7000))
def serve(c):
    with c:
        while data := c.recv(65536):
            c.sendall(data)
while True:
    threading.Thread(target=serve, args=(listener.accept()[0],), daemon=True).start()
"""


def _echo(address: str, port: int = 7000) -> bool:
    try:
        with socket.create_connection((address, port), timeout=1.0) as s:
            s.settimeout(1.0)
            s.sendall(b"ping")
            return s.recv(16) == b"ping"
    except OSError:
        return False
