"""The cluster's bar (issue 12): replicated produce against one broker, and failover times.

One run of this script starts, on 127.0.0.1, one broker alone and a cluster
of a ZooKeeper and three brokers, and measures with confluent-kafka
(100-byte values, 3 partitions, ``num.partitions=3``):

- **produce acks=1, one broker** (the yardstick), then **produce acks=all at
  replication factor 3** (``min.insync.replicas=2``) into the cluster, each
  ``--runs`` times, interleaved; the bar is acks=all RF=3 >= 40% of acks=1;
- **failover**: an idempotent acks=all producer sends ~2,000 records/s to a
  one-partition RF=3 topic; the partition's leader is killed (``kill -9``,
  then in a second trial SIGTERM); the figure is the time from the signal to
  the first acknowledgement of a record produced after it. Bars: kill -9
  within ``zookeeper.session.timeout.ms`` + 1 s, SIGTERM within 1 s.

Figures go to stderr as they come and as a table at the end (medians of the
runs). Usage::

    .venv/bin/python bench/cluster_bench.py [--runs 3] [--records 1000000] [--session-ms 6000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import BenchError, Broker, Phase, produce_confluent
from logstore.cluster.zookeeper import ZooKeeperServer

RECORD_BYTES = 100
FAILOVER_RATE = 2_000  # records/s during a failover trial
FAILOVER_LIMIT_S = 60.0


def start_cluster(workdir: str, zk: ZooKeeperServer, session_ms: int, chroot: str) -> dict[int, Broker]:
    brokers: dict[int, Broker] = {}
    for node in (1, 2, 3):
        overrides = [
            f"zookeeper.connect={zk.connect_string}{chroot}", f"broker.id={node}",
            f"zookeeper.session.timeout.ms={session_ms}", "num.partitions=3",
            "default.replication.factor=3", "min.insync.replicas=2",
        ]  # fmt: skip
        broker = Broker(os.path.join(workdir, f"broker-{node}"), "auto", overrides)
        os.makedirs(os.path.join(workdir, f"broker-{node}"), exist_ok=True)
        broker.start()
        brokers[node] = broker
    _wait(lambda: _broker_count(brokers[1].bootstrap) == 3, "three brokers in the cluster")
    return brokers


def _broker_count(bootstrap: str) -> int:
    from confluent_kafka.admin import AdminClient

    return len(AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10).brokers)


def _partition(bootstrap: str, topic: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return (
        AdminClient({"bootstrap.servers": bootstrap})
        .list_topics(topic, timeout=10)
        .topics[topic]
        .partitions[0]
    )


def _wait(predicate: Any, what: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise BenchError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(0.05)


def create_topic(bootstrap: str, topic: str, partitions: int, everywhere: Sequence[str] = ()) -> None:
    """Create ``topic`` (RF=3, min.insync.replicas=2) through ``bootstrap``; return once every broker
    of ``everywhere`` (each asked alone) shows each partition with a leader and three in sync."""
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, partitions, 3, config={"min.insync.replicas": "2"})])[topic].result(
        30
    )

    def settled(address: str) -> bool:
        found = AdminClient({"bootstrap.servers": address}).list_topics(topic, timeout=10).topics[topic]
        return len(found.partitions) == partitions and all(
            p.leader >= 0 and len(p.isrs) == 3 for p in found.partitions.values()
        )

    _wait(lambda: all(settled(address) for address in (bootstrap, *everywhere)), f"{topic}'s ISRs of three")


def failover(brokers: dict[int, Broker], topic: str, how: signal.Signals) -> float:
    """Seconds from signalling ``topic``'s leader to the first ack of a record produced after it."""
    from confluent_kafka import Producer

    others = [b for b in brokers.values() if b.proc is not None and b.proc.poll() is None]
    create_topic(others[0].bootstrap, topic, 1, [b.bootstrap for b in others])
    leader = _partition(others[0].bootstrap, topic).leader
    acked: list[float] = []
    failed: list[str] = []
    signalled = [float("inf")]

    def report(err: Any, msg: Any) -> None:
        if err is not None:
            failed.append(str(err))
        elif float(msg.value()[:20].decode()) > signalled[0]:  # sent after the signal
            acked.append(time.monotonic())

    producer = Producer({"bootstrap.servers": ",".join(b.bootstrap for b in others), "acks": "all",
                         "enable.idempotence": True, "linger.ms": 1, "message.timeout.ms": 60_000,
                         "on_delivery": report})  # fmt: skip
    stop = threading.Event()

    def send() -> None:
        for _i in range(int(FAILOVER_LIMIT_S * FAILOVER_RATE * 2)):  # bounded
            if stop.is_set():
                return
            producer.produce(topic, b"%-20.6f" % time.monotonic() + b"x" * (RECORD_BYTES - 20))
            time.sleep(1 / FAILOVER_RATE)  # the main thread polls: callbacks run on one thread

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    steady = time.monotonic() + 2.0
    while time.monotonic() < steady:  # steady state
        producer.poll(0.01)
    victim = brokers[leader]
    assert victim.proc is not None
    signalled[0] = time.monotonic() + 0.005
    victim.proc.send_signal(how)
    deadline = signalled[0] + FAILOVER_LIMIT_S
    while not acked and time.monotonic() < deadline:
        producer.poll(0.01)
    stop.set()
    sender.join(5)
    producer.flush(30)
    victim.proc.wait(30)
    if not acked:
        raise BenchError(f"no acknowledgement within {FAILOVER_LIMIT_S:g} s of {how.name} ({failed[:3]})")
    if failed:
        raise BenchError(f"{len(failed)} records failed during the failover: {failed[:3]}")
    return acked[0] - signalled[0]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=3, help="interleaved runs of each produce phase (default 3)"
    )
    parser.add_argument(
        "--records", type=int, default=1_000_000, help="records per produce phase (default 1M)"
    )
    parser.add_argument(
        "--session-ms", type=int, default=6_000, help="zookeeper.session.timeout.ms (default 6000)"
    )
    parser.add_argument(
        "--phase-timeout", type=float, default=300.0, help="seconds a phase may take (default 300)"
    )
    parser.add_argument("--no-failover", action="store_true", help="skip the failover trials")
    parser.add_argument(
        "--workdir",
        default=None,
        help="keep the brokers' data and logs here (default: a temporary directory, removed)",
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    value = os.urandom(RECORD_BYTES)
    workdir = args.workdir or tempfile.mkdtemp(prefix="logstore-cluster-bench-")
    zk = ZooKeeperServer(os.path.join(workdir, "zookeeper"))
    alone = Broker(os.path.join(workdir, "alone"), "auto", ["num.partitions=3"])
    os.makedirs(os.path.join(workdir, "alone"), exist_ok=True)
    brokers: dict[int, Broker] = {}
    acks1: list[Phase] = []
    acks_all: list[Phase] = []
    try:
        zk.start()
        alone.start()
        brokers = start_cluster(os.path.join(workdir, "cluster"), zk, args.session_ms, "/bench")
        bootstrap_broker = brokers[1]
        produce_confluent(alone, "warm", 100_000, value, "1", args.phase_timeout, "warm-up acks=1")
        create_topic(bootstrap_broker.bootstrap, "warm", 3, [b.bootstrap for b in brokers.values()])
        produce_confluent(
            bootstrap_broker, "warm", 100_000, value, "all", args.phase_timeout, "warm-up acks=all"
        )
        for run in range(args.runs):
            one = produce_confluent(
                alone, f"r{run}", args.records, value, "1", args.phase_timeout, "acks=1 alone"
            )
            create_topic(bootstrap_broker.bootstrap, f"r{run}", 3, [b.bootstrap for b in brokers.values()])
            rep = produce_confluent(
                bootstrap_broker, f"r{run}", args.records, value, "all", args.phase_timeout, "acks=all RF=3"
            )
            acks1.append(one)
            acks_all.append(rep)
            print(f"run {run + 1}/{args.runs}: acks=1 alone {one.records_per_s:,.0f}/s, acks=all RF=3 "
                  f"{rep.records_per_s:,.0f}/s ({rep.records_per_s / one.records_per_s:.2f}x)", file=sys.stderr)  # fmt: skip
        trials: dict[str, float] = {}
        if not args.no_failover:
            trials["kill -9"] = failover(brokers, "failover-kill", signal.SIGKILL)
            print(f"kill -9: acknowledged again after {trials['kill -9']:.2f} s", file=sys.stderr)
            for _node, broker in brokers.items():  # the killed one back, so three replicas again
                if broker.proc is not None and broker.proc.poll() is not None:
                    broker.start()
            _wait(lambda: _broker_count(brokers[1].bootstrap) == 3, "the killed broker back")
            trials["SIGTERM"] = failover(brokers, "failover-term", signal.SIGTERM)
            print(f"SIGTERM: acknowledged again after {trials['SIGTERM']:.2f} s", file=sys.stderr)
        one_median = statistics.median(p.records_per_s for p in acks1)
        all_median = statistics.median(p.records_per_s for p in acks_all)
        print(f"\n| measure ({args.runs} runs, medians) | figure | bar |\n|---|---|---|")
        print(f"| produce acks=1, one broker | {one_median:,.0f} records/s | |")
        print(f"| produce acks=all, RF=3, 3 brokers | {all_median:,.0f} records/s "
              f"(**{all_median / one_median:.2f}x**) | >= 0.40x |")  # fmt: skip
        for name, seconds in trials.items():
            bar = args.session_ms / 1000 + 1 if name == "kill -9" else 1.0
            print(f"| acknowledged again after {name} of the leader | {seconds:.2f} s | <= {bar:g} s |")
        return 0
    finally:
        for broker in [alone, *brokers.values()]:
            broker.stop()
        zk.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
