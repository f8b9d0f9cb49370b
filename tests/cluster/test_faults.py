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
import subprocess
import sys

import pytest

from bench import chaos, netfaults

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]

FAULTS = 50
NETWORK_UNAVAILABLE = netfaults.unavailable()


def _run_and_check(tmp_path: pathlib.Path, network: bool) -> chaos.Report:
    lines: list[str] = []
    report = chaos.run(
        FAULTS, 900, seed=12, session_ms=3000, rate=600, workdir=str(tmp_path), network=network,
        say=lines.append,
    )  # fmt: skip
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
def test_the_network_faults_cut_what_they_say(tmp_path: pathlib.Path) -> None:
    """Each fault, probed with real TCP connections between namespaces: it cuts its link and only it."""
    net = netfaults.Net(["a", "b", "c"])
    net.create()
    try:
        servers = {m: net.run_in(m, lambda: subprocess.Popen(
            [sys.executable, "-c", "import socket\nl = socket.create_server(('0.0.0.0', 7000))\n"
             "while True:\n c, _ = l.accept(); c.sendall(c.recv(16)); c.close()"]))
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
        for server in servers.values():
            server.kill()
            server.wait(10)
    finally:
        net.destroy()
    assert not [n for n in netfaults.namespaces() if n.startswith(net.tag)], "namespaces left behind"


def _echo(address: str, port: int = 7000) -> bool:
    import socket

    try:
        with socket.create_connection((address, port), timeout=1.0) as s:
            s.settimeout(1.0)
            s.sendall(b"ping")
            return s.recv(16) == b"ping"
    except OSError:
        return False
