"""logstore.client's Consumer against real broker processes (and the embedded transport).

Every wait is bounded: groups use session.timeout.ms=3000 and heartbeat.interval.ms=300 (the
broker allows sessions from 1 s and starts groups without the initial rebalance delay), and
every loop gives up with an AssertionError naming what it waited for.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer as ConfluentConsumer
from confluent_kafka import Producer as ConfluentProducer

from logstore.client.cluster import Cluster
from logstore.client.config import ClientConfig, ConfigError
from logstore.client.consumer import Consumer
from logstore.client.errors import KafkaError, KafkaException
from logstore.client.producer import Producer
from logstore.client.types import OFFSET_BEGINNING, OFFSET_END, OFFSET_INVALID, TopicPartition
from logstore.records import build_batch
from tests.kit.brokerkit import BrokerProcess, create_topic
from tests.kit.brokerkit import produce_numbered as produce

pytestmark = [pytest.mark.integration, pytest.mark.slow]

SESSION = {"session.timeout.ms": 3000, "heartbeat.interval.ms": 300}
DEADLINE_S = 30




def wait_for(
    predicate: Callable[[], bool], what: str, timeout: float = DEADLINE_S, step: float = 0.05
) -> float:
    """Wait until ``predicate()``; returns the seconds it took."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)
    return time.monotonic() - start


def drain(consumer: Consumer, count: int, timeout: float = 15) -> list[Any]:
    """Consume until ``count`` messages (errors included) have come, or fail."""
    got: list[Any] = []
    deadline = time.monotonic() + timeout
    while len(got) < count:
        assert time.monotonic() < deadline, f"got {len(got)} of {count} messages in {timeout} s"
        got += consumer.consume(count - len(got), 0.5)
    return got


