"""A real broker process on 127.0.0.1 (``BrokerProcess``) for the integration tests.

The ``broker`` fixture (tests/conftest.py) starts ``python -m logstore broker`` on a free port with a fresh
data directory, waits for its "listening on" line, and stops it with
SIGTERM after the test (checking it exits cleanly). ``BrokerProcess`` can
also kill -9 and restart it on the same port and data directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

START_TIMEOUT_S = 30


def wait_until(
    predicate: Callable[[], object],
    what: str,
    *,
    timeout: float = 30.0,
    step: Callable[[], object] | None = None,
) -> None:
    """Poll ``predicate`` until it is true, ``step`` (a 50 ms sleep) between polls; AssertionError
    naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        if step is None:
            time.sleep(0.05)
        else:
            step()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class BrokerProcess:
    """``logstore broker`` as a child process."""

    def __init__(
        self,
        data_dir: str,
        overrides: dict[str, str] | None = None,
        port: int | None = None,
        listeners: str | None = None,
        log_dir: str | None = None,
        wrapper: Sequence[str] = (),
    ) -> None:
        """``listeners``: the broker's ``listeners`` (default ``PLAINTEXT://127.0.0.1:<port>``);
        ``log_dir``: where its log file goes (default: beside the data directory); ``wrapper``:
        a command that runs the broker (e.g. ``("fiu-run", "-x")``: it must exec it, keeping the pid)."""
        self.data_dir = data_dir
        self.port = port or free_port()
        self.listeners = listeners or f"PLAINTEXT://127.0.0.1:{self.port}"
        self.overrides = dict(overrides or {})
        self.wrapper = tuple(wrapper)
        self.proc: subprocess.Popen[str] | None = None
        self.log_path = os.path.join(log_dir or os.path.dirname(data_dir), f"broker-{self.port}.log")

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> BrokerProcess:
        args = [*self.wrapper, sys.executable, "-m", "logstore", "broker", "--data-dir", self.data_dir,
                "--listeners", self.listeners, "--event-loop", "asyncio"]  # fmt: skip
        for key, value in self.overrides.items():
            args += ["--override", f"{key}={value}"]
        log = open(self.log_path, "a")  # noqa: SIM115 - the child owns it
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True)
        log.close()
        stdout = self.proc.stdout
        assert stdout is not None
        first: list[str] = []
        # readline blocks: read on a thread, so a broker that never says where it listens times out.
        reader = threading.Thread(target=lambda: first.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        line = first[0] if first else "(nothing yet)"
        if "listening on" not in line:
            self.proc.kill()
            raise RuntimeError(
                f"broker did not start: {line!r}; see {self.log_path}:\n{self.log_text()[-3000:]}"
            )
        return self

    def log_text(self) -> str:
        with open(self.log_path) as f:
            return f.read()

    def stop(self, timeout: float = 30) -> int:
        """SIGTERM; returns the exit code."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait()
            if self.proc.stdout is not None:
                self.proc.stdout.close()
        return code

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.kill()
        self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def restart(self) -> BrokerProcess:
        return self.start()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    """``logstore <args>`` as a subprocess, its output captured (it may fail: check ``returncode``)."""
    return subprocess.run(
        [sys.executable, "-m", "logstore", *args], capture_output=True, text=True, timeout=120, check=False
    )


def create_topic(
    bootstrap: str, topic: str, partitions: int, timeout: float = 30, config: dict[str, str] | None = None
) -> None:
    """Create ``topic`` (with ``config``) with confluent-kafka's AdminClient (an independent
    client), waiting for it."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    made = NewTopic(topic, partitions, 1, config=dict(config or {}))
    admin.create_topics([made], operation_timeout=timeout)[topic].result(timeout)


