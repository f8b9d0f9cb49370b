"""Chaos: a replicated workload under a nemesis, then a checker (issue 12's fault tests, issue 24's network faults).

A ZooKeeper and three ``logstore broker`` processes; a topic of 3 partitions
at replication factor 3 with ``min.insync.replicas=2``; idempotent
confluent-kafka producers with acks=all, each record's value unique.
Meanwhile a nemesis, one fault at a time, picks among the process faults:

- ``kill``: kill -9 a broker, restart it a moment later on its data;
- ``kill-controller``: the same, to the active controller;
- ``pause``: SIGSTOP a broker for less than its ZooKeeper session, then SIGCONT;
- ``zombie``: SIGSTOP a broker past its session (its registration, and any
  controllership, go; leaders move), then SIGCONT: it wakes believing it
  leads, and must be fenced;
- ``term``: SIGTERM a broker (a clean stop), restart it;

and, with ``network=True`` (``--network``, the default where the machine can),
the network faults, each healed after a bounded time:

- ``isolate``: a broker cut off (both ways) from the two other brokers, not
  from ZooKeeper nor from the clients, for 0.5 s to twice the session;
- ``zk-cut``: a broker cut off from ZooKeeper only, short of its session or
  past it (then its session expires while it still serves clients and
  believes it leads: the zombie leader, which must be fenced);
- ``asymmetric``: one direction of one broker-broker link dropped (the
  packets from A to B; B's to A still flow);
- ``slow``: a broker's links both ways a slow pipe (256 kbit/s to 4 Mbit/s)
  that queues packets up to 50-300 ms and drops past that, for 2-6 s;
- ``flaky``: every TCP connection of a broker (to brokers, ZooKeeper and
  clients) reset, again every 0.2-1 s, for 2-5 s.

The first faults are each kind once, in a random order; then they are drawn
by weight (``PROCESS_FAULTS``, ``NETWORK_FAULTS``).

**How the network faults are made** (``bench/netfaults.py`` has the details):
the brokers and ZooKeeper each run in a network namespace of their own on
``10.77.0.0/24``, joined by veths to a bridge in a hub namespace; no address
is added to the root namespace. A broker has two listeners: ``INTERNAL`` on
its namespace address for ``inter.broker.listener.name`` (replication, the
controller's requests), and ``EXTERNAL``, advertised as a 127.0.0.1 port
where a forwarder thread in this process accepts the clients and connects
onward from inside the hub namespace. A cut is a kernel ``tc`` filter in the
sending namespace that classifies the packets to the cut address into an
``htb`` class whose queue holds nothing: they are dropped silently, so TCP
retransmits and times out as on a real partition, in both directions of a
link or one. Why namespaces rather than a TCP proxy per link: the faults
are then the kernel's (real timeouts and retransmissions, a RST from
``ss -K``, no proxy that buffers or acknowledges for a peer), they apply to
every connection of a link, ZooKeeper's and the controller's included,
without teaching the brokers about proxies or identifying the sender of a
connection, and the brokers run unchanged with their own listeners. It
needs root, ``ip``, ``tc`` and ``ss`` (iproute2); this kernel has no
``sch_netem`` nor ``action drop``, hence the ``htb`` drop class and a
``tbf`` token bucket for the slow link. Where the machine cannot
(``netfaults.unavailable()`` says why), the run has process faults only,
on 127.0.0.1 as before. Namespaces are named ``lsnet-<pid>-...``; the run
deletes its own on the way out (``finally``, and ``atexit``) and sweeps
those of dead runs when it starts.

Then it heals every broker and every link, waits for every ISR to hold all three replicas,
stops the producers and checks:

- every acknowledged record is read exactly once, at the offset its
  acknowledgement named (nothing lost, nothing moved);
- no record is read twice (no duplicate from a retry);
- offsets are dense from the log start to the high watermark;
- the three replicas of each partition are byte-identical;
- each replica's leader epochs rise (its ``leader-epoch-checkpoint``, and
  the epoch of every batch in order).

``run()`` is the engine, used by ``tests/cluster/test_faults.py``; the
command line runs it for ``--faults`` faults or ``--seconds``::

    .venv/bin/python bench/chaos.py --faults 1000 [--seed 7] [--session-ms 3000] [--no-network]

It prints each fault as it happens and the checker's table at the end; the
exit status is 1 if any check fails.
"""

