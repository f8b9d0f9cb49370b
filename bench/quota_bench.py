"""Throttled produce and fetch against their quotas: the rate a client gets vs the quota set.

Starts ``python -m logstore broker`` (a free port, a fresh data directory, removed
afterwards; Kafka's quota windows unless ``--override``), then:

1. sets ``producer_byte_rate`` on client id ``bench-producer`` (AlterClientQuotas) and lets a
   confluent-kafka producer (1,000-byte values, batch.size 16 KB) send as fast as it can for
   ``--seconds``; the rate is the acknowledged bytes per second after the first
   ``--settle`` seconds. Kafka's windowed rate is bursty by design: a first burst of
   ``quota x (quota.window.num - 1)`` seconds' worth goes through at once, and each time
   the sample holding a burst expires (``quota.window.num`` windows later) another may;
   between bursts the client trickles. Measure over whole periods (the defaults: 5 periods
   of 11 s after the first) or the figure aliases (18 s holding two bursts read 1.2x);
2. sets ``consumer_byte_rate`` on client id ``bench-consumer`` and lets a consumer read the
   topic from offset 0 for ``--seconds``, the same way;
3. prints quota, measured rate, their ratio and the largest ``throttle_time_ms`` librdkafka
   reported (its statistics' ``throttle`` window).

Every loop is bounded in time. Figures are reported, never asserted.

Example::

    .venv/bin/python bench/quota_bench.py --produce-quota 100000 --consume-quota 200000
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import Broker


def set_quota(bootstrap: str, client_id: str, key: str, value: float) -> None:
    """AlterClientQuotas through logstore's AdminClient."""
    from logstore.client.admin import AdminClient

    with AdminClient({"bootstrap.servers": bootstrap}) as admin:
        (future,) = admin.alter_client_quotas([({"client-id": client_id}, {key: value})])
        future.result(30)


def throttle_max(stats: list[dict[str, Any]]) -> int:
    return max(
        (b["throttle"]["max"] for s in stats for b in s["brokers"].values() if b.get("nodeid", -1) >= 0),
        default=0,
    )


def produce(bootstrap: str, quota: int, seconds: float, settle: float) -> dict[str, float]:
    from confluent_kafka import Producer

    set_quota(bootstrap, "bench-producer", "producer_byte_rate", quota)
    stats: list[dict[str, Any]] = []
    acked: list[tuple[float, int]] = []
    producer = Producer({
        "bootstrap.servers": bootstrap, "client.id": "bench-producer", "linger.ms": 5, "batch.size": 16_384,
        "statistics.interval.ms": 1000, "stats_cb": lambda text: stats.append(json.loads(text)),
    })  # fmt: skip
    value = b"p" * 1000

    def delivered(error: Any, message: Any) -> None:
        if error is None:
            acked.append((time.monotonic(), len(message.value())))

    started = time.monotonic()
    while time.monotonic() - started < seconds:
        try:
            producer.produce("quota-bench", value, on_delivery=delivered)
        except BufferError:
            producer.poll(0.05)
            continue
        producer.poll(0)
        if len(producer) > 2000:
            producer.poll(0.05)
    producer.flush(60)
    total = sum(n for t, n in acked)
    settled = sum(n for t, n in acked if started + settle <= t <= started + seconds)
    return {
        "quota": quota,
        "rate": settled / (seconds - settle),
        "bytes": total,
        "throttle_max_ms": throttle_max(stats),
    }


def consume(bootstrap: str, quota: int, seconds: float, settle: float) -> dict[str, float]:
    from confluent_kafka import Consumer, Producer, TopicPartition

    # enough data that the quota, not the topic's end, bounds the reader (an unthrottled client id)
    filler = Producer({"bootstrap.servers": bootstrap, "client.id": "bench-filler", "linger.ms": 5,
                       "batch.size": 16_384})  # fmt: skip
    for _ in range(int(quota * (seconds + 12) * 1.5 / 1000)):
        while True:
            try:
                filler.produce("quota-bench", b"c" * 1000)
                break
            except BufferError:
                filler.poll(0.05)
        filler.poll(0)
    filler.flush(60)
    set_quota(bootstrap, "bench-consumer", "consumer_byte_rate", quota)
    stats: list[dict[str, Any]] = []
    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": "quota-bench", "client.id": "bench-consumer",
        "enable.auto.commit": False, "statistics.interval.ms": 1000,
        "stats_cb": lambda text: stats.append(json.loads(text)),
    })  # fmt: skip
    consumer.assign([TopicPartition("quota-bench", 0, 0)])
    got: list[tuple[float, int]] = []
    started = time.monotonic()
    try:
        while time.monotonic() - started < seconds:
            for message in consumer.consume(num_messages=1000, timeout=0.2):
                if message.error() is None:
                    got.append((time.monotonic(), len(message.value() or b"")))
    finally:
        consumer.close()
    settled = sum(n for t, n in got if t >= started + settle)
    return {"quota": quota, "rate": settled / (seconds - settle), "bytes": sum(n for _, n in got),
            "throttle_max_ms": throttle_max(stats)}  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench/quota_bench.py", description=__doc__.split("\n")[0],
                                     formatter_class=argparse.ArgumentDefaultsHelpFormatter)  # fmt: skip
    parser.add_argument("--produce-quota", type=int, default=100_000, help="producer_byte_rate, bytes/s")
    parser.add_argument("--consume-quota", type=int, default=200_000, help="consumer_byte_rate, bytes/s")
    parser.add_argument("--seconds", type=float, default=66.0, help="how long each client runs")
    parser.add_argument(
        "--settle", type=float, default=11.0, help="seconds left out at the start of each run"
    )
    parser.add_argument("--override", action="append", default=[], metavar="KEY=VALUE", help="broker config")
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)
    if args.seconds <= args.settle:
        parser.error("--seconds must be more than --settle")
    workdir = tempfile.mkdtemp(prefix="logstore-quota-")
    broker = Broker(workdir, "auto", args.override)
    try:
        broker.start()
        from confluent_kafka.admin import AdminClient, NewTopic

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        admin.create_topics([NewTopic("quota-bench", 1, 1)])["quota-bench"].result(30)
        figures = {
            "produce": produce(broker.bootstrap, args.produce_quota, args.seconds, args.settle),
            "consume": consume(broker.bootstrap, args.consume_quota, args.seconds, args.settle),
        }
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    for name, f in figures.items():
        print(f"{name}: quota {f['quota']:,.0f} B/s, measured {f['rate']:,.0f} B/s "
              f"({f['rate'] / f['quota']:.2f}x) after the first {args.settle:g} s of {args.seconds:g} s; "
              f"largest throttle_time_ms seen by librdkafka {f['throttle_max_ms']:,}")  # fmt: skip
    if args.json:
        with open(args.json, "w") as out:
            json.dump(figures, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
