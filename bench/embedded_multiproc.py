"""One embedded store, many processes: what the Unix socket costs (issue 25, point 3).

Four producers write ``--records`` 100-byte records each to one ``embedded:///dir`` store
(idempotent, ``produce_batch`` of 1,000, acks=all, the same client code either way):

- ``in-process``: four producer threads in the process that serves the store (no socket);
- ``socket``: four producer processes, each reaching the serving process (this one, otherwise
  idle) over ``<dir>/.logstore.sock``.

The producers connect and have a first record acknowledged, then start together; the rate is
all records over the time from the first timed produce to the last acknowledgement. Medians of ``--runs`` runs, each on a fresh
directory. Then the latency of one record produced and acknowledged at a time, from the serving
process and from another process. Run: ``python -m bench.embedded_multiproc [--records 200000] [--runs 3]``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable

from logstore.client import Producer

TOPIC = "bench"
VALUE = b"x" * 100
BATCH = 1000


def produce(boot: str, count: int, go: Callable[[], None]) -> tuple[float, float]:
    """Produce ``count`` records once ``go()`` returns; (start, end) in time.time() of that part."""
    with Producer({"bootstrap.servers": boot, "enable.idempotence": True, "linger.ms": 5}) as producer:
        producer.produce(TOPIC, VALUE)
        assert producer.flush(60) == 0
        go()
        start = time.time()
        for _ in range(count // BATCH):
            producer.produce_batch(TOPIC, [VALUE] * BATCH)
            producer.poll(0)
        assert producer.flush(300) == 0
        return start, time.time()


def round_trips(boot: str, count: int) -> float:
    """Median seconds of one record produced and flushed (acknowledged), one at a time."""
    times = []
    with Producer({"bootstrap.servers": boot, "enable.idempotence": True, "linger.ms": 0}) as producer:
        producer.produce(TOPIC, VALUE)
        assert producer.flush(60) == 0
        for _ in range(count):
            started = time.perf_counter()
            producer.produce(TOPIC, VALUE)
            assert producer.flush(30) == 0
            times.append(time.perf_counter() - started)
    return statistics.median(times)


def latency(data: str, count: int) -> tuple[float, float]:
    """(in-process, through the socket) median produce-and-acknowledge time of one record."""
    with Producer({"bootstrap.servers": f"embedded://{data}"}) as holder:
        holder.list_topics(TOPIC, timeout=30)
        here = round_trips(f"embedded://{data}", count)
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        command = [sys.executable, "-m", "bench.embedded_multiproc", "--latency-child", data, "--records", str(count)]
        out = subprocess.run(command, cwd=root, env=dict(os.environ, PYTHONPATH=root), capture_output=True,
                             text=True, timeout=600, check=True).stdout  # fmt: skip
    return here, float(out)


def in_process(data: str, records: int, producers: int) -> float:
    spans: list[tuple[float, float]] = []
    barrier = threading.Barrier(producers, timeout=120)
    with Producer({"bootstrap.servers": f"embedded://{data}"}) as holder:
        holder.list_topics(TOPIC, timeout=30)
        threads = [
            threading.Thread(target=lambda: spans.append(produce(f"embedded://{data}", records, barrier.wait)))
            for _ in range(producers)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(600)
    assert len(spans) == producers
    return producers * records / (max(e for _, e in spans) - min(s for s, _ in spans))


def through_socket(data: str, records: int, producers: int) -> float:
    with Producer({"bootstrap.servers": f"embedded://{data}"}) as holder:
        holder.list_topics(TOPIC, timeout=30)  # this process serves; the children connect
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        env = dict(os.environ, PYTHONPATH=root)
        command = [sys.executable, "-m", "bench.embedded_multiproc", "--child", data, "--records", str(records)]
        children = [
            subprocess.Popen(command, cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
            for _ in range(producers)
        ]
        for child in children:  # each connected, its first record acknowledged: all start together
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        spans = []
        for child in children:
            assert child.stdin is not None
            child.stdin.write("go\n")
            child.stdin.flush()
        for child in children:
            out, _ = child.communicate(timeout=600)
            assert child.returncode == 0, out
            start, end = out.split()
            spans.append((float(start), float(end)))
    return producers * records / (max(e for _, e in spans) - min(s for s, _ in spans))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=200_000, help="records per producer")
    parser.add_argument("--producers", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--latency-child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.latency_child:
        print(round_trips(f"embedded://{args.latency_child}", args.records))
        return
    if args.child:
        def go() -> None:
            print("ready", flush=True)
            sys.stdin.readline()

        start, end = produce(f"embedded://{args.child}", args.records, go)
        print(f"{start} {end}")
        return
    results: dict[str, list[float]] = {"in-process": [], "socket": []}
    for run in range(args.runs):
        for name, measure in (("in-process", in_process), ("socket", through_socket)):
            with tempfile.TemporaryDirectory() as tmp:
                rate = measure(os.path.join(tmp, "data"), args.records, args.producers)
            results[name].append(rate)
            print(f"run {run + 1} {name}: {rate:,.0f} records/s", flush=True)
    for name, rates in results.items():
        print(f"{name}: median {statistics.median(rates):,.0f} records/s ({args.producers} producers, "
              f"{args.records:,} records each, {args.runs} runs)")  # fmt: skip
    ratio = statistics.median(results["socket"]) / statistics.median(results["in-process"])
    print(f"socket / in-process: {ratio:.2f}")
    with tempfile.TemporaryDirectory() as tmp:
        here, there = latency(os.path.join(tmp, "data"), 2000)
    print(f"one record produced and acknowledged (median of 2,000): in-process {here * 1e6:.0f} us, "
          f"through the socket {there * 1e6:.0f} us")  # fmt: skip


if __name__ == "__main__":
    main()