from __future__ import annotations

import argparse
import logging
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench import netfaults
from bench.broker_perf import Broker
from logstore.cluster.zookeeper import ZooKeeperServer

TOPIC = "chaos"
PARTITIONS = 3
PROCESS_FAULTS = {"kill": 30, "kill-controller": 15, "pause": 20, "zombie": 15, "term": 20}
NETWORK_FAULTS = {"isolate": 15, "zk-cut": 15, "asymmetric": 10, "slow": 10, "flaky": 10}
ZK_PORT = 2181
EXTERNAL_PORT = 9092  # clients, through a forwarder on 127.0.0.1
INTERNAL_PORT = 9093  # inter.broker.listener.name: replication and the controller's requests


class ChaosError(Exception):
    """The cluster did not come back (a bounded wait ran out)."""


@dataclass
class Report:
    """What the run did and what the checker found."""

    faults: Counter[str] = field(default_factory=Counter)
    sent: int = 0
    acknowledged: int = 0
    failed: int = 0
    read: int = 0
    lost: list[str] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)
    without_offset: int = 0  # acknowledged with no offset (librdkafka's implicit acks): found, not compared
    duplicated: list[str] = field(default_factory=list)
    gaps: list[str] = field(default_factory=list)
    diverged: list[str] = field(default_factory=list)
    epochs: list[str] = field(default_factory=list)
    log_starts: dict[int, int] = field(default_factory=dict)  # partition -> its log start offset
    resets: list[str] = field(default_factory=list)  # the reader's position reset (offset out of range)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not (self.lost or self.moved or self.duplicated or self.gaps or self.diverged or self.epochs
                    or self.resets or any(self.log_starts.values()))  # fmt: skip

    def table(self) -> str:
        rows = [
            (
                "faults",
                f"{sum(self.faults.values())} ({', '.join(f'{k} {v}' for k, v in sorted(self.faults.items()))})",
            ),
            ("records sent / acknowledged / failed", f"{self.sent} / {self.acknowledged} / {self.failed}"),
            ("records read", str(self.read)),
            ("acknowledged and lost", _count(self.lost)),
            ("acknowledged at another offset", _count(self.moved)),
            ("acknowledged without an offset (read once)", str(self.without_offset)),
            ("read twice (duplicates)", _count(self.duplicated)),
            ("offset gaps below the HW", _count(self.gaps)),
            ("replicas not byte-identical", _count(self.diverged)),
            ("leader epochs not rising", _count(self.epochs)),
            ("log start offsets (nothing deletes: all 0)", str(dict(sorted(self.log_starts.items())))),
            ("reader's position reset (out of range)", _count(self.resets)),
            ("seconds", f"{self.seconds:.0f}"),
        ]
        width = max(len(name) for name, _ in rows)
        return "\n".join(f"{name.ljust(width)}  {value}" for name, value in rows)


def _count(found: list[str]) -> str:
    return "0" if not found else f"{len(found)}: {', '.join(found[:3])}"


# -- the cluster -----------------------------------------------------------------------------------


