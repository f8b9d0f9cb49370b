"""``logstore cluster up``: ZooKeeper and N brokers in one command, all stopped by Ctrl-C."""

from __future__ import annotations

import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import threading
import urllib.request

import pytest

from tests.kit.brokerkit import free_port, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]


def consecutive_free_ports(count: int) -> int:
    """The first of ``count`` consecutive free ports on 127.0.0.1."""
    for _ in range(50):  # bounded: a few tries find a free pair
        first = free_port()
        sockets = []
        try:
            for offset in range(count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", first + offset))
            return first
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise AssertionError("no consecutive free ports")


def test_cluster_up_starts_every_broker_and_stops_them_all_on_ctrl_c(tmp_path: pathlib.Path) -> None:
    from confluent_kafka.admin import AdminClient

    base = consecutive_free_ports(2)
    zk_port = free_port()
    for _ in range(20):  # bounded: a port outside the brokers' two
        if zk_port not in (base, base + 1):
            break
        zk_port = free_port()
    registry = consecutive_free_ports(2)
    for _ in range(20):  # bounded: two ports clear of the others
        if not {registry, registry + 1} & {base, base + 1, zk_port}:
            break
        registry = consecutive_free_ports(2)
    command = [sys.executable, "-m", "logstore", "cluster", "up", "-n", "2", "--dir", str(tmp_path / "c"),
               "--base-port", str(base), "--zookeeper-port", str(zk_port), "--racks", "r1,r2",
               "--registry-port", str(registry)]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    lines: list[str] = []
    assert process.stdout is not None
    reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_until(lambda: any("bootstrap.servers=" in line for line in lines) or process.poll() is not None,
                   "the bootstrap list", timeout=90)  # fmt: skip
        assert process.poll() is None, "".join(lines)
        bootstrap = next(line for line in lines if "bootstrap.servers=" in line).split("=")[1].split()[0]
        assert bootstrap == f"127.0.0.1:{base},127.0.0.1:{base + 1}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        wait_until(lambda: len(admin.list_topics(timeout=10).brokers) == 2, "both brokers in the metadata")
        racks = {b.id: b for b in admin.list_topics(timeout=10).brokers.values()}
        assert set(racks) == {1, 2}
        for port in (registry, registry + 1):  # each broker serves the schema registry
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/subjects", timeout=10) as reply:
                assert json.loads(reply.read()) == []
    finally:
        process.send_signal(signal.SIGINT)  # Ctrl-C
        code = process.wait(120)
        reader.join(10)
    text = "".join(lines)
    assert code == 0, text
    assert "broker 1 stopped (0)" in text and "broker 2 stopped (0)" in text and "ZooKeeper stopped" in text
    # Everything under --dir, kept for the next run.
    assert {"zookeeper", "broker-1", "broker-2"} <= set(os.listdir(tmp_path / "c"))
