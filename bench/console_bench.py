"""The web console's pages with 1,000 topics and 100 consumer groups: how long each takes to render.

Starts ``python -m logstore broker`` on 127.0.0.1 (a free port, a fresh
temporary data directory, removed afterwards), creates ``--topics`` topics
(``--partitions`` partitions each; ``bench-0000``...), writes ``--records``
records to the first one, and makes ``--groups`` consumer groups, each with
committed offsets on ``--group-topics`` topics (so each has lag). Then it
serves the console from a thread (tests/kit/consolekit.py) and times, over
HTTP as a browser asks for them, ``--runs`` renders of each page: overview,
topics (first and middle page), a topic, messages (from the end; a header
search over every record), groups, a group (lag and chart), its chart alone,
a reset preview, and the quotas. Reported per page: median, p95 and max in ms. The bar
(issue 27): every page renders in <= 300 ms on this machine.

Every loop is bounded in count and time.

Example::

    .venv/bin/python bench/console_bench.py                      # 1,000 topics, 100 groups, 20 runs
    .venv/bin/python bench/console_bench.py --topics 100 --groups 10 --runs 5
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from logstore.client import Producer, TopicPartition
from logstore.client.admin import AdminClient, ConsumerGroupTopicPartitions, NewTopic
from logstore.console import ConsoleSettings
from tests.kit.brokerkit import BrokerProcess
from tests.kit.consolekit import ConsoleServer, Visitor

BAR_MS = 300.0


def setup(bootstrap: str, topics: int, partitions: int, groups: int, group_topics: int, records: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": 60_000})
    began = time.monotonic()
    names = [f"bench-{i:04d}" for i in range(topics)]
    for start in range(0, topics, 100):
        batch = [NewTopic(n, partitions, 1) for n in names[start:start + 100]]
        for future in admin.create_topics(batch, request_timeout=120).values():
            future.result(120)
    print(f"created {topics} topics x {partitions} partitions in {time.monotonic() - began:.1f} s", flush=True)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for i in range(records):
        producer.produce(names[0], value=f"record {i}".encode(), key=f"k{i % 100}".encode(),
                         headers=[("trace", f"t-{i}".encode())])  # fmt: skip
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0, "records not delivered"
    producer.close()
    began = time.monotonic()
    for g in range(groups):
        offsets = [TopicPartition(names[(g + t) % topics], p, 0) for t in range(group_topics) for p in range(partitions)]
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(f"group-{g:03d}", offsets)])[f"group-{g:03d}"].result(60)
    print(f"made {groups} groups in {time.monotonic() - began:.1f} s", flush=True)
    admin.close()


def timed(visitor: Visitor, method: str, path: str, fields: dict[str, str] | None, runs: int) -> list[float]:
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        answer = visitor.post(path, fields) if method == "POST" else visitor.get(path)
        elapsed = (time.perf_counter() - began) * 1000
        if answer.status != 200:
            raise SystemExit(f"{method} {path} answered {answer.status}: {answer.error()[:500]}")
        times.append(elapsed)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topics", type=int, default=1000)
    parser.add_argument("--partitions", type=int, default=1)
    parser.add_argument("--groups", type=int, default=100)
    parser.add_argument("--group-topics", type=int, default=2)
    parser.add_argument("--records", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    directory = tempfile.mkdtemp(prefix="console-bench-")
    broker = BrokerProcess(os.path.join(directory, "data"), {"group.initial.rebalance.delay.ms": "0"}).start()
    try:
        setup(broker.bootstrap, args.topics, args.partitions, args.groups, args.group_topics, args.records)
        server = ConsoleServer(ConsoleSettings(broker.bootstrap)).start()
        try:
            visitor = Visitor(server.url)
            visitor.get("/")
            middle = max(1, args.topics // 50 // 2)
            group = f"group-{args.groups // 2:03d}"
            pages = [
                ("overview", "GET", "/", None),
                ("topics, page 1", "GET", "/topics", None),
                (f"topics, page {middle}", "GET", f"/topics?page={middle}", None),
                ("a topic", "GET", "/topics/bench-0000", None),
                ("messages, the newest 50", "GET", "/topics/bench-0000/messages?start=end", None),
                (f"messages, header search over {args.records:,}", "GET",
                 f"/topics/bench-0000/messages?start=beginning&header=trace%3Dt-{args.records - 1}", None),
                ("groups", "GET", "/groups", None),
                ("a group (lag, chart)", "GET", f"/groups/{group}", None),
                ("a group's chart (lag.svg)", "GET", f"/groups/{group}/lag.svg", None),
                ("a reset preview", "POST", f"/groups/{group}/reset", {"to": "earliest"}),
                ("quotas", "GET", "/quotas", None),
            ]
            print(f"\n{args.topics} topics, {args.groups} groups, {args.runs} runs each (ms; bar {BAR_MS:g} ms)")
            print(f"{'page':<42} {'median':>8} {'p95':>8} {'max':>8}")
            worst = 0.0
            for name, method, path, fields in pages:
                if path.endswith(".svg"):
                    times = []
                    for _ in range(args.runs):
                        began = time.perf_counter()
                        answer = visitor.request("GET", path, accept="image/svg+xml")
                        times.append((time.perf_counter() - began) * 1000)
                        assert answer.status == 200
                else:
                    times = timed(visitor, method, path, fields, args.runs)
                ordered = sorted(times)
                p95 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.95))]
                median = statistics.median(times)
                worst = max(worst, median)
                print(f"{name:<42} {median:8.1f} {p95:8.1f} {max(times):8.1f}", flush=True)
            print(f"\nslowest median {worst:.1f} ms: {'within' if worst <= BAR_MS else 'OVER'} the {BAR_MS:g} ms bar")
        finally:
            server.stop()
    finally:
        broker.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