class Cluster:
    """ZooKeeper and three brokers, their processes and their faults."""

    def __init__(
        self, workdir: str, session_ms: int, say: Callable[[str], None], network: bool = False
    ) -> None:
        self.workdir = workdir
        self.session_ms = session_ms
        self.say = say
        self.net = netfaults.Net(["zk", "b1", "b2", "b3"]) if network else None
        zk_dir = os.path.join(workdir, "zookeeper")
        self.zk = (
            ZooKeeperServer(zk_dir, ZK_PORT, self.net.address["zk"]) if self.net else ZooKeeperServer(zk_dir)
        )
        self.brokers: dict[int, Broker] = {}
        self.paused: set[int] = set()

    def start(self) -> None:
        os.environ["PYTHONFAULTHANDLER"] = "1"  # the brokers' thread stacks on SIGABRT (see restart)
        if self.net is not None:
            for stale in netfaults.sweep_stale():
                self.say(f"removed a stale namespace {stale}")
            self.net.create()
        self._inside("zk", self.zk.start)
        for node in (1, 2, 3):
            directory = os.path.join(self.workdir, f"broker-{node}")
            os.makedirs(directory, exist_ok=True)
            overrides = [
                f"zookeeper.connect={self.zk.connect_string}/chaos", f"broker.id={node}",
                f"zookeeper.session.timeout.ms={self.session_ms}", "replica.lag.time.max.ms=3000",
                "replica.fetch.backoff.ms=200",
            ]  # fmt: skip
            listeners = None
            # With namespaces: clients through a forwarder, brokers to brokers on the namespaces' range.
            if self.net is not None:
                address = self.net.address[f"b{node}"]
                forwarder = self.net.forward(f"b{node}", EXTERNAL_PORT)
                listeners = f"EXTERNAL://{address}:{EXTERNAL_PORT},INTERNAL://{address}:{INTERNAL_PORT}"
                overrides += [
                    f"advertised.listeners=EXTERNAL://127.0.0.1:{forwarder.port},INTERNAL://{address}:{INTERNAL_PORT}",
                    "listener.security.protocol.map=EXTERNAL:PLAINTEXT,INTERNAL:PLAINTEXT",
                    "inter.broker.listener.name=INTERNAL",
                ]
            self.brokers[node] = Broker(directory, "asyncio", overrides, listeners)
            if self.net is not None:
                self.brokers[node].port = forwarder.port
            self._inside(f"b{node}", self.brokers[node].start)
        wait(lambda: len(self.metadata().brokers) == 3, "three brokers", 60)

    def _inside(self, member: str, start: Callable[[], None]) -> None:
        """``start()`` in ``member``'s namespace (its child process is born there), or here."""
        if self.net is None:
            start()
        else:
            self.net.run_in(member, start)

    @property
    def bootstrap(self) -> str:
        return ",".join(b.bootstrap for b in self.brokers.values())

    def metadata(self, topic: str | None = None) -> Any:
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap}).list_topics(topic, timeout=10)

    def alive(self, node: int) -> bool:
        proc = self.brokers[node].proc
        return proc is not None and proc.poll() is None

    def signal(self, node: int, how: signal.Signals) -> None:
        proc = self.brokers[node].proc
        assert proc is not None
        proc.send_signal(how)

    def restart(self, node: int) -> None:
        broker = self.brokers[node]
        if broker.proc is not None:
            try:
                broker.proc.wait(60)
            except subprocess.TimeoutExpired:  # a broker that does not exit: its threads' stacks, then fail
                broker.proc.send_signal(signal.SIGABRT)  # PYTHONFAULTHANDLER=1 prints every thread
                broker.proc.wait(30)
                raise ChaosError(
                    f"broker {node} did not exit within 60 s:\n{broker.log_tail(12000)}"
                ) from None
            if broker.proc.stdout is not None:
                broker.proc.stdout.close()
        self._inside(f"b{node}", broker.start)

    def heal(self) -> None:
        if self.net is not None:
            self.net.heal()
        for node in list(self.paused):
            self.signal(node, signal.SIGCONT)
            self.paused.discard(node)
        for node in self.brokers:
            if not self.alive(node):
                self.restart(node)

    def stop(self) -> None:
        for node in list(self.paused):
            self.signal(node, signal.SIGCONT)
        self.paused.clear()
        try:
            for broker in self.brokers.values():
                broker.stop()
            self.zk.stop()
        finally:
            if self.net is not None:
                self.net.destroy()


