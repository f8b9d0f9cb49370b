"""I/O errors injected for real (libfiu, ``tests/kit/fiu.py``) into a broker under load.

Each round starts the broker under ``fiu-run -x`` on the same data and runs
idempotent acks=all producers (one topic with the default flush, one with
``flush.messages=1`` so fsyncs are in the acknowledgement path; segments
rolled every 300 ms and checkpoints written every 200 ms, so rolls and
checkpoint writes happen within a round) and a consumer on a TLS listener
(so fetches read segments with pread rather than sendfile). Once records
flow both ways, one failure point is switched on until the broker's log shows
that it hit (at most a few seconds): EIO or ENOSPC from pwrite (segment and
index appends), EIO from fsync (checkpoints, directories), fdatasync (segment
flushes), ftruncate (an index trimmed at a roll) and pread (a fetch's read). Then the broker must
still be running and must stop cleanly. After the last round the broker
starts without faults and the checker reads everything back:

- every acknowledged record is there once, at the offset its acknowledgement
  named (a failed write or fsync was never acknowledged, nothing was lost);
- nothing is read twice and nothing is read that was not sent (nothing served
  wrong);
- the consumer during the faults got only records that were sent.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import Consumer, KafkaError, Message, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from tests.kit import fiu
from tests.kit.brokerkit import BrokerProcess, create_topic, free_port, read_records, read_values
from tests.kit.certs import TestPKI

pytestmark = [pytest.mark.slow, pytest.mark.integration]

TOPICS: dict[str, dict[str, str]] = {"plain": {}, "synced": {"flush.messages": "1"}}
PARTITIONS = 3
FAULT_MAX_S = 8.0  # a fault stays on until the broker's log shows it hit, or this long
READ_POINTS = frozenset({"posix/io/rw/pread"})
AFTER_S = 0.5  # load after the fault
PAD = b"." * 200  # fetches of the backlog above the broker's sendfile minimum (16 KiB): pread over TLS

Acked = dict[bytes, tuple[str, int, int]]  # value -> (topic, partition, offset)
ASSIGNMENT = [(t, p) for t in TOPICS for p in range(PARTITIONS)]


OVERRIDES = {"log.segment.bytes": str(256 * 1024), "log.roll.ms": "300", "log.flush.offset.checkpoint.interval.ms": "200"}


def _rounds(seed: int) -> list[tuple[str, int, float]]:
    """Every (point, errno) once, in a shuffled order, each failing always or on 30% of calls."""
    rng = random.Random(seed)
    rounds = [(point, error, rng.choice((1.0, 0.3))) for point, errors in fiu.POINTS.items() for error in errors]
    rng.shuffle(rounds)
    return rounds


def _consume(config: dict[str, str], stop: threading.Event, seen: list[bytes], errors: list[str]) -> None:
    consumer = Consumer({**config, "group.id": f"reader-{time.monotonic_ns()}", "enable.auto.commit": False,
                         "fetch.wait.max.ms": 50})  # fmt: skip
    consumer.assign([TopicPartition(t, p, 0) for t in TOPICS for p in range(PARTITIONS)])
    try:
        while not stop.is_set():
            for message in consumer.consume(500, 0.1):
                if message.error() is None:
                    seen.append(message.value() or b"")
                else:
                    errors.append(message.error().name())
    finally:
        consumer.close()


def _round(broker: BrokerProcess, tls: dict[str, str], number: int, fault: tuple[str, int, float], acked: Acked,
           sent: set[bytes], seen: list[bytes]) -> tuple[dict[str, int], bool]:  # fmt: skip
    """One round of load with ``fault`` switched on once records flow; the delivery errors by
    name, and whether the broker's log showed the fault."""
    point, error, probability = fault
    failures: dict[str, int] = {}

    def report(err: KafkaError | None, msg: Message) -> None:
        if err is None:
            acked[msg.value() or b""] = (msg.topic() or "", msg.partition() or 0, msg.offset() or 0)
        else:
            failures[err.name()] = failures.get(err.name(), 0) + 1

    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "acks": "all",
                         "linger.ms": 2, "delivery.timeout.ms": 6000, "request.timeout.ms": 3000,
                         "on_delivery": report})  # fmt: skip
    stop, errors = threading.Event(), []
    injector = fiu.Fiu(broker.proc.pid if broker.proc else 0)
    logged = len(broker.log_text())
    acked_before, seen_before = len(acked), len(seen)
    start, n = time.monotonic(), 0
    on_at: float | None = None
    if point in READ_POINTS:  # before the reader's first fetches: they read the backlog in large spans
        injector.enable(point, error, probability)
        on_at = start
    reader = threading.Thread(target=_consume, args=(tls, stop, seen, errors), daemon=True)
    reader.start()
    off_at: float | None = None
    hit = False
    try:
        while n < 50_000 and time.monotonic() - start < 30:
            value = b"r%d-%d|" % (number, n) + PAD
            producer.produce(list(TOPICS)[n % 2], value=value, partition=(n // 2) % PARTITIONS)
            sent.add(value)
            n += 1
            producer.poll(0)
            now = time.monotonic()
            if on_at is None and len(acked) > acked_before + 50 and len(seen) > seen_before + 50:
                injector.enable(point, error, probability)  # records flow both ways: now
                on_at = now
            elif on_at is not None and off_at is None and n % 50 == 0:
                hit = f"[Errno {error}]" in broker.log_text()[logged:]
                if hit or now - on_at > FAULT_MAX_S:
                    injector.disable(point)
                    off_at = now
            elif off_at is not None and now - off_at > AFTER_S:
                break
            time.sleep(0.001)
    finally:
        if on_at is not None and off_at is None:
            injector.disable(point)
        producer.flush(15)
        stop.set()
        reader.join(10)
    return failures, hit


def _backlog(bootstrap: str, acked: Acked, sent: set[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for n in range(3000):
        value = b"backlog-%d|" % n + PAD
        sent.add(value)
        producer.produce(list(TOPICS)[n % 2], value=value, partition=(n // 2) % PARTITIONS,
                         on_delivery=lambda err, msg: err or acked.__setitem__(
                             msg.value(), (msg.topic(), msg.partition(), msg.offset())))  # fmt: skip
        producer.poll(0)
    assert producer.flush(30) == 0 and len(acked) == 3000


def test_io_errors_at_every_point_lose_nothing_and_crash_nothing(tmp_path: Path) -> None:
    reason = fiu.unavailable()
    if reason:
        pytest.skip(reason)
    pki = TestPKI(tmp_path / "pki")
    server = pki.issue("broker", ip="127.0.0.1")
    plain, secure = free_port(), free_port()
    overrides = {**OVERRIDES, "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,SSL:SSL",
                 "ssl.keystore.type": "PEM", "ssl.keystore.location": server.keystore}  # fmt: skip
    broker = BrokerProcess(str(tmp_path / "data"), overrides, port=plain,
                           listeners=f"PLAINTEXT://127.0.0.1:{plain},SSL://127.0.0.1:{secure}")  # fmt: skip
    tls = {"bootstrap.servers": f"127.0.0.1:{secure}", "security.protocol": "SSL", "ssl.ca.location": pki.ca_path}
    broker.start()
    for topic, config in TOPICS.items():
        create_topic(broker.bootstrap, topic, PARTITIONS, config=config)
    acked: Acked = {}
    sent: set[bytes] = set()
    seen: list[bytes] = []
    _backlog(broker.bootstrap, acked, sent)  # every round's reader starts with more than a sendfile's worth
    assert broker.stop() == 0
    broker.wrapper = fiu.WRAPPER
    outcomes = []
    for number, fault in enumerate(_rounds(seed=24)):
        broker.start()
        failures, hit = _round(broker, tls, number, fault, acked, sent, seen)
        assert broker.alive, f"round {number} ({fault}): the broker died:\n{broker.log_text()[-3000:]}"
        code = broker.stop()
        assert code == 0, f"round {number} ({fault}): exit {code}:\n{broker.log_text()[-3000:]}"
        assert hit, f"round {number} ({fault}): the fault never hit in {FAULT_MAX_S} s:\n{broker.log_text()[-2000:]}"
        outcomes.append((fault, failures))
    broker.wrapper = ()
    broker.start()
    try:
        found = read_records(broker.bootstrap, ASSIGNMENT, len(acked), timeout=60)
    finally:
        broker.stop()
    where: dict[bytes, list[tuple[str, int, int]]] = {}
    for topic, partition, offset, value in found:
        where.setdefault(value, []).append((topic, partition, offset))
    lost = [v for v, at in acked.items() if v not in where]
    moved = [v for v, at in acked.items() if v in where and where[v] != [at]]
    twice = [v for v, at in where.items() if len(at) > 1]
    unknown = [v for v in where if v not in sent] + [v for v in seen if v not in sent]
    summary = "\n".join(f"{fault}: {failures}" for fault, failures in outcomes)
    assert not lost and not moved and not twice and not unknown, (
        f"lost {lost[:5]} ({len(lost)}), moved {moved[:5]} ({len(moved)}), twice {twice[:5]} ({len(twice)}), "
        f"unknown {unknown[:5]} ({len(unknown)})\n{summary}"
    )
    assert len(acked) > 1000, summary


@pytest.mark.parametrize("client", ["confluent", "logstore"])
def test_a_corrupt_batch_on_disk_is_an_error_for_that_fetch_never_data(tmp_path: Path, client: str) -> None:
    """A bit flipped on disk under a record (a clean shutdown: no recovery scans it) reaches the
    consumer as an error for the partition, with the records before it delivered and not one
    wrong byte; the other partition reads on."""
    import logstore.client as ours

    module: Any = ours if client == "logstore" else confluent_kafka
    broker = BrokerProcess(str(tmp_path / "data")).start()
    try:
        create_topic(broker.bootstrap, "c", 2)
        producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
        for n in range(200):
            producer.produce("c", value=b"value-%04d" % n, partition=n % 2)
            producer.flush(10)  # one batch per record
        assert producer.flush(10) == 0
    finally:
        assert broker.stop() == 0
    segment = tmp_path / "data" / "c-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    at = data.find(b"value-0100")  # record 50 of partition 0
    assert at > 0
    data[at + 7] ^= 0x01  # "value-0100" -> "value-0110" on disk, its batch CRC now wrong
    segment.write_bytes(bytes(data))
    broker.start()
    consumer = module.Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "check.crcs": True,
                                "enable.auto.commit": False})  # fmt: skip
    consumer.assign([module.TopicPartition("c", p, 0) for p in (0, 1)])
    values: dict[int, list[bytes]] = {0: [], 1: []}
    errors: list[str] = []
    deadline = time.monotonic() + 20
    try:
        while time.monotonic() < deadline and not (errors and len(values[1]) == 100):
            for message in consumer.consume(100, 0.2):
                if message.error() is not None:
                    errors.append(f"{message.partition()}: {message.error()}")
                else:
                    values[message.partition()].append(message.value())
    finally:
        consumer.close()
        broker.stop()
    assert errors and all(e.startswith("0") for e in errors), errors
    assert values[0] == [b"value-%04d" % n for n in range(0, 100, 2)], values[0][-3:]  # up to the bad one
    assert values[1] == [b"value-%04d" % n for n in range(1, 200, 2)]
    assert b"value-0110" not in values[0]


def test_a_segment_cut_short_under_its_map_fails_its_directory_not_the_broker(tmp_path: Path) -> None:
    """A mapped page that cannot be read in (here: a sealed segment cut short under the broker's map,
    whose pages past the cut raise SIGBUS as a bad block's do) is an I/O error for that read: the
    segment's log directory fails (KAFKA_STORAGE_ERROR, no leader), the broker lives on, the other
    directory keeps serving, and SIGTERM exits 0. Without native/guard.c the broker dies of SIGBUS."""
    dirs = [tmp_path / "a", tmp_path / "b"]
    broker = BrokerProcess(",".join(map(str, dirs)), {"log.segment.bytes": str(64 << 10)},
                           log_dir=str(tmp_path)).start()  # fmt: skip
    try:
        create_topic(broker.bootstrap, "cut", 4)
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 5})
        for n in range(4000):
            producer.produce("cut", b"%05d" % n + PAD, partition=n % 4)
        assert producer.flush(30) == 0
        assert len(read_values(broker.bootstrap, "cut", "read_uncommitted", 4000)) == 4000  # maps the segments
        placed = {d: sorted(int(p.name.split("-")[1]) for p in d.glob("cut-*")) for d in dirs}
        assert placed[dirs[0]] and placed[dirs[1]], placed
        victim = placed[dirs[0]][0]
        segment = dirs[0] / f"cut-{victim}" / "00000000000000000000.log"
        assert segment.stat().st_size > 32 << 10
        os.truncate(segment, 4096)

        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "g", "enable.auto.commit": False})
        consumer.assign([TopicPartition("cut", victim, 0)])
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and "failed" not in broker.log_text():
            consumer.poll(0.2)
        consumer.close()
        assert broker.alive, broker.log_text()[-3000:]
        assert "could not be read in" in broker.log_text(), broker.log_text()[-3000:]
        shown = AdminClient({"bootstrap.servers": broker.bootstrap}).list_topics("cut", timeout=10).topics["cut"]
        assert all(shown.partitions[p].leader == -1 for p in placed[dirs[0]])
        assert all(shown.partitions[p].leader == 0 for p in placed[dirs[1]])
        # The other directory serves on: new records are acknowledged and everything reads back.
        for n in range(4000, 4100):
            producer.produce("cut", b"%05d" % n + PAD, partition=placed[dirs[1]][n % len(placed[dirs[1]])])
        assert producer.flush(30) == 0
        kept = read_records(broker.bootstrap, [("cut", p) for p in placed[dirs[1]]], 1000 * len(placed[dirs[1]]) + 100)
        assert sorted(v[:5] for _, _, _, v in kept) == sorted(
            [b"%05d" % n for n in range(4000) if n % 4 in placed[dirs[1]]]
            + [b"%05d" % n for n in range(4000, 4100)]
        )
        assert broker.stop() == 0
    finally:
        if broker.alive:
            broker.kill()
