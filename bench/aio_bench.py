"""logstore.client.aio beside the sync client and aiokafka, in one run: issue 25's asyncio bar.

Starts ``python -m logstore broker`` on 127.0.0.1 (a free port, a fresh data directory,
removed afterwards; see broker_perf.Broker), then for each of ``--runs`` runs, with 100-byte
values (``--record-size``) on one-partition topics, each workload on a topic of its own
(acks=1, linger.ms=5, as bench/client_bench.py):

produce (timed from the first record to the last acknowledgement; the topic's high watermark
checked afterwards):

- ``sync produce``: ``Producer.produce`` per record in a tight loop, reports for failures only
  (client_bench's workload: the sync client at its fastest, knowing only of failures);
- ``sync produce+report``: the same with a delivery callback per record (each record's outcome
  known, which is what an ``await`` gives);
- ``aio send``: ``fut = await AIOProducer.send(...)`` per record (aiokafka's pattern: back-pressure
  by await, each record's future), every future checked at the end;
- ``aio produce tasks``: ``await produce(...)`` in ``--tasks`` concurrent tasks, each record
  awaited to its delivery;
- ``sync produce_batch`` / ``aio produce_batch``: lists of 10,000;
- ``aiokafka send``: ``await producer.send`` per record, gathered (``--slow-records``).

consume (assigned from offset 0, no group, ``--records`` values):

- ``sync consume``: ``Consumer.consume(10000, 1.0)``;
- ``aio getmany``: ``AIOConsumer.getmany(timeout_ms=1000, max_records=10000)``;
- ``aio async for``: one record per iteration;
- ``aiokafka getmany`` (``--slow-records``).

The asyncio workloads run under each loop of ``--loops`` (uvloop, asyncio). Figures are
records/s, medians over the runs; the ratios to the issue's bars (aio >= 0.9x the sync client,
>= 3x aiokafka) are printed, never asserted. Every loop is bounded in count and in time
(``--phase-timeout``).

    .venv/bin/python bench/aio_bench.py                    # 500K records, 100K for aiokafka, 3 runs
    .venv/bin/python bench/aio_bench.py --quick            # 100K records, 20K for aiokafka, 1 run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import uvloop

from bench.broker_perf import BenchError, Broker, high_watermark, timed, versions
from bench.client_bench import (
    BATCH,
    CONNECT_TIMEOUT_S,
    PRODUCER,
    consume,
    consume_aiokafka,
    produce_aiokafka,
    produce_batch,
    produce_per_call,
)

LOOPS = {"uvloop": uvloop.new_event_loop, "asyncio": None}


def in_loop(loop: str, main: Callable[[], Awaitable[tuple[int, int]]]) -> tuple[int, int]:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(main())


def _check(deadline: float, label: str, done: int, total: int) -> None:
    if time.monotonic() > deadline:
        raise BenchError(f"{label}: {done} of {total} by the deadline")


# --------------------------------------------------------------------------- produce


def sync_produce_reported(bootstrap: str, topic: str, n: int, value: bytes, timeout: float) -> Callable[[], tuple[int, int]]:
    from logstore.client import Producer

    failures: list[Any] = []
    delivered = [0]

    def report(error: Any, msg: Any) -> None:
        if error is not None:
            failures.append(error)
        else:
            delivered[0] += 1

    producer = Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)

    def body() -> tuple[int, int]:
        deadline = time.monotonic() + timeout
        produce, poll = producer.produce, producer.poll
        sent = 0
        while sent < n:
            try:
                produce(topic, value, on_delivery=report)
            except BufferError:
                poll(0.005)
                _check(deadline, "sync produce+report", sent, n)
                continue
            sent += 1
            if not sent % 1000:
                poll(0)
                _check(deadline, "sync produce+report", sent, n)
        left = producer.flush(max(deadline - time.monotonic(), 1.0))
        producer.close()
        if left or failures or delivered[0] != n:
            raise BenchError(f"sync produce+report: {left} left, {len(failures)} failed, {delivered[0]} reported")
        return n, n * len(value)

    return body


def aio_send(bootstrap: str, topic: str, n: int, value: bytes, timeout: float, loop: str) -> Callable[[], tuple[int, int]]:
    from logstore.client.aio import AIOProducer

    async def main() -> tuple[int, int]:
        async with AIOProducer({"bootstrap.servers": bootstrap, **PRODUCER}) as p:
            await p.produce(topic, b"warm")  # metadata and connection, as list_topics for the others
            deadline = time.monotonic() + timeout
            started = time.perf_counter()
            send = p.send
            futures = []
            for i in range(n):
                futures.append(await send(topic, value))
                if not i % 10_000:
                    _check(deadline, "aio send", i, n)
            left = await p.flush(max(deadline - time.monotonic(), 1.0))
            elapsed = time.perf_counter() - started
            bad = sum(1 for f in futures if not f.done() or f.exception() is not None)
            if left or bad:
                raise BenchError(f"aio send: {left} left, {bad} failed")
        return n, int(elapsed * 1e9)

    return lambda: in_loop(loop, main)


def aio_produce_tasks(bootstrap: str, topic: str, n: int, value: bytes, timeout: float, loop: str,
                      tasks: int) -> Callable[[], tuple[int, int]]:  # fmt: skip
    from logstore.client.aio import AIOProducer

    async def main() -> tuple[int, int]:
        async with AIOProducer({"bootstrap.servers": bootstrap, **PRODUCER}) as p:
            await p.produce(topic, b"warm")
            deadline = time.monotonic() + timeout
            started = time.perf_counter()
            produce = p.produce
            share = n // tasks

            async def worker() -> None:
                for i in range(share):
                    await produce(topic, value)
                    if not i % 10_000:
                        _check(deadline, "aio produce tasks", i, share)

            async with asyncio.timeout(timeout):
                await asyncio.gather(*(worker() for _ in range(tasks)))
            elapsed = time.perf_counter() - started
        return share * tasks, int(elapsed * 1e9)

    return lambda: in_loop(loop, main)


def aio_produce_batch(bootstrap: str, topic: str, n: int, value: bytes, timeout: float, loop: str) -> Callable[[], tuple[int, int]]:
    from logstore.client.aio import AIOProducer

    async def main() -> tuple[int, int]:
        async with AIOProducer({"bootstrap.servers": bootstrap, **PRODUCER}) as p:
            await p.produce(topic, b"warm")
            values = [value] * BATCH
            deadline = time.monotonic() + timeout
            started = time.perf_counter()
            pending = []
            sent = 0
            while sent < n:
                chunk = values if n - sent >= BATCH else values[: n - sent]
                pending.append(asyncio.ensure_future(p.produce_batch(topic, chunk)))
                sent += len(chunk)
                await asyncio.sleep(0)
                _check(deadline, "aio produce_batch", sent, n)
            async with asyncio.timeout(max(deadline - time.monotonic(), 1.0)):
                counts = await asyncio.gather(*pending)
            elapsed = time.perf_counter() - started
            if sum(counts) != n:
                raise BenchError(f"aio produce_batch: {sum(counts)} of {n}")
        return n, int(elapsed * 1e9)

    return lambda: in_loop(loop, main)


# --------------------------------------------------------------------------- consume


def aio_getmany(bootstrap: str, topic: str, n: int, timeout: float, loop: str, one_by_one: bool) -> Callable[[], tuple[int, int]]:
    from logstore.client import TopicPartition
    from logstore.client.aio import AIOConsumer

    async def main() -> tuple[int, int]:
        config = {"bootstrap.servers": bootstrap, "group.id": "aio-bench-unused", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest"}  # fmt: skip
        async with AIOConsumer(config) as c:
            c.consumer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
            started = time.perf_counter()
            deadline = time.monotonic() + timeout
            await c.assign([TopicPartition(topic, 0, 0)])
            got = nbytes = 0
            if one_by_one:
                async with asyncio.timeout(timeout):
                    async for m in c:
                        got += 1
                        nbytes += len(m)
                        if got >= n:
                            break
            else:
                while got < n:
                    _check(deadline, "aio getmany", got, n)
                    for records in (await c.getmany(timeout_ms=1000, max_records=min(BATCH, n - got))).values():
                        got += len(records)
                        nbytes += sum(map(len, records))
            elapsed = time.perf_counter() - started
        return got, int(elapsed * 1e9)

    return lambda: in_loop(loop, main)


# --------------------------------------------------------------------------- runs


def one_run(args: argparse.Namespace, broker: Broker, run: int) -> dict[str, float]:
    n, slow, timeout = args.records, args.slow_records, args.phase_timeout
    value = b"x" * args.record_size
    out: dict[str, float] = {}

    def phase(name: str, topic: str | None, make: Callable[[], Callable[[], tuple[int, int]]], expect: int,
              inner_time: bool = False) -> None:  # fmt: skip
        body = make()
        result = timed(broker, name, body)
        rate = result.records_per_s
        if inner_time:  # the body timed itself (start-up of its loop and client left out), in ns
            rate = result.records / (result.bytes / 1e9)
        if topic is not None and expect and high_watermark(broker.bootstrap, topic) != expect:
            raise BenchError(f"{name}: the topic holds {high_watermark(broker.bootstrap, topic)} records, not {expect}")
        out[name] = rate
        print(f"run {run}: {name:<34} {rate:>12,.0f} records/s", flush=True)

    import logstore.client as sync_client

    phase("produce sync", f"s-{run}", lambda: produce_per_call(sync_client, broker.bootstrap, f"s-{run}", n, value, timeout), n)
    phase("produce sync+report", f"sr-{run}",
          lambda: sync_produce_reported(broker.bootstrap, f"sr-{run}", n, value, timeout), n)  # fmt: skip
    phase("produce_batch sync", f"sb-{run}",
          lambda: produce_batch(sync_client, broker.bootstrap, f"sb-{run}", n, value, timeout), n)  # fmt: skip
    for loop in args.loops:
        phase(f"produce aio send [{loop}]", f"as-{loop}-{run}",
              lambda loop=loop: aio_send(broker.bootstrap, f"as-{loop}-{run}", n, value, timeout, loop), n + 1, True)  # fmt: skip
        phase(f"produce aio {args.tasks} tasks [{loop}]", f"at-{loop}-{run}",
              lambda loop=loop: aio_produce_tasks(broker.bootstrap, f"at-{loop}-{run}", n, value, timeout, loop, args.tasks),
              n // args.tasks * args.tasks + 1, True)  # fmt: skip
        phase(f"produce_batch aio [{loop}]", f"ab-{loop}-{run}",
              lambda loop=loop: aio_produce_batch(broker.bootstrap, f"ab-{loop}-{run}", n, value, timeout, loop), n + 1, True)  # fmt: skip
    if slow:
        phase("produce aiokafka send", f"ak-{run}",
              lambda: produce_aiokafka(broker.bootstrap, f"ak-{run}", slow, value, timeout), slow)  # fmt: skip
    source = f"s-{run}"
    phase("consume sync", None, lambda: consume(sync_client, broker.bootstrap, source, n, timeout), 0)
    for loop in args.loops:
        phase(f"consume aio getmany [{loop}]", None,
              lambda loop=loop: aio_getmany(broker.bootstrap, source, n, timeout, loop, False), 0, True)  # fmt: skip
        phase(f"consume aio async for [{loop}]", None,
              lambda loop=loop: aio_getmany(broker.bootstrap, source, n, timeout, loop, True), 0, True)  # fmt: skip
    if slow:
        phase("consume aiokafka getmany", None, lambda: consume_aiokafka(broker.bootstrap, source, slow, timeout), 0)
    return out


def report(runs: list[dict[str, float]], args: argparse.Namespace) -> dict[str, float]:
    keys = runs[0].keys()
    med = {k: statistics.median(r[k] for r in runs) for k in keys}
    width = max(map(len, keys))
    print(f"\nmedians of {len(runs)} runs (records/s)")
    for k in keys:
        print(f"  {k:<{width}}  {med[k]:>14,.0f}")

    def ratio(a: str, b: str, bar: float) -> None:
        if a in med and b in med:
            r = med[a] / med[b]
            print(f"  {a + ' / ' + b:<80} {r:6.2f}x  (bar {bar:g}x: {'met' if r >= bar else 'NOT met'})")

    print("\nratios (issue 25: aio >= 0.9x the sync client, >= 3x aiokafka)")
    for loop in args.loops:
        for aio, sync in ((f"produce aio send [{loop}]", "produce sync"),
                          (f"produce aio send [{loop}]", "produce sync+report"),
                          (f"produce aio {args.tasks} tasks [{loop}]", "produce sync+report"),
                          (f"produce_batch aio [{loop}]", "produce_batch sync"),
                          (f"consume aio getmany [{loop}]", "consume sync"),
                          (f"consume aio async for [{loop}]", "consume sync")):  # fmt: skip
            ratio(aio, sync, 0.9)
        ratio(f"produce aio send [{loop}]", "produce aiokafka send", 3.0)
        ratio(f"consume aio getmany [{loop}]", "consume aiokafka getmany", 3.0)
    return med


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--records", type=int, default=500_000, help="records per logstore workload (default 500K)")
    p.add_argument("--slow-records", type=int, default=100_000, help="records for aiokafka (0: skip it)")
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--tasks", type=int, default=1000, help="concurrent tasks of the 'await produce' workload")
    p.add_argument("--loops", nargs="+", default=["uvloop", "asyncio"], choices=list(LOOPS))
    p.add_argument("--phase-timeout", type=float, default=300.0)
    p.add_argument("--quick", action="store_true", help="100K records, 20K for aiokafka, 1 run")
    p.add_argument("--json", default=None, help="write the medians and versions here")
    p.add_argument("--tmp-root", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.slow_records, args.runs = 100_000, 20_000, 1
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else list(argv))
    workdir = tempfile.mkdtemp(prefix="aio-bench-", dir=args.tmp_root)
    broker = Broker(workdir, "auto", [])
    try:
        broker.start()
        runs = [one_run(args, broker, run) for run in range(1, args.runs + 1)]
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    med = report(runs, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": med, "runs": runs, "versions": versions(), "args": vars(args)}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