def wait(predicate: Callable[[], object], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if predicate():
                return
        except Exception:  # a broker restarting: ask again
            pass
        if time.monotonic() > deadline:
            raise ChaosError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.1)


# -- the nemesis --------------------------------------------------------------------------------


def kinds(network: bool) -> dict[str, int]:
    """The fault kinds and their weights: the process faults, and the network ones if ``network``."""
    return {**PROCESS_FAULTS, **(NETWORK_FAULTS if network else {})}


def one_fault(cluster: Cluster, rng: random.Random, kind: str | None = None) -> str:
    """Inflict one fault (``kind``, or one drawn by weight) and undo it; all three brokers are back after."""
    weights = kinds(cluster.net is not None)
    kind = kind or rng.choices(list(weights), list(weights.values()))[0]
    session = cluster.session_ms / 1000
    if kind == "kill-controller":
        node = cluster.metadata().controller_id
        if node not in cluster.brokers:
            kind, node = "kill", rng.choice(list(cluster.brokers))
    else:
        node = rng.choice(list(cluster.brokers))
    if kind in NETWORK_FAULTS:
        network_fault(cluster, rng, kind, node)
    else:
        cluster.say(f"fault: {kind} broker {node}")
    if kind in ("kill", "kill-controller"):
        cluster.signal(node, signal.SIGKILL)
        time.sleep(rng.uniform(0.2, 1.5))
        cluster.restart(node)
    elif kind == "term":
        cluster.signal(node, signal.SIGTERM)
        cluster.restart(node)
    elif kind in ("pause", "zombie"):
        cluster.signal(node, signal.SIGSTOP)
        cluster.paused.add(node)
        time.sleep(rng.uniform(0.3, session * 0.6) if kind == "pause" else session + rng.uniform(1.0, 2.5))
        cluster.signal(node, signal.SIGCONT)
        cluster.paused.discard(node)
    # The next fault waits for all three registered (faults one at a time, as the bar asks).
    wait(lambda: len(cluster.metadata().brokers) == 3, "three brokers after a fault", 60)
    time.sleep(rng.uniform(0.2, 1.0))
    return kind


def network_fault(cluster: Cluster, rng: random.Random, kind: str, node: int) -> None:
    """One network fault on broker ``node`` for a bounded time, then healed (module doc)."""
    net = cluster.net
    assert net is not None
    session = cluster.session_ms / 1000
    me, others = f"b{node}", [f"b{n}" for n in cluster.brokers if n != node]
    if kind == "isolate":  # from the other brokers; ZooKeeper and clients still reach it
        seconds = rng.uniform(0.5, 2 * session)
        cluster.say(f"fault: isolate broker {node} from brokers {others} for {seconds:.1f} s")
        for other in others:
            net.cut(me, other)
    elif kind == "zk-cut":  # from ZooKeeper only: short of the session, or past it (a zombie leader)
        seconds = rng.uniform(0.3, session * 0.6) if rng.random() < 0.4 else session + rng.uniform(1.0, 2.5)
        cluster.say(f"fault: zk-cut broker {node} for {seconds:.1f} s (session {session:g} s)")
        net.cut(me, "zk")
    elif kind == "asymmetric":  # one direction of one broker-broker link: from or to this broker
        src, dst = (me, rng.choice(others)) if rng.random() < 0.5 else (rng.choice(others), me)
        seconds = rng.uniform(0.5, 2 * session)
        cluster.say(f"fault: asymmetric {src} -> {dst} dropped ({dst} -> {src} flows) for {seconds:.1f} s")
        net.block(src, dst)
    elif kind == "slow":
        latency, kbit, seconds = rng.randint(50, 300), rng.choice((256, 1024, 4096)), rng.uniform(2.0, 6.0)
        cluster.say(
            f"fault: slow broker {node}: {kbit} kbit/s queueing up to {latency} ms for {seconds:.1f} s"
        )
        net.slow(me, latency, kbit)
    elif kind == "flaky":
        seconds = rng.uniform(2.0, 5.0)
        cluster.say(f"fault: flaky broker {node}: its connections reset for {seconds:.1f} s")
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            net.reset_connections(me)
            time.sleep(rng.uniform(0.2, 1.0))
        seconds = 0.0
    time.sleep(seconds)
    net.heal()


