"""One embedded store, many processes (issue 25, point 3): real processes on one directory.

The process holding the directory's lock serves the others on ``<dir>/.logstore.sock``; the
others' ``embedded:///dir`` clients connect there; when the serving process is killed with -9
another takes the lock over and serves. The children are ``tests/embedded/workers.py``; each
writes what it did (records acknowledged, consumed) to a file, line by line, so that a child
killed mid-way still says what it had been told. Every wait is bounded.
"""

from __future__ import annotations

import collections
import os
import signal
import socket
import stat
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from logstore.client import Consumer, Producer
from logstore.client.types import TopicPartition
from logstore.embedded import SOCKET_NAME, SharedDirectory
from logstore.storage.read_only import ReadOnlyStore
from logstore.storage.store import Store

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "t"
PARTITIONS = 4


def child(role: str, data: Path, out: Path, *args: Any) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    command = [sys.executable, "-m", "tests.embedded.workers", role, str(data), str(out), *map(str, args)]
    with open(f"{out}.err", "wb") as errors:
        return subprocess.Popen(command, cwd=ROOT, env=env, stderr=errors)


def lines(out: Path) -> list[str]:
    return out.read_text().splitlines() if out.exists() else []


def wait_for(what: str, check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.05)


def serving_pid(data: Path) -> int:
    text = (data / ".lock").read_text().strip()
    return int(text) if text else -1


def make_topic(data: Path) -> None:
    with Store(str(data), scheduler=False) as store:
        store.create_topic(TOPIC, partitions=PARTITIONS)


def read_topic(data: Path) -> list[str]:
    """Every record of the topic, read in this process (the children are gone: it serves)."""
    return [value for value, _, _ in read_positions(data)]


def read_positions(data: Path) -> list[tuple[str, int, int]]:
    """Every record of the topic as (value, partition, offset)."""
    values: list[tuple[str, int, int]] = []
    with Consumer({"bootstrap.servers": f"embedded://{data}", "group.id": "reader-x",
                   "enable.auto.commit": False}) as consumer:  # fmt: skip
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
        consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
        deadline = time.monotonic() + 60
        total = sum(ends.values())
        while len(values) < total:
            assert time.monotonic() < deadline, f"read {len(values)} of {total} records"
            values += [(m.value().decode(), m.partition(), m.offset())
                       for m in consumer.consume(1000, 0.5) if m.error() is None]  # fmt: skip
    return values


def committed(data: Path, group: str) -> dict[int, int]:
    with Consumer({"bootstrap.servers": f"embedded://{data}", "group.id": group}) as consumer:
        got = consumer.committed([TopicPartition(TOPIC, p) for p in range(PARTITIONS)], timeout=30)
        ends = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30)[1] for p in range(PARTITIONS)}
    return {tp.partition: tp.offset - ends[tp.partition] for tp in got}


def consumed_offsets(tmp_path: Path, partition: int) -> set[int]:
    """The offsets of ``partition`` the consumers c0..c3 have said they read."""
    return {int(x[3]) for i in range(4) for x in map(str.split, lines(tmp_path / f"c{i}"))
            if x and x[0] == "got" and int(x[2]) == partition}  # fmt: skip


def explain(tmp_path: Path, partitions: set[int]) -> str:
    """Who consumed which offsets of ``partitions`` (for a failure's message)."""
    said = []
    for i in range(4):
        got = [line.split() for line in lines(tmp_path / f"c{i}") if line.startswith("got ")]
        for p in sorted(partitions):
            offsets = [int(x[3]) for x in got if int(x[2]) == p]
            if offsets:
                said.append(f"c{i} p{p}: {len(offsets)} offsets {min(offsets)}..{max(offsets)}")
        said += [f"c{i}: {line}" for line in lines(tmp_path / f"c{i}") if not line.startswith("got ")][-5:]
    return "; ".join(said)


def stop_all(children: list[subprocess.Popen[bytes]]) -> None:
    for process in children:
        if process.poll() is None:
            process.kill()
        process.wait(30)


