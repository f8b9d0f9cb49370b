"""acks=all under a paced load of small requests (issue 23's bar for per-connection pipelining).

Starts, on 127.0.0.1, a ZooKeeper and three brokers (``default.replication.factor=3``,
``min.insync.replicas=2``), then for each of ``--runs`` runs, on a fresh 3-partition topic
each time, offers ``--rate`` records/s for ``--seconds`` from one confluent-kafka producer
with ``linger.ms=0`` (librdkafka sends a request as soon as a record is there, so a small
request per record while the broker keeps up) with acks=1 and then acks=all, interleaved.

Each phase first offers the same load for ``--warm-up`` seconds (1 s) to its fresh topic, not
measured: a new topic's followers join its replication between two of their fetches (up to
``replica.fetch.wait.max.ms``, as in Kafka) and the producer connects to each leader, which puts
a few hundred milliseconds into the first second's acks=all latencies only. A record's latency
runs from the moment it was due (its slot in the pacing schedule, not the
moment ``produce`` returned) to its delivery report; the achieved rate is the records
delivered over the time from the first slot to the last report. The bar (reported, never
asserted): acks=all achieves >= 0.9x the acks=1 rate of the same run, with p99 <= 100 ms.
Figures go to stderr as they come and as a table at the end (medians over the runs).
Usage::

    .venv/bin/python bench/pipeline_bench.py [--runs 3] [--rate 5000] [--seconds 10]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import BenchError, Broker
from bench.cluster_bench import create_topic, start_cluster
from logstore.cluster.zookeeper import ZooKeeperServer

RECORD_BYTES = 100
DRAIN_TIMEOUT_S = 60.0


@dataclass
class Paced:
    """One paced phase: what was offered and what came back."""

    label: str
    offered: int
    delivered: int
    failed: int
    seconds: float
    latencies_ms: list[float]
    broker_cpu: float = 0.0  # the brokers' CPU seconds over the phase, all three together

    @property
    def rate(self) -> float:
        return self.delivered / self.seconds if self.seconds else 0.0

    def percentile(self, p: float) -> float:
        if not self.latencies_ms:
            return float("nan")
        ordered = sorted(self.latencies_ms)
        return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def paced_produce(
    bootstrap: str,
    topic: str,
    acks: str,
    rate: int,
    seconds: float,
    label: str,
    brokers: Sequence[Broker] = (),
    warm_up: float = 0.0,
) -> Paced:
    """Offer ``rate`` records/s for ``warm_up`` seconds (not measured) and then ``seconds``
    (bounded: rate x seconds records each), then drain."""
    from confluent_kafka import Producer

    latencies: list[float] = []
    failed = [0]
    last = [0.0]

    def report(err: Any, msg: Any) -> None:
        now = time.monotonic()
        if err is not None:
            failed[0] += 1
            return
        due = float(msg.key())
        latencies.append((now - due) * 1000)
        last[0] = now

    producer = Producer({
        "bootstrap.servers": bootstrap, "acks": acks, "linger.ms": 0, "compression.type": "none",
        "message.timeout.ms": int(DRAIN_TIMEOUT_S * 1000), "on_delivery": report,
    })  # fmt: skip
    producer.list_topics(topic, timeout=10)  # connected, metadata known: the clock starts after
    value = os.urandom(RECORD_BYTES)
    if warm_up > 0:
        _offer(producer, topic, value, rate, int(rate * warm_up))
        producer.flush(DRAIN_TIMEOUT_S)
        latencies.clear()
        failed[0] = 0
    total = int(rate * seconds)
    cpu_before = sum(broker.cpu_seconds() for broker in brokers)
    started = _offer(producer, topic, value, rate, total)
    producer.flush(DRAIN_TIMEOUT_S)
    delivered = len(latencies)
    elapsed = (last[0] or time.monotonic()) - started
    cpu = sum(broker.cpu_seconds() for broker in brokers) - cpu_before
    phase = Paced(label, total, delivered, failed[0], elapsed, latencies, cpu)
    print(
        f"  {label}: offered {rate:,}/s, achieved {phase.rate:,.0f}/s, p50 {phase.percentile(50):.1f} ms, "
        f"p99 {phase.percentile(99):.1f} ms, {phase.failed} failed; brokers' CPU "
        f"{cpu / elapsed:.2f} cores",
        file=sys.stderr,
    )
    return phase


def _offer(producer: Any, topic: str, value: bytes, rate: int, total: int) -> float:
    """Produce ``total`` records, each at its slot of a ``rate``/s schedule (its due time is its
    key); returns when the schedule started."""
    started = time.monotonic()
    for i in range(total):
        due = started + i / rate
        for _ in range(1000):  # poll returns at the first report it serves: wait out the slot
            wait = due - time.monotonic()
            if wait <= 0.0005:
                break
            producer.poll(wait)
        producer.produce(topic, value, key=b"%.6f" % due)
        if i % 64 == 0:
            producer.poll(0)
    return started


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=3, help="acks=1/acks=all pairs (default 3)")
    parser.add_argument("--rate", type=int, default=5000, help="records/s offered (default 5000)")
    parser.add_argument("--seconds", type=float, default=10.0, help="seconds of load per phase (default 10)")
    parser.add_argument(
        "--warm-up", type=float, default=1.0, help="seconds of the same load before each phase, not measured"
    )
    parser.add_argument("--session-ms", type=int, default=10_000, help="zookeeper.session.timeout.ms")
    parser.add_argument(
        "--workdir", default=None, help="keep the brokers' data and logs here (default: a temporary directory)"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    workdir = args.workdir or tempfile.mkdtemp(prefix="logstore-pipeline-bench-")
    zk = ZooKeeperServer(os.path.join(workdir, "zookeeper"))
    brokers: dict[int, Broker] = {}
    ones: list[Paced] = []
    alls: list[Paced] = []
    try:
        zk.start()
        brokers = start_cluster(os.path.join(workdir, "cluster"), zk, args.session_ms, "/bench")
        everywhere = [b.bootstrap for b in brokers.values()]
        bootstrap = ",".join(everywhere)
        create_topic(everywhere[0], "warm", 3, everywhere)
        paced_produce(bootstrap, "warm", "all", args.rate, 2.0, "warm-up acks=all")
        for run in range(args.runs):
            print(f"run {run + 1}/{args.runs}", file=sys.stderr)
            for acks, out in (("1", ones), ("all", alls)):
                topic = f"r{run}-{acks}"
                create_topic(everywhere[0], topic, 3, everywhere)
                out.append(paced_produce(
                    bootstrap, topic, acks, args.rate, args.seconds, f"acks={acks}", list(brokers.values()),
                    args.warm_up,
                ))  # fmt: skip
        for phase in ones + alls:
            if phase.failed or phase.delivered != phase.offered:
                raise BenchError(f"{phase.label}: {phase.delivered} of {phase.offered} delivered")
        one = statistics.median(p.rate for p in ones)
        every = statistics.median(p.rate for p in alls)
        print(f"\n| RF=3, 3 brokers, linger.ms=0, {args.rate:,} records/s offered ({args.runs} runs, medians) "
              "| achieved | p50 | p99 | brokers' CPU |\n|---|---|---|---|---|")  # fmt: skip
        for name, phases in (("acks=1", ones), ("acks=all", alls)):
            rate = statistics.median(p.rate for p in phases)
            p50 = statistics.median(p.percentile(50) for p in phases)
            p99 = statistics.median(p.percentile(99) for p in phases)
            cores = statistics.median(p.broker_cpu / p.seconds for p in phases)
            print(f"| {name} | {rate:,.0f}/s | {p50:.1f} ms | {p99:.1f} ms | {cores:.2f} cores |")
        print(f"\nacks=all / acks=1: **{every / one:.2f}x** (bar >= 0.9x, p99 <= 100 ms)")
        return 0
    finally:
        for broker in brokers.values():
            broker.stop()
        zk.stop()
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