# -- the workload -------------------------------------------------------------------------------


class Workload:
    """Idempotent acks=all producers; each value unique; every acknowledgement's offset kept."""

    def __init__(self, bootstrap: str, producers: int, rate: int, client_log: str | None = None) -> None:
        self.bootstrap = bootstrap
        self.client_log = client_log
        self.producers = producers
        self.rate = rate
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: list[str] = []
        self.sent = 0
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def start(self) -> None:
        for n in range(self.producers):
            thread = threading.Thread(target=self._produce, args=(n,), daemon=True)
            thread.start()
            self._threads.append(thread)

    def _produce(self, n: int) -> None:
        from confluent_kafka import Producer

        def report(err: Any, msg: Any) -> None:
            with self._lock:
                if err is None:
                    self.acked[msg.value()] = (msg.partition(), msg.offset())
                else:
                    self.failed.append(str(err))

        config: dict[str, Any] = {"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
                                  "linger.ms": 5, "message.timeout.ms": 300_000, "on_delivery": report}  # fmt: skip
        if self.client_log:  # librdkafka's idempotence decisions (epoch bumps, retries), for a post-mortem
            logger = logging.getLogger(f"chaos.producer-{n}")
            logger.addHandler(logging.FileHandler(f"{self.client_log}.{n}"))
            logger.setLevel(logging.DEBUG)
            config.update({"debug": "eos,msg", "logger": logger})
        producer = Producer(config)
        interval = self.producers / self.rate
        for seq in range(10**8):  # bounded by the stop flag, checked every record
            if self._stop.is_set():
                break
            producer.produce(TOPIC, b"p%d-%09d" % (n, seq), key=b"%d" % (seq % 97))
            with self._lock:
                self.sent += 1
            producer.poll(0)
            time.sleep(interval)
        producer.flush(300)

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(320)


# -- the checker --------------------------------------------------------------------------------


def read_everything(bootstrap: str, report: Report | None = None) -> dict[int, list[tuple[int, bytes]]]:
    """(offset, value) of every record below each partition's HW, read from offset 0. An offset
    out of range is not papered over (``auto.offset.reset=error``): it goes to ``report.resets``
    and the read goes on from the log start; each partition's log start goes to
    ``report.log_starts`` (nothing in this run deletes records: any but 0 is a loss)."""
    from confluent_kafka import Consumer, KafkaError, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "chaos-check", "enable.auto.commit": False,
                         "auto.offset.reset": "error"})  # fmt: skip
    marks = {p: consumer.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=30, cached=False)
             for p in range(PARTITIONS)}  # fmt: skip
    ends = {p: high for p, (_, high) in marks.items()}
    if report is not None:
        report.log_starts = {p: low for p, (low, _) in marks.items()}
    consumer.assign([TopicPartition(TOPIC, p, 0) for p in range(PARTITIONS)])
    found: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
    deadline = time.monotonic() + 300
    while any(found[p][-1][0] + 1 < ends[p] if found[p] else ends[p] > 0 for p in found):
        if time.monotonic() > deadline:
            raise ChaosError(f"reading back timed out: {[len(v) for v in found.values()]} of {ends}")
        for message in consumer.consume(10_000, 0.5):
            error = message.error()
            partition, offset = message.partition() or 0, message.offset() or 0
            if error is not None:
                if report is not None and error.code() in (KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE):
                    report.resets.append(f"{TOPIC}-{partition}: {error.str()}")
                    low = consumer.get_watermark_offsets(TopicPartition(TOPIC, partition), timeout=30,
                                                         cached=False)[0]  # fmt: skip
                    consumer.seek(TopicPartition(TOPIC, partition, low))
                continue
            if offset < ends[partition]:
                found[partition].append((offset, message.value() or b""))
    consumer.close()
    return found


