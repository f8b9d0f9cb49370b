"""Child processes of the multi-process tests: each opens ``embedded:///<dir>`` on its own.

``python -m tests.embedded.workers <role> <data dir> <out file> [args]``. A role writes what it
did to its out file, a line per event, unbuffered (``os.write``), so that what it wrote before a
``kill -9`` is there:

- ``hold``: opens a Producer (serving the directory if it takes the lock) and sleeps until killed
  or until ``<out>.stop`` exists.
- ``produce <name> <count> <rate>``: an idempotent producer of ``count`` records ``name-i`` to
  topic ``t``, about ``rate`` records/s; one line ``ack <value> <unix time> <time sent>`` per
  acknowledged record, ``fail <value> <error>`` per failed one, ``done`` at the end.
- ``consume <group> [quiet]``: a group consumer of ``t``, committing synchronously after each
  batch; one line ``got <value> <partition> <offset>`` per record; ``ready`` once it has an
  assignment; exits once ``<out>.stop`` exists and nothing has come for ``quiet`` seconds
  (default 2) (bounded: 180 s in all).
- ``admin``: creates topic ``made-by-child`` (3 partitions), lists topics and groups, deletes
  ``t``; writes ``partitions <n>``, ``groups <ids>``, ``deleted``.
- ``burst <count>``: produces ``count`` 100-byte records as fast as it can (idempotent),
  then writes ``rate <records/s>``.

Every wait is bounded; a child that cannot finish exits non-zero.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import time
from typing import Any

from logstore.client import Consumer, Producer

TOPIC = "t"
LIFETIME_S = 180.0


class Out:
    def __init__(self, path: str) -> None:
        self.path = path
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def line(self, text: str) -> None:
        os.write(self.fd, (text + "\n").encode())

    def stopped(self) -> bool:
        return os.path.exists(self.path + ".stop")


def hold(boot: str, out: Out) -> None:
    with Producer({"bootstrap.servers": boot}) as producer:
        producer.list_topics(timeout=30)
        out.line(f"holding {os.getpid()}")
        deadline = time.monotonic() + LIFETIME_S
        while not out.stopped() and time.monotonic() < deadline:
            time.sleep(0.05)


def produce(boot: str, out: Out, name: str, count: int, rate: float) -> None:
    config = {
        "bootstrap.servers": boot,
        "enable.idempotence": True,
        "acks": "all",
        "linger.ms": 5,
        "delivery.timeout.ms": 120_000,
        "request.timeout.ms": 10_000,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200,
        "retry.backoff.ms": 20,
    }

    def report(sent: float, err: Any, msg: Any) -> None:
        value = msg.value().decode()
        if err is None:
            out.line(f"ack {value} {time.time():.4f} {sent:.4f}")
        else:
            out.line(f"fail {value} {err}")

    with Producer(config) as producer:
        started = time.monotonic()
        for i in range(count):
            producer.produce(TOPIC, f"{name}-{i}".encode(), on_delivery=functools.partial(report, time.time()))
            producer.poll(0)
            ahead = started + (i + 1) / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
        left = producer.flush(150)
        out.line(f"done {left}")


def consume(boot: str, out: Out, group: str, quiet: float) -> None:
    config = {
        "bootstrap.servers": boot,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "reconnect.backoff.ms": 20,
        "reconnect.backoff.max.ms": 200,
        "request.timeout.ms": 10_000,
    }
    consumer = Consumer(config)
    consumer.subscribe([TOPIC])
    deadline = time.monotonic() + LIFETIME_S
    quiet_since = time.monotonic()
    said_ready = False
    while time.monotonic() < deadline:
        messages = [m for m in consumer.consume(500, 0.5) if m.error() is None]
        if not said_ready and consumer.assignment():
            out.line("ready")
            said_ready = True
        if messages:
            quiet_since = time.monotonic()
            out.line("\n".join(f"got {m.value().decode()} {m.partition()} {m.offset()}" for m in messages))
            for _ in range(20):  # a commit that meets a takeover or a rebalance is tried again
                try:
                    consumer.commit(asynchronous=False)
                    break
                except Exception as e:  # said, and tried again
                    if "_NO_OFFSET" in str(e):
                        break  # the partitions went in a rebalance: their next owner reads on
                    out.line(f"commit-retry {e}")
                    time.sleep(0.2)
        elif out.stopped() and time.monotonic() - quiet_since > quiet:
            break
    consumer.close()
    out.line("done")


def admin(boot: str, out: Out) -> None:
    from logstore.client.admin import AdminClient, NewTopic

    client = AdminClient({"bootstrap.servers": boot})
    try:
        client.create_topics([NewTopic("made-by-child", 3)])["made-by-child"].result(30)
        topics = client.list_topics(timeout=30).topics
        out.line(f"partitions {len(topics['made-by-child'].partitions)}")
        groups = client.list_consumer_groups().result(30)
        out.line("groups " + " ".join(sorted(g.group_id for g in groups.valid)))
        client.delete_topics([TOPIC])[TOPIC].result(30)
        out.line("deleted")
    finally:
        client.close()


def burst(boot: str, out: Out, count: int) -> None:
    value = b"x" * 100
    with Producer({"bootstrap.servers": boot, "enable.idempotence": True, "linger.ms": 5}) as producer:
        producer.produce(TOPIC, value)
        assert producer.flush(60) == 0
        started = time.perf_counter()
        for _ in range(count // 1000):
            producer.produce_batch(TOPIC, [value] * 1000)
            producer.poll(0)
        assert producer.flush(120) == 0
        out.line(f"rate {count / (time.perf_counter() - started):.0f}")


def main(argv: list[str]) -> None:
    role, data_dir, out_path, *args = argv
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(process)d %(name)s %(message)s")
    logging.getLogger("logstore.embedded").setLevel(logging.INFO)  # when this process takes over
    boot = f"embedded://{data_dir}"
    out = Out(out_path)
    if role == "hold":
        hold(boot, out)
    elif role == "produce":
        produce(boot, out, args[0], int(args[1]), float(args[2]))
    elif role == "consume":
        consume(boot, out, args[0], float(args[1]) if len(args) > 1 else 2.0)
    elif role == "admin":
        admin(boot, out)
    elif role == "burst":
        burst(boot, out, int(args[0]))
    else:
        raise SystemExit(f"unknown role {role!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