def test_processes_share_one_store_every_record_read_once(tmp_path: Path) -> None:
    """Two producer processes and two consumer processes of one group on one directory, served
    by a fifth: every record produced is read once, and the group's offsets are committed."""
    data = tmp_path / "data"
    make_topic(data)
    holder = child("hold", data, tmp_path / "hold")
    children = [holder]
    try:
        wait_for("the holder to serve", lambda: lines(tmp_path / "hold"), 60)
        assert serving_pid(data) == holder.pid
        consumers = [child("consume", data, tmp_path / f"c{i}", "g") for i in range(2)]
        children += consumers
        wait_for("both consumers' assignments", lambda: all("ready" in lines(tmp_path / f"c{i}") for i in range(2)), 90)
        producers = [child("produce", data, tmp_path / f"p{i}", f"p{i}", 2000, 2000) for i in range(2)]
        children += producers
        for process in producers:
            assert process.wait(120) == 0, (tmp_path / f"p{producers.index(process)}.err").read_text()
        for i in range(2):
            (tmp_path / f"c{i}.stop").touch()
        for i, process in enumerate(consumers):
            assert process.wait(120) == 0, (tmp_path / f"c{i}.err").read_text()
        (tmp_path / "hold.stop").touch()
        assert holder.wait(60) == 0
    finally:
        stop_all(children)
    acked = [line.split()[1] for i in range(2) for line in lines(tmp_path / f"p{i}") if line.startswith("ack ")]
    assert len(acked) == 4000 and len(set(acked)) == 4000
    got = collections.Counter(line.split()[1] for i in range(2) for line in lines(tmp_path / f"c{i}")
                              if line.startswith("got "))  # fmt: skip
    assert set(got) == set(acked)
    assert [value for value, n in got.items() if n != 1] == []
    assert all(lines(tmp_path / f"c{i}") and any(x.startswith("got ") for x in lines(tmp_path / f"c{i}"))
               for i in range(2)), "each consumer read a share"  # fmt: skip
    assert not (data / SOCKET_NAME).exists(), "the serving process removes its socket when it closes"
    assert sorted(read_topic(data)) == sorted(acked)
    assert committed(data, "g") == {p: 0 for p in range(PARTITIONS)}


def test_kill_9_of_the_serving_process_is_taken_over(tmp_path: Path) -> None:
    """4 producer and 4 consumer processes on one directory; the serving process is killed with
    -9 three times: a waiting process takes over, records flow again (the median takeover is
    printed), every acknowledged record is in the log exactly once (idempotence across the
    takeovers, unacknowledged ones at most once), the consumers together read every one, and the
    group's committed offsets reach the end (kept across takeovers)."""
    data = tmp_path / "data"
    make_topic(data)
    children: list[subprocess.Popen[bytes]] = []
    holders = [child("hold", data, tmp_path / f"h{i}") for i in range(3)]
    children += holders
    takeovers: list[float] = []
    try:
        wait_for("the holders", lambda: all(lines(tmp_path / f"h{i}") for i in range(3)), 90)
        consumers = [child("consume", data, tmp_path / f"c{i}", "g", 3.0) for i in range(4)]
        producers = [child("produce", data, tmp_path / f"p{i}", f"p{i}", 4000, 250) for i in range(4)]
        children += consumers + producers
        by_pid = {process.pid: process for process in children}
        wait_for("the first acknowledgements", lambda: any(
            line.startswith("ack ") for i in range(4) for line in lines(tmp_path / f"p{i}")), 90)  # fmt: skip
        killed: list[int] = []
        for _ in range(3):
            time.sleep(2.0)
            pid = serving_pid(data)
            assert pid in by_pid, f"the lock is held by {pid}, not one of the children"
            killed_at = time.time()
            os.kill(pid, signal.SIGKILL)
            by_pid[pid].wait(10)
            killed.append(pid)

            def acks_sent_after(since: float) -> list[float]:
                """When the records produced after ``since`` were acknowledged."""
                return [float(line.split()[2]) for i in range(4) for line in lines(tmp_path / f"p{i}")
                        if line.startswith("ack ") and float(line.split()[3]) > since]  # fmt: skip

            if all(p.poll() is not None for p in producers):
                break
            wait_for("records to flow again after the kill", lambda at=killed_at: acks_sent_after(at), 30)
            takeovers.append(min(acks_sent_after(killed_at)) - killed_at)
            print(f"\nkilled {pid}; {serving_pid(data)} serves; records flowing again after {takeovers[-1]:.3f} s")
        for i, process in enumerate(producers):
            if process.pid not in killed:
                assert process.wait(180) == 0, (tmp_path / f"p{i}.err").read_text()
        # The consumers stop once together they have read every offset of the log (read here
        # from the files, without the lock: ReadOnlyStore), not at a quiet spell: a rebalance
        # after a member's death can hold the partitions longer than any spell.
        with ReadOnlyStore(str(data)) as files:
            ends = {p: files.end_offset(TOPIC, p) for p in range(PARTITIONS)}
        wait_for("the consumers to read every offset", lambda: all(
            consumed_offsets(tmp_path, p) >= set(range(ends[p])) for p in range(PARTITIONS)), 120)  # fmt: skip
        for i in range(4):
            (tmp_path / f"c{i}.stop").touch()
        for i, process in enumerate(consumers):
            if process.pid not in killed:
                assert process.wait(180) == 0, (tmp_path / f"c{i}.err").read_text()
        assert any(p.pid not in killed for p in consumers), "a consumer survived to read the rest"
        for i in range(3):
            (tmp_path / f"h{i}.stop").touch()
    finally:
        stop_all(children)
    print(f"\ntakeover after kill -9 (kill to the first acknowledgement of a record sent after it): {[f'{t:.3f}' for t in takeovers]} s, "
          f"median {statistics.median(takeovers):.3f} s")  # fmt: skip
    assert len(takeovers) >= 1
    acked = {line.split()[1] for i in range(4) for line in lines(tmp_path / f"p{i}") if line.startswith("ack ")}
    positions = read_positions(data)
    in_log = collections.Counter(value for value, _, _ in positions)
    assert [v for v, n in in_log.items() if n > 1] == [], "a record is in the log twice"
    assert acked <= set(in_log), f"acknowledged but lost: {sorted(acked - set(in_log))[:10]}"
    consumed = {line.split()[1] for i in range(4) for line in lines(tmp_path / f"c{i}") if line.startswith("got ")}
    missing = sorted((p, o, v) for v, p, o in positions if v not in consumed)
    assert not missing, f"never consumed (partition, offset, value): {missing[:5]} ... {missing[-5:]} " + explain(
        tmp_path, {p for p, _, _ in missing}
    )
    assert committed(data, "g") == {p: 0 for p in range(PARTITIONS)}