def check(report: Report, workload: Workload, found: dict[int, list[tuple[int, bytes]]]) -> None:
    seen: dict[bytes, tuple[int, int]] = {}
    for partition, records in found.items():
        offsets = [o for o, _ in records]
        start = offsets[0] if offsets else 0
        if offsets != list(range(start, start + len(offsets))):
            report.gaps.append(f"{TOPIC}-{partition}")
        for offset, value in records:
            if value in seen:
                report.duplicated.append(value.decode())
            seen[value] = (partition, offset)
        report.read += len(records)
    for value, where in workload.acked.items():
        got = seen.get(value)
        if got is None:
            report.lost.append(value.decode())
        elif where[1] is None:  # librdkafka's implicit acknowledgement: a later batch's success
            report.without_offset += 1  # vouched for it, and no offset came with it
        elif got != where:
            report.moved.append(f"{value.decode()} acked at {where}, read at {got}")


def check_replicas(report: Report, cluster: Cluster) -> None:
    """After a clean stop of all: each partition's three logs byte-identical, epochs rising."""
    from logstore.records.batch import batches_of

    for partition in range(PARTITIONS):
        copies = {}
        for node, broker in cluster.brokers.items():
            directory = os.path.join(broker.data_dir, f"{TOPIC}-{partition}")
            data = b"".join(
                open(os.path.join(directory, n), "rb").read()  # noqa: SIM115
                for n in sorted(os.listdir(directory))
                if n.endswith(".log")
            )
            copies[node] = data
            epochs = [b.partition_leader_epoch for b in batches_of(memoryview(data))]
            if epochs != sorted(epochs):
                report.epochs.append(f"{TOPIC}-{partition} on broker {node} (batches)")
            with open(os.path.join(directory, "leader-epoch-checkpoint")) as f:
                lines = f.read().split("\n")[2:]
            entries = [tuple(map(int, line.split())) for line in lines if line.strip()]
            if [e for e, _ in entries] != sorted({e for e, _ in entries}) or [
                s for _, s in entries
            ] != sorted(s for _, s in entries):
                report.epochs.append(f"{TOPIC}-{partition} on broker {node} (checkpoint)")
        if len(set(copies.values())) != 1:
            sizes = {node: len(data) for node, data in copies.items()}
            report.diverged.append(f"{TOPIC}-{partition} {sizes}")


# -- the run ------------------------------------------------------------------------------------