def set_broker_config(bootstrap: str, name: str, value: str, node: int = 0, timeout: float = 15) -> None:
    """Set one dynamic broker config on broker ``node`` at runtime: IncrementalAlterConfigs SET
    through confluent-kafka's AdminClient, whose connections are closed on return."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.BROKER, str(node), incremental_configs=[entry])
    (future,) = admin.incremental_alter_configs([resource]).values()
    future.result(timeout)


def read_records(
    bootstrap: str,
    assignment: list[tuple[str, int]],
    expected: int,
    timeout: float = 20,
    client: Any = None,
    isolation: str = "read_uncommitted",
) -> list[tuple[str, int, int, bytes]]:
    """(topic, partition, offset, value) of every record of ``assignment``'s (topic, partition)s
    from the start (assigned, no group), in the order read; reads on for a second past ``expected``
    so that extra records would be seen. ``client``: the module with ``Consumer`` and
    ``TopicPartition`` (confluent_kafka, or logstore.client). A message with an error fails the read."""
    if client is None:
        import confluent_kafka as client

    consumer = client.Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"check-{time.monotonic_ns()}", "isolation.level": isolation,
        "enable.auto.commit": False,
    })  # fmt: skip
    found: list[tuple[str, int, int, bytes]] = []
    deadline = time.monotonic() + timeout
    idle_until: float | None = None
    try:
        consumer.assign([client.TopicPartition(topic, p, 0) for topic, p in assignment])
        while time.monotonic() < deadline:
            for message in consumer.consume(1000, 0.2):
                assert message.error() is None, message.error()
                found.append((message.topic() or "", message.partition() or 0, message.offset() or 0,
                              message.value() or b""))  # fmt: skip
            if len(found) >= expected:
                idle_until = idle_until or time.monotonic() + 1.0
                if time.monotonic() > idle_until:
                    break
    finally:
        consumer.close()
    return found


def read_values(
    bootstrap: str,
    topic: str,
    isolation: str,
    expected: int,
    timeout: float = 20,
    client: Any = None,
    partitions: int | None = None,
) -> list[bytes]:
    """Every value of ``topic`` from the start (:func:`read_records`), in partition then offset
    order. ``partitions``: how many (else asked of the broker)."""
    if client is None:
        import confluent_kafka as client
    if partitions is None:
        admin = client.Consumer({"bootstrap.servers": bootstrap, "group.id": "metadata"})
        try:
            partitions = len(admin.list_topics(topic, timeout=10).topics[topic].partitions)
        finally:
            admin.close()
    found = read_records(bootstrap, [(topic, p) for p in range(partitions)], expected, timeout, client, isolation)
    return [value for _, _, _, value in sorted(found, key=lambda record: (record[1], record[2]))]


def produce_numbered(
    bootstrap: str, topic: str, partitions: int, count: int, start: int = 0, **kw: Any
) -> None:
    """``count`` records round-robin over the partitions with confluent-kafka; values are
    b"<n>" from ``start``; ``kw`` goes to each ``produce`` (headers, key...)."""
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1})
    for n in range(start, start + count):
        producer.produce(topic, value=b"%d" % n, partition=n % partitions, **kw)
    assert producer.flush(30) == 0


def wait_for(predicate: Callable[[], bool], timeout: float, step: Callable[[], object], what: str) -> float:
    """Run ``step`` until ``predicate`` holds (AssertionError naming ``what`` after ``timeout``
    seconds); returns the seconds it took."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        step()
    return time.monotonic() - start


def stop_all(brokers: list[BrokerProcess]) -> None:
    """A fixture's teardown: stop every broker still running (one that hangs or fails does not
    leave the others running), then fail naming each that did not stop cleanly, with its log."""
    failures = []
    for broker in brokers:
        if not broker.alive:
            continue
        try:
            code = broker.stop()
        except subprocess.TimeoutExpired:
            # The broker logs every thread's stack after 20 s of shutdown (broker/run.py): keep it.
            failures.append(
                f"{broker.data_dir}: not stopped within 30 s of SIGTERM (killed)\n{broker.log_text()[-8000:]}"
            )
            continue
        if code != 0:
            failures.append(f"{broker.data_dir}: exit code {code}\n{broker.log_text()[-3000:]}")
    assert not failures, "\n".join(failures)


@contextlib.contextmanager
def broker_thread(broker: Any) -> Iterator[None]:
    """Run an in-process ``logstore.broker.Broker`` on an event loop of its own, in a thread, until
    the block ends (then close it and stop the loop)."""
    import asyncio

    loop = asyncio.new_event_loop()
    ready = threading.Event()

    def run() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(broker.start())
        ready.set()
        loop.run_forever()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    assert ready.wait(10), "the in-process broker did not start within 10 s"
    try:
        yield
    finally:
        asyncio.run_coroutine_threadsafe(broker.close(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
