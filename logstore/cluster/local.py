"""A whole cluster on this machine for a user: ``logstore cluster up -n 3 [--dir D]``.

Starts a ZooKeeper server and N ``logstore broker`` processes on 127.0.0.1
(ports ``base_port`` .. ``base_port + N - 1``, broker ids 1 .. N, each with
its own data directory under ``directory``, and its schema registry on
``http://127.0.0.1:<registry_port + i - 1>`` unless ``registry_port`` is 0), prints the bootstrap list once
every broker listens, and stops them all (brokers with SIGTERM, a controlled
shutdown each, then ZooKeeper) when asked: Ctrl-C or SIGTERM. Everything is
kept under ``directory``, so the next ``up`` on it finds its topics again.

Layout::

    <directory>/zookeeper/        the server's config, data and zookeeper.log
    <directory>/broker-<id>/data  each broker's data directory
    <directory>/broker-<id>.log   each broker's log
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from logstore.cluster.zookeeper import ZooKeeperServer
from logstore.errors import LogstoreError

START_TIMEOUT_S = 60.0


@dataclass
class LocalCluster:
    """ZooKeeper and ``brokers`` brokers under ``directory`` (see the module doc)."""

    directory: str
    brokers: int = 3
    base_port: int = 9092
    zookeeper_port: int = 2181
    racks: list[str] | None = None
    registry_port: int = 8081  # broker i's schema registry: registry_port + i - 1; 0: none
    processes: dict[int, subprocess.Popen[str]] = field(default_factory=dict)
    zookeeper: ZooKeeperServer | None = None

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{self.base_port + i}" for i in range(self.brokers))

    def start(self, say: Callable[[str], None] = print) -> None:
        """Start ZooKeeper, then each broker, saying each step; LogstoreError (after stopping what
        started) if one does not come up within a minute."""
        if self.brokers < 1:
            raise LogstoreError(f"a cluster needs at least one broker, not {self.brokers}")
        if self.racks is not None and len(self.racks) != self.brokers:
            raise LogstoreError(f"--racks names {len(self.racks)} rack(s) for {self.brokers} broker(s)")
        os.makedirs(self.directory, exist_ok=True)
        self.zookeeper = ZooKeeperServer(os.path.join(self.directory, "zookeeper"), port=self.zookeeper_port)
        try:
            self.zookeeper.start()
            say(f"ZooKeeper on {self.zookeeper.connect_string}")
            for broker_id in range(1, self.brokers + 1):
                self._start_broker(broker_id)
                registry = (f", schema registry on http://127.0.0.1:{self.registry_port + broker_id - 1}"
                            if self.registry_port else "")  # fmt: skip
                say(f"broker {broker_id} on 127.0.0.1:{self.base_port + broker_id - 1}{registry}")
        except BaseException:
            self.stop()
            raise

    def _start_broker(self, broker_id: int) -> None:
        assert self.zookeeper is not None
        port = self.base_port + broker_id - 1
        data = os.path.join(self.directory, f"broker-{broker_id}", "data")
        args = [
            sys.executable, "-m", "logstore", "broker", "--data-dir", data,
            "--listeners", f"PLAINTEXT://127.0.0.1:{port}",
            "--override", f"zookeeper.connect={self.zookeeper.connect_string}",
            "--override", f"broker.id={broker_id}",
        ]  # fmt: skip
        if self.racks is not None:
            args += ["--override", f"broker.rack={self.racks[broker_id - 1]}"]
        if self.registry_port:
            registry = f"http://127.0.0.1:{self.registry_port + broker_id - 1}"
            args += ["--override", f"schema.registry.listeners={registry}"]
        log_path = os.path.join(self.directory, f"broker-{broker_id}.log")
        with open(log_path, "a") as log:
            process = subprocess.Popen(
                args, stdout=subprocess.PIPE, stderr=log, text=True, start_new_session=True
            )
        self.processes[broker_id] = process
        first: list[str] = []
        assert process.stdout is not None
        stdout = process.stdout
        reader = threading.Thread(target=lambda: first.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not first or "listening on" not in first[0]:
            with open(log_path) as f:
                tail = f.read()[-2000:]
            raise LogstoreError(f"broker {broker_id} did not start (see {log_path}):\n{tail}")

    def stop(self, say: Callable[[str], None] = print) -> None:
        """SIGTERM every broker (in reverse order) and wait, then stop ZooKeeper. Idempotent."""
        for broker_id, process in sorted(self.processes.items(), reverse=True):
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
                try:
                    process.wait(60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(10)
                say(f"broker {broker_id} stopped ({process.returncode})")
            if process.stdout is not None:
                process.stdout.close()
        self.processes.clear()
        if self.zookeeper is not None:
            self.zookeeper.stop()
            self.zookeeper = None
            say("ZooKeeper stopped")

    def wait(self, stop: threading.Event) -> int | None:
        """Until ``stop`` is set or a broker exits; the id of a broker that exited, else None."""
        while not stop.wait(0.5):
            for broker_id, process in self.processes.items():
                if process.poll() is not None:
                    return broker_id
        return None


def run_until_stopped(cluster: LocalCluster, say: Callable[[str], None] = print) -> int:
    """``logstore cluster up``: start, print the bootstrap list, stop on Ctrl-C or SIGTERM.
    Returns the exit status (1 if a broker died on its own)."""
    stop = threading.Event()
    previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGINT, signal.SIGTERM)}
    started = time.monotonic()
    try:
        cluster.start(say)
        say(
            f"bootstrap.servers={cluster.bootstrap}  (up in {time.monotonic() - started:.1f} s; Ctrl-C stops it)"
        )
        died = cluster.wait(stop)
        if died is not None:
            say(f"broker {died} exited on its own; see {cluster.directory}/broker-{died}.log")
        return 0 if died is None else 1
    finally:
        cluster.stop(say)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