def test_the_socket_is_owner_only_and_a_stale_one_is_replaced(tmp_path: Path) -> None:
    """A socket file left by a killed owner (nobody listening) is replaced by the next owner,
    which binds its own with mode 0600; another process's client reaches it."""
    data = tmp_path / "data"
    data.mkdir()
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(data / SOCKET_NAME))
    stale.close()  # the file stays, nobody listens: what kill -9 of an owner leaves
    old_inode = os.stat(data / SOCKET_NAME).st_ino
    with Producer({"bootstrap.servers": f"embedded://{data}"}) as producer:
        producer.produce_batch(TOPIC, [b"one"])
        assert producer.flush(30) == 0
        mode = os.stat(data / SOCKET_NAME)
        assert stat.S_ISSOCK(mode.st_mode)
        assert stat.S_IMODE(mode.st_mode) == 0o600
        assert mode.st_ino != old_inode
        out = tmp_path / "p"
        assert child("produce", data, out, "other", 10, 1000).wait(120) == 0, Path(f"{out}.err").read_text()
        assert sum(line.startswith("ack ") for line in lines(out)) == 10
    assert not (data / SOCKET_NAME).exists()


def test_a_long_directory_path_is_served(tmp_path: Path) -> None:
    """A socket path longer than sun_path allows is bound and reached through the directory's
    descriptor (/proc/self/fd/N/.logstore.sock)."""
    data = tmp_path / ("d" * 60) / ("e" * 60)
    assert len(str(data / SOCKET_NAME)) > 108
    with Producer({"bootstrap.servers": f"embedded://{data}"}) as producer:
        producer.produce_batch(TOPIC, [b"one"])
        assert producer.flush(30) == 0
        out = tmp_path / "p"
        assert child("produce", data, out, "other", 5, 1000).wait(120) == 0, Path(f"{out}.err").read_text()
        assert sum(line.startswith("ack ") for line in lines(out)) == 5


def test_a_process_that_closes_its_last_client_hands_the_store_over(tmp_path: Path) -> None:
    """This process serves; a child produces through its socket; this process closes its last
    client (the lock is released, the socket removed): the child, still running, takes over
    and its records keep being acknowledged."""
    data = tmp_path / "data"
    make_topic(data)
    producer = Producer({"bootstrap.servers": f"embedded://{data}"})
    producer.list_topics(timeout=30)
    assert serving_pid(data) == os.getpid()
    out = tmp_path / "p"
    process = child("produce", data, out, "p", 1500, 500)
    try:
        wait_for("the child's first acknowledgements", lambda: any(x.startswith("ack ") for x in lines(out)), 60)
        producer.close()
        assert SharedDirectory._registry.get(str(data)) is None
        wait_for("the child to take over", lambda: serving_pid(data) == process.pid, 30)
        assert process.wait(120) == 0, Path(f"{out}.err").read_text()
    finally:
        stop_all([process])
    assert sum(line.startswith("ack ") for line in lines(out)) == 1500
    assert sorted(read_topic(data)) == sorted(f"p-{i}" for i in range(1500))