def run(
    faults: int,
    seconds: float = 3600.0,
    *,
    seed: int | None = None,
    session_ms: int = 3000,
    rate: int = 1000,
    producers: int = 2,
    workdir: str | None = None,
    client_log: str | None = None,
    network: bool = False,
    say: Callable[[str], None] = print,
) -> Report:
    """Run the workload under ``faults`` faults (or until ``seconds``), heal, check (module doc).

    ``network``: the brokers and ZooKeeper in network namespaces, network faults mixed with the
    process ones (``netfaults.unavailable()`` says whether this machine can). The first faults
    are each kind once, in a random order; the rest are drawn by weight.
    """
    rng = random.Random(seed)
    own = workdir is None
    root = workdir or tempfile.mkdtemp(prefix="logstore-chaos-")
    report = Report()
    cluster = Cluster(root, session_ms, say, network)
    started = time.monotonic()
    try:
        cluster.start()
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 3, config={"min.insync.replicas": "2"})])[
            TOPIC
        ].result(30)
        wait(lambda: all(len(p.isrs) == 3 for p in cluster.metadata(TOPIC).topics[TOPIC].partitions.values()),
             "an ISR of three", 60)  # fmt: skip
        workload = Workload(cluster.bootstrap, producers, rate, client_log)
        workload.start()
        deadline = started + seconds
        first = list(kinds(network))
        rng.shuffle(first)
        for n in range(faults):
            if time.monotonic() > deadline:
                break
            report.faults[one_fault(cluster, rng, first[n] if n < len(first) else None)] += 1
        cluster.heal()
        wait(lambda: all(len(p.isrs) == 3 for p in cluster.metadata(TOPIC).topics[TOPIC].partitions.values()),
             "every ISR whole again", 120)  # fmt: skip
        workload.stop()
        report.sent, report.acknowledged, report.failed = (
            workload.sent,
            len(workload.acked),
            len(workload.failed),
        )
        check(report, workload, read_everything(cluster.bootstrap, report))
        wait(lambda: _logs_equal_lengths(cluster), "followers caught up", 60)
        for broker in cluster.brokers.values():
            broker.stop()
        check_replicas(report, cluster)
    finally:
        cluster.stop()
        report.seconds = time.monotonic() - started
        if own and report.ok and report.read:
            shutil.rmtree(root, ignore_errors=True)
        elif own:
            say(f"kept the run's logs and data for a look: {root}")
    return report


def _logs_equal_lengths(cluster: Cluster) -> bool:
    sizes = set()
    for partition in range(PARTITIONS):
        per = []
        for broker in cluster.brokers.values():
            directory = os.path.join(broker.data_dir, f"{TOPIC}-{partition}")
            per.append(
                sum(
                    os.path.getsize(os.path.join(directory, n))
                    for n in os.listdir(directory)
                    if n.endswith(".log")
                )
            )
        sizes.add(len(set(per)) == 1)
    return sizes == {True}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--faults", type=int, default=1000, help="faults to inflict (default 1000)")
    parser.add_argument("--seconds", type=float, default=24 * 3600, help="stop the nemesis after this long")
    parser.add_argument("--seed", type=int, default=None, help="the nemesis' random seed (default: random)")
    parser.add_argument(
        "--session-ms", type=int, default=3000, help="zookeeper.session.timeout.ms (default 3000)"
    )
    parser.add_argument(
        "--rate", type=int, default=1000, help="records per second, all producers (default 1000)"
    )
    parser.add_argument("--producers", type=int, default=2, help="producer threads (default 2)")
    parser.add_argument(
        "--workdir",
        default=None,
        help="keep the brokers' data and logs here (default: a temporary directory, removed)",
    )
    parser.add_argument(
        "--network",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="network faults too, in namespaces (default: when netfaults.unavailable() says the machine can)",
    )
    parser.add_argument(
        "--client-log",
        default=None,
        metavar="PATH",
        help="write each producer's librdkafka debug log (eos,msg) to PATH.<n>, for a post-mortem",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    network = args.network
    if network is None or network:
        why = netfaults.unavailable()
        if why is not None and network:
            print(f"chaos: {why}", file=sys.stderr)
            return 2
        network = why is None
        if why is not None:
            print(f"chaos: process faults only ({why})", flush=True)
    print(f"chaos: seed {seed}, {args.faults} faults, session {args.session_ms} ms, "
          f"{'network and process' if network else 'process'} faults", flush=True)  # fmt: skip
    started = time.monotonic()

    def say(line: str) -> None:
        print(f"[{time.monotonic() - started:7.1f} s] {line}", flush=True)

    report = run(args.faults, args.seconds, seed=seed, session_ms=args.session_ms, rate=args.rate,
                 producers=args.producers, workdir=args.workdir, client_log=args.client_log, network=network,
                 say=say)  # fmt: skip
    print(report.table())
    return 0 if report.ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