class Member:
    """One of our consumers polling on its own thread; its assignment tracked through the callbacks."""

    def __init__(self, bootstrap: str, group: str, topics: list[str], name: str, **config: Any) -> None:
        self.name = name
        self.topics = topics
        conf = {"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                "client.id": name, **SESSION, **config}  # fmt: skip
        self.consumer = Consumer(conf)
        self.lock = threading.Lock()
        self.owned: set[int] = set()
        self.assigned: list[list[int]] = []
        self.revoked: list[list[int]] = []
        self.lost: list[list[int]] = []
        self.records: list[tuple[int, int, bytes]] = []
        self.errors: list[KafkaError] = []
        self.hold = threading.Event()  # set: stop calling poll (the consumer stays open)
        self.close_on_stop = True
        self._stop = threading.Event()
        self.failure: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name=f"member-{name}", daemon=True)

    def start(self) -> Member:
        self.thread.start()
        return self

    def _on_assign(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.lock:
            got = sorted(p.partition for p in partitions)
            self.assigned.append(got)
            self.owned.update(got)

    def _on_revoke(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.lock:
            gone = sorted(p.partition for p in partitions)
            self.revoked.append(gone)
            self.owned.difference_update(gone)

    def _on_lost(self, consumer: Any, partitions: list[TopicPartition]) -> None:
        with self.lock:
            gone = sorted(p.partition for p in partitions)
            self.lost.append(gone)
            self.owned.difference_update(gone)

    def _run(self) -> None:
        c = self.consumer
        try:
            c.subscribe(
                self.topics, on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_lost
            )
            while not self._stop.is_set():
                if self.hold.is_set():
                    time.sleep(0.05)
                    continue
                for m in c.consume(500, 0.1):
                    if m.error() is not None:
                        self.errors.append(m.error())
                    else:
                        with self.lock:
                            self.records.append((m.partition(), m.offset(), m.value()))
            if self.close_on_stop:
                c.close()
        except BaseException as e:  # reported by stop()
            self.failure = e

    def stop(self, close: bool = True) -> None:
        self.close_on_stop = close
        self._stop.set()
        self.thread.join(DEADLINE_S)
        assert not self.thread.is_alive(), f"{self.name} did not stop"
        if self.failure is not None:
            raise AssertionError(f"{self.name} failed: {self.failure!r}") from self.failure

    def snapshot(self) -> set[int]:
        with self.lock:
            return set(self.owned)


def split_exactly(members: list[Member], partitions: int) -> bool:
    """Every partition owned by exactly one of ``members``."""
    owned = [m.snapshot() for m in members]
    return sum(len(o) for o in owned) == partitions and set().union(*owned) == set(range(partitions))


def all_records(members: list[Member]) -> list[tuple[int, int, bytes]]:
    out: list[tuple[int, int, bytes]] = []
    for m in members:
        with m.lock:
            out += m.records
    return out


# -- assign mode -----------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_every_codec_from_confluent_and_from_ours_reads_back(broker: BrokerProcess, codec: str) -> None:
    """Compressed batches with keys, headers and timestamps, written by confluent-kafka and by our
    producer, read by our consumer exactly as written (decoded in C)."""
    base = int(time.time() * 1000) - 60_000
    expected = [
        (
            b"k%d" % (i % 5) if i % 4 else None,
            b"value-%d" % i,
            base + i,
            [("h", b"%d" % i)] if i % 3 == 0 else None,
        )
        for i in range(500)
    ]
    theirs = ConfluentProducer(
        {"bootstrap.servers": broker.bootstrap, "compression.type": codec, "linger.ms": 5}
    )
    for key, value, stamp, headers in expected:
        theirs.produce(f"c-{codec}", value=value, key=key, timestamp=stamp, headers=headers, partition=0)
    assert theirs.flush(DEADLINE_S) == 0
    with Producer({"bootstrap.servers": broker.bootstrap, "compression.type": codec}) as ours:
        for key, value, stamp, headers in expected:
            ours.produce(f"o-{codec}", value=value, key=key, timestamp=stamp, headers=headers, partition=0)
        assert ours.flush(DEADLINE_S) == 0
    for topic in (f"c-{codec}", f"o-{codec}"):
        with Consumer({"bootstrap.servers": broker.bootstrap}) as c:
            c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
            got = drain(c, len(expected))
        assert [m.error() for m in got] == [None] * len(expected)
        assert [m.offset() for m in got] == list(range(len(expected))), topic
        assert [(m.key(), m.value(), m.timestamp()[1], m.headers() or None) for m in got] == expected, topic


def test_assign_positions_seek_pause_watermarks_times_commits(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    topic = "assign"
    create_topic(b, topic, 2)
    base = 1_700_000_000_000
    producer = ConfluentProducer({"bootstrap.servers": b, "linger.ms": 2})
    for n in range(200):
        producer.produce(topic, value=b"%d" % n, key=b"k%d" % n, partition=n % 2, timestamp=base + n // 2,
                         headers=[("h", b"%d" % n)])  # fmt: skip
    assert producer.flush(DEADLINE_S) == 0
    commits: list[tuple[Any, list[TopicPartition]]] = []
    c = Consumer({"bootstrap.servers": b, "group.id": "g-assign", "enable.partition.eof": True,
                  "enable.auto.commit": False, "on_commit": lambda err, ps: commits.append((err, ps))})  # fmt: skip
    p0, p1 = TopicPartition(topic, 0), TopicPartition(topic, 1)
    c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING), TopicPartition(topic, 1, 10)])
    assert sorted(c.assignment()) == [p0, p1]
    got = drain(c, 190 + 2)
    data = [m for m in got if m.error() is None]
    eofs = [m for m in got if m.error() is not None]
    assert sorted((m.partition(), m.error().code()) for m in eofs) == [(0, KafkaError._PARTITION_EOF),
                                                                       (1, KafkaError._PARTITION_EOF)]  # fmt: skip
    assert [m.offset() for m in data if m.partition() == 0] == list(range(100))
    assert [m.offset() for m in data if m.partition() == 1] == list(range(10, 100))
    first = next(m for m in data if m.partition() == 1)
    assert (first.key(), first.value(), first.timestamp(), first.headers()) == (
        b"k21", b"21", (1, base + 10), [("h", b"21")])  # fmt: skip
    assert [tp.offset for tp in c.position([p0, p1])] == [100, 100]

    c.seek(TopicPartition(topic, 0, 50))
    c.pause([p1])
    produce(b, topic, 2, 20, start=200)  # 10 more on each partition
    got = drain(c, 61)
    assert {m.partition() for m in got} == {0}
    assert [m.offset() for m in got[:60]] == list(range(50, 110))
    assert (
        got[60].error().code() == KafkaError._PARTITION_EOF and got[60].offset() == 110
    )  # the seek re-armed it
    assert c.consume(10, 0.5) == []  # partition 1 is paused, partition 0 at its end
    c.resume([p1])
    got = drain(c, 11)
    assert [(m.partition(), m.offset()) for m in got[:10]] == [(1, n) for n in range(100, 110)]
    assert got[10].error().code() == KafkaError._PARTITION_EOF
    got = got[:10]

    assert c.get_watermark_offsets(p1, timeout=5) == (0, 110)
    assert c.get_watermark_offsets(p1, cached=True) == (0, 110)
    times = c.offsets_for_times(
        [TopicPartition(topic, 0, base + 20), TopicPartition(topic, 1, base + 10**12)], 5
    )
    assert [(tp.offset, tp.error) for tp in times] == [(20, None), (-1, None)]

    assert c.committed([p0, p1], timeout=5)[0].offset == OFFSET_INVALID
    result = c.commit(offsets=[TopicPartition(topic, 0, 42)], asynchronous=False)
    assert result is not None and [(tp.partition, tp.offset, tp.error) for tp in result] == [(0, 42, None)]
    c.commit(message=got[-1], asynchronous=True)
    wait_for(lambda: len(c.consume(0, 0.05)) == 0 and len(commits) == 2, "the async commit's on_commit")
    assert commits[1][0] is None and [(tp.partition, tp.offset) for tp in commits[1][1]] == [(1, 110)]
    assert [tp.offset for tp in c.committed([p0, p1], timeout=5)] == [42, 110]
    with pytest.raises(KafkaException):
        c.store_offsets(message=got[-1])  # enable.auto.offset.store=true
    with pytest.raises(KafkaException) as info:
        c.seek(TopicPartition(topic, 5, 0))
    assert info.value.error.code() == KafkaError._STATE
    c.unassign()
    assert c.assignment() == []
    c.close()
    with pytest.raises(RuntimeError):
        c.poll(0)