def test_fork_after_opening_closes_the_lock_and_refuses_the_parents_clients(tmp_path: Path) -> None:
    """A child forked while this process serves the directory: the parent's client and Store
    refuse with a clear error there, the inherited lock descriptor is closed (the child could
    otherwise keep the directory locked after the parent died), and a new client in the child
    reaches the parent through the socket."""
    data = tmp_path / "data"
    make_topic(data)
    producer = Producer({"bootstrap.servers": f"embedded://{data}"})
    try:
        producer.produce_batch(TOPIC, [b"parent"])
        assert producer.flush(30) == 0
        serving = SharedDirectory._registry[str(data)].serving
        assert serving is not None and serving.broker.store is not None
        store = serving.broker.store
        report = tmp_path / "child"
        pid = os.fork()
        if pid == 0:  # the child: report, then leave without running the parent's cleanup
            code = 1
            try:
                notes = []
                try:
                    store.create_topic("x")
                except Exception as e:
                    notes.append(f"store: {e}")
                try:
                    notes.append(f"forked: {serving.forked}")
                    conn = producer._cluster.transport.open(0, "embedded", 0, 1.0)  # type: ignore[attr-defined]
                except Exception as e:
                    notes.append(f"client: {e}")
                else:
                    notes.append(f"client: opened {conn!r}")
                locks = [fd for fd in os.listdir("/proc/self/fd")
                         if os.path.realpath(f"/proc/self/fd/{fd}") == str(data / ".lock")]  # fmt: skip
                notes.append(f"lock fds: {len(locks)}")
                with Producer({"bootstrap.servers": f"embedded://{data}"}) as fresh:
                    fresh.produce_batch(TOPIC, [b"child"])
                    notes.append(f"fresh: {fresh.flush(30)}")
                report.write_text("\n".join(notes))
                code = 0
            finally:
                os._exit(code)
        deadline = time.monotonic() + 120
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                pytest.fail("the forked child did not finish in 120 s")
            time.sleep(0.05)
        assert os.waitstatus_to_exitcode(status) == 0
        notes = report.read_text().splitlines()
        assert any(n.startswith("store: ") and "forked" in n and "open it again in the child" in n for n in notes), notes
        assert "forked: True" in notes
        assert any(n.startswith("client: ") and "before the process was forked" in n for n in notes), notes
        assert "lock fds: 0" in notes
        assert "fresh: 0" in notes
        producer.produce_batch(TOPIC, [b"parent again"])  # the parent serves on, unharmed
        assert producer.flush(30) == 0
    finally:
        producer.close()
    assert sorted(read_topic(data)) == ["child", "parent", "parent again"]


def test_admin_from_another_process(tmp_path: Path) -> None:
    """Admin calls made in another process act on the store this process serves: a topic made
    there is seen here, a group made here is listed there, a topic deleted there is gone here."""
    data = tmp_path / "data"
    make_topic(data)
    boot = f"embedded://{data}"
    with Producer({"bootstrap.servers": boot}) as producer, \
            Consumer({"bootstrap.servers": boot, "group.id": "here", "auto.offset.reset": "earliest"}) as consumer:  # fmt: skip
        producer.produce_batch(TOPIC, [b"v"] * 5, partition=0)
        assert producer.flush(30) == 0
        consumer.assign([TopicPartition(TOPIC, 0, 0)])
        deadline = time.monotonic() + 30
        while not [m for m in consumer.consume(10, 0.5) if m.error() is None]:
            assert time.monotonic() < deadline
        consumer.commit(asynchronous=False)
        out = tmp_path / "admin"
        assert child("admin", data, out).wait(120) == 0, Path(f"{out}.err").read_text()
        assert lines(out) == ["partitions 3", "groups here", "deleted"]
        topics = producer.list_topics(timeout=30).topics
        assert len(topics["made-by-child"].partitions) == 3
        assert TOPIC not in topics