def test_auto_offset_reset_earliest_latest_none(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    topic = "resets"
    create_topic(b, topic, 1)
    produce(b, topic, 1, 10)

    def member(group: str, reset: str) -> Consumer:
        c = Consumer({"bootstrap.servers": b, "group.id": group, "auto.offset.reset": reset, **SESSION})
        c.subscribe([topic])
        return c

    earliest, latest, none = (
        member("g-earliest", "earliest"),
        member("g-latest", "latest"),
        member("g-none", "none"),
    )
    assert [m.offset() for m in drain(earliest, 10)] == list(range(10))
    wait_for(lambda: not latest.consume(1, 0.1) and latest.position([TopicPartition(topic, 0)])[0].offset == 10,
             "the latest consumer to be positioned at the end")  # fmt: skip
    error = drain(none, 1)[0].error()
    assert error is not None and error.code() == KafkaError._NO_OFFSET
    produce(b, topic, 1, 5, start=10)
    assert [m.offset() for m in drain(latest, 5)] == list(range(10, 15))
    assert none.consume(1, 0.5) == []  # the partition waits for a seek
    none.seek(TopicPartition(topic, 0, 12))
    assert [m.offset() for m in drain(none, 3)] == [12, 13, 14]
    for c in (earliest, latest, none):
        c.close()

    # A fetch out of range: reset by auto.offset.reset, or an error event with "none".
    c = Consumer({"bootstrap.servers": b, "auto.offset.reset": "none"})
    c.assign([TopicPartition(topic, 0, 1000)])
    error = drain(c, 1)[0].error()
    assert error is not None and error.code() == KafkaError.OFFSET_OUT_OF_RANGE
    c.close()
    c = Consumer({"bootstrap.servers": b, "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(topic, 0, 1000)])
    assert drain(c, 1)[0].offset() == 0
    c.assign([TopicPartition(topic, 0, OFFSET_END)])
    assert c.consume(1, 0.5) == []
    c.close()


def test_embedded_transport_assign_and_group(tmp_path: Any) -> None:
    bootstrap = f"embedded://{tmp_path}/data"
    config = ClientConfig.parse({"bootstrap.servers": bootstrap}, "admin")
    cluster = Cluster(config)
    try:
        created = cluster.request(None, 19, {"topics": [{"name": "emb", "num_partitions": 2, "replication_factor": 1,
                                  "assignments": [], "configs": []}], "timeout": 10_000, "validate_only": False})  # fmt: skip
        assert created.topics[0].error_code == 0
        cluster.refresh(["emb"])
        for partition in range(2):
            batch = build_batch([b"%d-%d" % (partition, n) for n in range(50)])
            answer = cluster.request(cluster.leader("emb", partition), 0, {"transactional_id": None, "acks": -1,
                                     "timeout": 10_000, "topic_data": [{"name": "emb", "partition_data": [
                                         {"index": partition, "records": batch}]}]})  # fmt: skip
            assert answer.responses[0].partition_responses[0].error_code == 0
        with Consumer({"bootstrap.servers": bootstrap}) as c:
            c.assign([TopicPartition("emb", 0, OFFSET_BEGINNING), TopicPartition("emb", 1, 45)])
            got = drain(c, 55)
            assert sorted((m.partition(), m.offset()) for m in got) == [(0, n) for n in range(50)] + [
                (1, n) for n in range(45, 50)]  # fmt: skip
            assert c.get_watermark_offsets(TopicPartition("emb", 0), timeout=5) == (0, 50)
        with Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "g-emb", "auto.offset.reset": "earliest"}
        ) as c:
            c.subscribe(["emb"])
            got = drain(c, 100)  # no 3 s wait: the embedded broker starts groups at once
            assert len({(m.partition(), m.offset()) for m in got}) == 100
            c.commit(asynchronous=False)
            assert [
                tp.offset for tp in c.committed([TopicPartition("emb", 0), TopicPartition("emb", 1)])
            ] == [50, 50]
    finally:
        cluster.close()


# -- groups ----------------------------------------------------------------------------------------


def test_group_of_three_splits_partitions_and_reads_each_record_once(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    topic = "three"
    create_topic(b, topic, 6)
    produce(b, topic, 6, 600)
    members = [Member(b, "g-three", [topic], f"m{i}").start() for i in range(3)]
    try:
        wait_for(lambda: split_exactly(members, 6) and all(len(m.snapshot()) == 2 for m in members),
                 "three members with two partitions each")  # fmt: skip
        wait_for(lambda: len(all_records(members)) >= 600, "600 records consumed")
        time.sleep(0.5)
        records = all_records(members)
        assert len(records) == 600 and len({(p, o) for p, o, _ in records}) == 600
        assert sorted(int(v) for _, _, v in records) == list(range(600))

        members[0].stop()  # close: commit, on_revoke, LeaveGroup
        rest = members[1:]
        wait_for(lambda: split_exactly(rest, 6) and all(len(m.snapshot()) == 3 for m in rest),
                 "the two others to take over the partitions of the one that left")  # fmt: skip
        produce(b, topic, 6, 60, start=600)
        wait_for(lambda: len(all_records(members)) >= 660, "the 60 new records")
        time.sleep(0.5)
        records = all_records(members)
        assert len(records) == 660 and len({(p, o) for p, o, _ in records}) == 660
        assert not any(m.errors for m in members), [m.errors for m in members]
    finally:
        for m in members:
            if m.thread.is_alive():
                m.stop()


CHILD = textwrap.dedent(
    """
    import sys
    from logstore.client.consumer import Consumer
    c = Consumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 3000,
                  "heartbeat.interval.ms": 300, "auto.offset.reset": "earliest"})
    c.subscribe([sys.argv[3]], on_assign=lambda c, ps: print("assigned", len(ps), flush=True))
    while True:
        c.poll(0.1)
    """
)


def test_killed_member_is_replaced_after_the_session_timeout(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    topic = "killed"
    create_topic(b, topic, 6)
    survivor = Member(b, "g-killed", [topic], "survivor").start()
    child = subprocess.Popen([sys.executable, "-c", CHILD, b, "g-killed", topic], stdout=subprocess.PIPE, text=True,
                             env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})  # fmt: skip
    lines: list[str] = []
    reader = threading.Thread(target=lambda: lines.extend(iter(child.stdout.readline, "")), daemon=True)  # type: ignore[union-attr]
    reader.start()
    try:
        wait_for(
            lambda: "assigned 3\n" in lines and len(survivor.snapshot()) == 3, "a 3/3 split with the child"
        )
        child.kill()  # no LeaveGroup, no commit: the coordinator finds out when the session expires
        child.wait(10)
        took = wait_for(lambda: len(survivor.snapshot()) == 6, "the survivor to take over all six partitions")
        assert took > 1.5, f"taken over after {took:.1f} s: before the 3 s session could have expired"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(10)
        survivor.stop()


def test_cooperative_sticky_revokes_only_what_moves(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    topic = "coop"
    create_topic(b, topic, 6)
    produce(b, topic, 6, 300)
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    first = Member(b, "g-coop", [topic], "first", **strategy).start()
    second: Member | None = None
    try:
        wait_for(lambda: len(first.snapshot()) == 6, "the first member to own all six")
        second = Member(b, "g-coop", [topic], "second", **strategy).start()
        members = [first, second]
        wait_for(lambda: split_exactly(members, 6) and len(second.snapshot()) == 3, "a 3/3 split")
        wait_for(lambda: len(all_records(members)) >= 300, "every record")
        with first.lock, second.lock:
            assert [a for a in first.assigned if a] == [[0, 1, 2, 3, 4, 5]]
            assert len(first.revoked) == 1 and len(first.revoked[0]) == 3  # only what moved, never all six
            assert [a for a in second.assigned if a] == first.revoked
            assert not second.revoked and not first.lost and not second.lost
        time.sleep(0.3)
        records = all_records(members)
        assert len(records) == len({(p, o) for p, o, _ in records}) == 300
    finally:
        first.stop()
        if second is not None:
            second.stop()


def test_static_member_restarts_without_a_rebalance(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    topic = "static"
    create_topic(b, topic, 6)
    config = {"session.timeout.ms": 10_000}
    a = Member(b, "g-static", [topic], "a", **config, **{"group.instance.id": "instance-a"}).start()
    other = Member(b, "g-static", [topic], "b", **config, **{"group.instance.id": "instance-b"}).start()
    a2: Member | None = None
    try:
        wait_for(lambda: split_exactly([a, other], 6) and len(a.snapshot()) == 3, "a 3/3 split")
        time.sleep(1)  # settle: no rebalance in flight
        before = (list(other.assigned), list(other.revoked))
        owned_a = a.snapshot()
        a.stop()  # a static member's close sends no LeaveGroup
        a2 = Member(b, "g-static", [topic], "a2", **config, **{"group.instance.id": "instance-a"}).start()
        wait_for(lambda: a2.snapshot() == owned_a, "the restarted member to get its partitions back")
        time.sleep(1.5)  # several heartbeats: a rebalance would have reached the other member by now
        assert (other.assigned, other.revoked) == before, "the other member saw a rebalance"
        assert other.snapshot() == set(range(6)) - owned_a
    finally:
        for m in (a, other, a2):
            if m is not None and m.thread.is_alive():
                m.stop()


def test_auto_commit_and_a_new_member_resumes(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    topic = "autocommit"
    create_topic(b, topic, 2)
    produce(b, topic, 2, 100)
    commits: list[Any] = []
    c = Consumer({"bootstrap.servers": b, "group.id": "g-auto", "auto.offset.reset": "earliest",
                  "auto.commit.interval.ms": 200, "on_commit": lambda err, ps: commits.append(err), **SESSION})  # fmt: skip
    checker = Consumer({"bootstrap.servers": b, "group.id": "g-auto"})
    parts = [TopicPartition(topic, 0), TopicPartition(topic, 1)]
    c.subscribe([topic])
    assert len(drain(c, 100)) == 100
    wait_for(lambda: not c.consume(1, 0.1) and [tp.offset for tp in checker.committed(parts, 5)] == [50, 50],
             "auto-commit of the consumed positions")  # fmt: skip
    wait_for(lambda: not c.consume(1, 0.05) and bool(commits), "on_commit, served by a later poll")
    assert all(err is None for err in commits)
    c.close()
    produce(b, topic, 2, 40, start=100)
    c2 = Consumer({"bootstrap.servers": b, "group.id": "g-auto", "auto.offset.reset": "earliest", **SESSION})
    c2.subscribe([topic])
    got = drain(c2, 40)
    assert sorted(int(m.value()) for m in got) == list(range(100, 140))
    assert c2.consume(1, 0.5) == []
    c2.close()
    checker.close()


def test_max_poll_interval_expiry_removes_the_member(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    topic = "maxpoll"
    create_topic(b, topic, 6)
    slow = Member(b, "g-maxpoll", [topic], "slow", **{"max.poll.interval.ms": 3000}).start()
    busy = Member(b, "g-maxpoll", [topic], "busy").start()
    try:
        wait_for(lambda: split_exactly([slow, busy], 6) and len(slow.snapshot()) == 3, "a 3/3 split")
        slow.hold.set()  # the application stops polling
        took = wait_for(lambda: len(busy.snapshot()) == 6, "the polling member to get all six")
        assert took > 2.0, f"{took:.1f} s: sooner than max.poll.interval.ms=3000"
        slow.hold.clear()
        wait_for(lambda: any(e.code() == KafkaError._MAX_POLL_EXCEEDED for e in slow.errors),
                 "the _MAX_POLL_EXCEEDED event on the next poll")  # fmt: skip
        with slow.lock:
            assert slow.lost and len(slow.lost[0]) == 3
        wait_for(lambda: split_exactly([slow, busy], 6) and len(slow.snapshot()) == 3, "the slow member back")
    finally:
        slow.hold.clear()
        slow.stop()
        busy.stop()


class ConfluentMember(threading.Thread):
    """A confluent-kafka consumer in the same group, its assignment tracked through its callbacks."""

    def __init__(self, bootstrap: str, group: str, topic: str, **config: Any) -> None:
        super().__init__(daemon=True)
        self.consumer = ConfluentConsumer({"bootstrap.servers": bootstrap, "group.id": group,
                                           "auto.offset.reset": "earliest", **SESSION, **config})  # fmt: skip
        self.topic = topic
        self.owned: set[int] = set()
        self.records = 0
        self.stopping = threading.Event()
        self.lock = threading.Lock()

    def run(self) -> None:
        def on_assign(c: Any, ps: Any) -> None:
            with self.lock:
                self.owned.update(p.partition for p in ps)

        def on_revoke(c: Any, ps: Any) -> None:
            with self.lock:
                self.owned.difference_update(p.partition for p in ps)

        self.consumer.subscribe([self.topic], on_assign=on_assign, on_revoke=on_revoke)
        while not self.stopping.is_set():
            for m in self.consumer.consume(100, 0.1):
                if m.error() is None:
                    self.records += 1
        self.consumer.close()

    def snapshot(self) -> set[int]:
        with self.lock:
            return set(self.owned)


def test_group_mixing_our_consumers_and_confluent_kafka(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    topic = "mixed"
    create_topic(b, topic, 6)
    produce(b, topic, 6, 600)
    range_ = {"partition.assignment.strategy": "range"}
    ours = Member(b, "g-mixed", [topic], "ours", **range_).start()
    theirs = ConfluentMember(b, "g-mixed", topic, **range_)
    ours2: Member | None = None
    try:
        wait_for(lambda: len(ours.snapshot()) == 6, "our consumer (the leader) to own all six")
        theirs.start()

        def split(mine: Member) -> bool:
            a, c = mine.snapshot(), theirs.snapshot()
            return not a & c and a | c == set(range(6)) and len(a) == len(c) == 3

        wait_for(lambda: split(ours), "range to split 3/3 between ours (leader) and confluent-kafka")
        wait_for(lambda: len(all_records([ours])) == 600, "ours to read the first 600")
        produce(b, topic, 6, 60, start=600)  # 10 a partition
        # ours committed on the revoke, so confluent-kafka reads only the new records of its three
        wait_for(lambda: len(all_records([ours])) == 630 and theirs.records == 30, "both kinds to read")
        ours.stop()  # confluent-kafka is left alone: it becomes the leader
        wait_for(lambda: theirs.snapshot() == set(range(6)), "confluent-kafka to own all six")
        ours2 = Member(b, "g-mixed", [topic], "ours2", **range_).start()
        wait_for(lambda: split(ours2), "range to split 3/3 with confluent-kafka as the leader")
        produce(b, topic, 6, 60, start=660)
        wait_for(
            lambda: len(all_records([ours2])) == 30 and theirs.records == 60, "both to read their halves"
        )
        time.sleep(0.3)
        assert len(all_records([ours2])) == 30 and theirs.records == 60
    finally:
        theirs.stopping.set()
        if theirs.is_alive():
            theirs.join(DEADLINE_S)
        for m in (ours, ours2):
            if m is not None and m.thread.is_alive():
                m.stop()


def test_regex_subscription_follows_new_topics(fast_broker: BrokerProcess) -> None:
    b = fast_broker.bootstrap
    for topic, partitions in (("rx-a", 2), ("rx-b", 1), ("other", 1)):
        create_topic(b, topic, partitions)
        produce(b, topic, partitions, 4)
    assigned: list[set[tuple[str, int]]] = []
    c = Consumer({"bootstrap.servers": b, "group.id": "g-regex", "auto.offset.reset": "earliest",
                  "topic.metadata.refresh.interval.ms": 300, "value.deserializer": lambda v, ctx: (ctx.topic, int(v)),
                  **SESSION})  # fmt: skip
    c.subscribe(["^rx-.*"], on_assign=lambda _, ps: assigned.append({(p.topic, p.partition) for p in ps}))
    got = drain(c, 8)
    assert sorted(m.value() for m in got) == sorted(
        [("rx-a", n) for n in range(4)] + [("rx-b", n) for n in range(4)]
    )
    assert assigned[-1] == {("rx-a", 0), ("rx-a", 1), ("rx-b", 0)}
    create_topic(b, "rx-c", 1)
    produce(b, "rx-c", 1, 3)
    got = drain(c, 3)
    assert sorted(m.value() for m in got) == [("rx-c", 0), ("rx-c", 1), ("rx-c", 2)]
    assert {tp.topic for tp in c.assignment()} == {"rx-a", "rx-b", "rx-c"}
    assert c.consume(1, 0.3) == []  # never "other"
    c.close()


# -- a peer that is not a broker ---------------------------------------------------------------------


def test_a_peer_answering_garbage_fails_within_the_timeout() -> None:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    port = server.getsockname()[1]
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except OSError:
                continue
            try:
                conn.sendall(os.urandom(4096))
            except OSError:
                pass
            finally:
                conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "g-garbage",
                      "socket.connection.setup.timeout.ms": 2000, "request.timeout.ms": 2000})  # fmt: skip
        start = time.monotonic()
        with pytest.raises(KafkaException):
            c.get_watermark_offsets(TopicPartition("t", 0), timeout=5)
        with pytest.raises(KafkaException):
            c.committed([TopicPartition("t", 0)], timeout=5)
        assert time.monotonic() - start < 12
        c.subscribe(["t"])
        start = time.monotonic()
        event = c.poll(1.0)
        assert event is None or event.error() is not None
        assert time.monotonic() - start < 6
        start = time.monotonic()
        c.close()
        assert time.monotonic() - start < 6
    finally:
        stop.set()
        thread.join(5)
        server.close()


def test_config_and_state_errors() -> None:
    with pytest.raises(ConfigError, match="nope"):
        Consumer(
            {"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "partition.assignment.strategy": "nope"}
        )
    with pytest.raises(ConfigError, match=r"heartbeat\.interval\.ms"):
        Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": "g", "session.timeout.ms": 3000,
                  "heartbeat.interval.ms": 3000})  # fmt: skip
    c = Consumer({"bootstrap.servers": "127.0.0.1:1", "group.id": f"g-{uuid.uuid4()}"})
    c.assign([TopicPartition("t", 0)])
    with pytest.raises(KafkaException) as info:
        c.subscribe(["t"])
    assert info.value.error.code() == KafkaError._STATE
    c.unassign()
    c.close()
    no_group = Consumer({"bootstrap.servers": "127.0.0.1:1"})
    with pytest.raises(KafkaException):
        no_group.subscribe(["t"])
    with pytest.raises(KafkaException):
        no_group.commit(offsets=[TopicPartition("t", 0, 1)])
    no_group.close()


def test_embedded_group_starts_without_the_initial_rebalance_delay(tmp_path: Any) -> None:
    """In one process a 3 s wait for more members at the first subscribe is a stall: the embedded
    broker runs with group.initial.rebalance.delay.ms=0, and a group consumer reads at once."""
    from logstore.embedded import EmbeddedBroker

    bootstrap = f"embedded://{tmp_path}"
    with Producer({"bootstrap.servers": bootstrap}) as p:
        p.produce_batch("quick", [b"v"] * 10)
        assert p.flush(10) == 0
        embedded = EmbeddedBroker._registry[str(tmp_path)]
        assert embedded.broker.config.values["group.initial.rebalance.delay.ms"] == 0
        with Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "quick", "auto.offset.reset": "earliest"}
        ) as c:
            c.subscribe(["quick"])
            assert len(drain(c, 10)) == 10


def test_embedded_close_with_a_fetch_in_flight_leaves_nothing_behind(
    tmp_path: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A group consumer closes with its next Fetch in flight, then the last client closes the
    embedded broker: every request still being served is settled before the loop stops (it
    used to run on against the closed Store, its error logged as never retrieved: 3 rounds of 5)."""
    import asyncio
    import gc
    import logging

    from logstore.embedded import EmbeddedBroker

    caplog.set_level(logging.ERROR, logger="asyncio")
    for round_ in range(5):
        bootstrap = f"embedded://{tmp_path}/r{round_}"
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce_batch("e", [b"x" * 100] * 20_000)
        assert producer.flush(30) == 0
        embedded = EmbeddedBroker._registry[f"{tmp_path}/r{round_}"]
        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": "g", "auto.offset.reset": "earliest"}
        )
        consumer.subscribe(["e"])
        assert len(drain(consumer, 20_000)) == 20_000
        consumer.close()
        producer.close()  # the last user: the broker closes
        gc.collect()  # an unretrieved task error is reported when its task is collected
        assert embedded.loop.is_closed()
        assert not [t for t in asyncio.all_tasks(embedded.loop) if not t.done()]
    assert not [r for r in caplog.records if r.name == "asyncio"], caplog.text


def test_the_consumer_takes_the_seeds_eight_steps_in_order(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Seed 000's eight steps (seed 002 draws the same sequence, after a Metadata request):
    FindCoordinator, JoinGroup, SyncGroup, OffsetFetch, ListOffsets (no committed offset yet),
    Fetch, OffsetCommit, Heartbeat, as the API keys a subscribing consumer sends."""
    from logstore.embedded import EmbeddedConnection

    sent: list[int] = []
    real_send = EmbeddedConnection.send

    def recording(self: EmbeddedConnection, api_key: int, fields: dict[str, Any], **kw: Any) -> Any:
        sent.append(api_key)
        return real_send(self, api_key, fields, **kw)

    bootstrap = f"embedded://{tmp_path}"
    with Producer({"bootstrap.servers": bootstrap}) as p:
        p.produce_batch("steps", [b"a", b"b"])
        assert p.flush(10) == 0
        monkeypatch.setattr(EmbeddedConnection, "send", recording)
        with Consumer({"bootstrap.servers": bootstrap, "group.id": "steps", "auto.offset.reset": "earliest",
                       "enable.auto.commit": False, "heartbeat.interval.ms": 100}) as c:  # fmt: skip
            c.subscribe(["steps"])
            assert [m.value() for m in drain(c, 2)] == [b"a", b"b"]
            c.commit(asynchronous=False)
            wait_for(lambda: 12 in sent, "a heartbeat", timeout=10)
    metadata, steps, heartbeat, sync = 3, [10, 11, 14, 9, 2, 1, 8], 12, 14
    assert metadata in sent and sent.index(metadata) < sent.index(10)
    firsts = [sent.index(api) for api in steps]
    assert firsts == sorted(firsts), f"first occurrences {dict(zip(steps, firsts, strict=True))} in {sent}"
    # Heartbeats are periodic from the end of SyncGroup on (the commit may come before or after one).
    assert sent.index(heartbeat) > sent.index(sync)


def test_incremental_assign_and_unassign_change_only_what_they_name(tmp_path: Any) -> None:
    """confluent-kafka's cooperative calls in assign mode: partitions are added and removed one by
    one, each added at its own offset, the others untouched."""
    from logstore.client.admin import AdminClient as OurAdmin
    from logstore.client.admin import NewTopic as OurNewTopic

    bootstrap = f"embedded://{tmp_path}"
    with Producer({"bootstrap.servers": bootstrap}) as p:
        with OurAdmin({"bootstrap.servers": bootstrap}) as admin:
            admin.create_topics([OurNewTopic("inc", 3)])["inc"].result(10)
        for partition in range(3):
            for n in range(5):
                p.produce("inc", b"%d-%d" % (partition, n), partition=partition)
        assert p.flush(10) == 0
        with Consumer({"bootstrap.servers": bootstrap}) as c:
            c.incremental_assign([TopicPartition("inc", 0, OFFSET_BEGINNING)])
            assert [m.value() for m in drain(c, 5)] == [b"0-%d" % n for n in range(5)]
            c.incremental_assign([TopicPartition("inc", 2, 3)])
            assert sorted((tp.topic, tp.partition) for tp in c.assignment()) == [("inc", 0), ("inc", 2)]
            assert [m.value() for m in drain(c, 2)] == [b"2-3", b"2-4"]
            c.incremental_unassign([TopicPartition("inc", 0)])
            assert [(tp.topic, tp.partition) for tp in c.assignment()] == [("inc", 2)]
            p.produce("inc", b"0-late", partition=0)
            p.produce("inc", b"2-late", partition=2)
            assert p.flush(10) == 0
            assert [m.value() for m in drain(c, 1)] == [b"2-late"]
            assert c.consume(10, 0.5) == []  # partition 0 is no longer read
