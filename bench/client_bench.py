"""logstore's client beside confluent-kafka, kafka-python and aiokafka, in one run: the issue's bars.

Starts ``python -m logstore broker`` on 127.0.0.1 (a free port, a fresh data
directory, removed afterwards; see broker_perf.Broker), then for each of
``--runs`` runs, with 100-byte values (``--record-size``) on one-partition
topics, each workload on a topic of its own:

1. ``produce()`` per record, acks=1, linger.ms=5: logstore and confluent-kafka
   send ``--records`` values in a tight loop (``poll(0)`` every 1,000, a short
   ``poll`` on ``BufferError``), delivery reports for failures only; then
   kafka-python's ``send`` and aiokafka's ``send`` (``--slow-records``; they are
   an order of magnitude slower). Timed from the first send to the last
   acknowledgement; the topic's high watermark is checked afterwards.
2. ``produce_batch``: logstore hands the values over in lists of 10,000.
3. ``consume(num_messages=10000)``: logstore and confluent-kafka, assigned to
   the partition from offset 0 (no group), read the ``--records`` values back;
   kafka-python (``poll(max_records=10000)``) and aiokafka (``getmany``) read
   ``--slow-records``.
4. embedded: logstore's client on ``embedded://`` (no broker, no socket):
   ``produce_batch`` of ``--records`` values, then a consumer in a group
   (subscribe, auto commit) reads them all; rate = records / (produce + consume time).
5. end-to-end latency: a producer sends 10,000 records/s (``linger.ms=0``,
   acks=1) for ``--latency-seconds``, each value carrying its send time; a
   consumer (assign, ``fetch.max.wait.ms=1``... as each library allows)
   records receive - send; p50/p99 for logstore and confluent-kafka.
6. ``logstore consume`` (the CLI) of the produce topic to /dev/null, with
   ``--client logstore`` and ``--client confluent``: records / wall time of the
   whole command (its start-up included).

Figures are medians over the runs; ratios to the peers and the issue's bars
are printed, never asserted. Every loop is bounded in count and in time
(``--phase-timeout``).

    .venv/bin/python bench/client_bench.py                 # 1M records, 3 runs
    .venv/bin/python bench/client_bench.py --quick         # 200K records, 1 run
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import ROOT, BenchError, Broker, Phase, high_watermark, timed, versions

POLL_EVERY = 1000
BATCH = 10_000
CONNECT_TIMEOUT_S = 10.0
PRODUCER = {"acks": "1", "linger.ms": 5, "batch.size": 1_048_576, "compression.type": "none"}
BARS = {
    "produce per call": ("confluent", 0.75),
    "produce_batch": ("confluent produce per call", 2.0),
    "consume": ("confluent", 1.5),
}


def module(name: str) -> ModuleType:
    if name == "logstore":
        import logstore.client as m

        return m
    import confluent_kafka as c

    return c


def _close(producer: Any) -> None:
    """Close a producer (logstore's; confluent-kafka's Producer has no close before 2.x)."""
    close = getattr(producer, "close", None)
    if close is not None:
        close()


def _deadline_check(deadline: float, label: str, done: int, total: int, timeout: float) -> None:
    if time.monotonic() > deadline:
        raise BenchError(f"{label}: {done} of {total} in {timeout:g} s")


# --------------------------------------------------------------------------- produce


def produce_per_call(kafka: ModuleType, bootstrap: str, topic: str, n: int, value: bytes,
                     timeout: float) -> Callable[[], tuple[int, int]]:  # fmt: skip
    failures: list[str] = []

    def report(error: Any, msg: Any) -> None:
        if error is not None and len(failures) < 100:
            failures.append(error.str())

    producer = kafka.Producer({"bootstrap.servers": bootstrap, **PRODUCER, "delivery.report.only.error": True,
                               "on_delivery": report})  # fmt: skip
    producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)

    def body() -> tuple[int, int]:
        deadline = time.monotonic() + timeout
        produce, poll = producer.produce, producer.poll
        sent = 0
        while sent < n:
            try:
                produce(topic, value)
            except BufferError:
                poll(0.005)
                _deadline_check(deadline, "produce", sent, n, timeout)
                continue
            sent += 1
            if not sent % POLL_EVERY:
                poll(0)
                _deadline_check(deadline, "produce", sent, n, timeout)
        left = producer.flush(max(deadline - time.monotonic(), 1.0))
        _close(producer)
        if left or failures:
            raise BenchError(f"produce: {left} unacknowledged, failures {failures[:3]}")
        return n, n * len(value)

    return body


def produce_batch(kafka: ModuleType, bootstrap: str, topic: str, n: int, value: bytes,
                  timeout: float) -> Callable[[], tuple[int, int]]:  # fmt: skip
    producer = kafka.Producer(
        {"bootstrap.servers": bootstrap, **PRODUCER, "delivery.report.only.error": True}
    )
    producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
    values = [value] * BATCH

    def body() -> tuple[int, int]:
        deadline = time.monotonic() + timeout
        sent = 0
        while sent < n:
            chunk = values if n - sent >= BATCH else values[: n - sent]
            producer.produce_batch(topic, chunk)
            sent += len(chunk)
            producer.poll(0)
            _deadline_check(deadline, "produce_batch", sent, n, timeout)
        left = producer.flush(max(deadline - time.monotonic(), 1.0))
        _close(producer)
        if left:
            raise BenchError(f"produce_batch: {left} unacknowledged")
        return n, n * len(value)

    return body


def produce_kafka_python(
    bootstrap: str, topic: str, n: int, value: bytes, timeout: float
) -> Callable[[], tuple[int, int]]:
    from kafka import KafkaProducer  # type: ignore[import-untyped]

    producer = KafkaProducer(bootstrap_servers=bootstrap, acks=1, linger_ms=5, batch_size=1_048_576)
    producer.partitions_for(topic)

    def body() -> tuple[int, int]:
        deadline = time.monotonic() + timeout
        for i in range(n):
            producer.send(topic, value)
            if not i % POLL_EVERY:
                _deadline_check(deadline, "kafka-python produce", i, n, timeout)
        producer.flush(max(deadline - time.monotonic(), 1.0))
        producer.close()
        return n, n * len(value)

    return body


def produce_aiokafka(
    bootstrap: str, topic: str, n: int, value: bytes, timeout: float
) -> Callable[[], tuple[int, int]]:
    def body() -> tuple[int, int]:
        async def run() -> None:
            from aiokafka import AIOKafkaProducer

            producer = AIOKafkaProducer(
                bootstrap_servers=bootstrap, acks=1, linger_ms=5, max_batch_size=1_048_576
            )
            await producer.start()
            try:
                deadline = time.monotonic() + timeout
                futures = []
                for i in range(n):
                    futures.append(await producer.send(topic, value))
                    if not i % POLL_EVERY:
                        _deadline_check(deadline, "aiokafka produce", i, n, timeout)
                await asyncio.wait_for(asyncio.gather(*futures), max(deadline - time.monotonic(), 1.0))
            finally:
                await producer.stop()

        asyncio.run(run())
        return n, n * len(value)

    return body


# --------------------------------------------------------------------------- consume


def consume(
    kafka: ModuleType, bootstrap: str, topic: str, n: int, timeout: float
) -> Callable[[], tuple[int, int]]:
    config = {"bootstrap.servers": bootstrap, "group.id": "client-bench-unused", "enable.auto.commit": False,
              "auto.offset.reset": "earliest"}  # fmt: skip
    if kafka.__name__ == "confluent_kafka":
        config["fetch.queue.backoff.ms"] = 1  # else librdkafka pauses 1 s at 100,000 queued messages
    consumer = kafka.Consumer(config)
    consumer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)

    def body() -> tuple[int, int]:
        deadline = time.monotonic() + timeout
        consumer.assign([kafka.TopicPartition(topic, 0, 0)])
        got = nbytes = 0
        while got < n:
            _deadline_check(deadline, f"{kafka.__name__} consume", got, n, timeout)
            batch = consumer.consume(num_messages=min(BATCH, n - got), timeout=1.0)
            for m in batch:
                if m.error() is not None:
                    raise BenchError(f"consume: {m.error()}")
            got += len(batch)
            nbytes += sum(map(len, batch))
        consumer.close()
        return got, nbytes

    return body


def consume_kafka_python(bootstrap: str, topic: str, n: int, timeout: float) -> Callable[[], tuple[int, int]]:
    from kafka import KafkaConsumer, TopicPartition

    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest"
    )

    def body() -> tuple[int, int]:
        deadline = time.monotonic() + timeout
        tp = TopicPartition(topic, 0)
        consumer.assign([tp])
        consumer.seek(tp, 0)
        got = nbytes = 0
        while got < n:
            _deadline_check(deadline, "kafka-python consume", got, n, timeout)
            for records in consumer.poll(timeout_ms=1000, max_records=BATCH).values():
                got += len(records)
                nbytes += sum(len(r.value) for r in records)
        consumer.close()
        return got, nbytes

    return body


def consume_aiokafka(bootstrap: str, topic: str, n: int, timeout: float) -> Callable[[], tuple[int, int]]:
    def body() -> tuple[int, int]:
        async def run() -> tuple[int, int]:
            from aiokafka import AIOKafkaConsumer, TopicPartition

            consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False,
                                        auto_offset_reset="earliest")  # fmt: skip
            await consumer.start()
            try:
                tp = TopicPartition(topic, 0)
                consumer.assign([tp])
                consumer.seek(tp, 0)
                deadline = time.monotonic() + timeout
                got = nbytes = 0
                while got < n:
                    _deadline_check(deadline, "aiokafka consume", got, n, timeout)
                    for records in (await consumer.getmany(timeout_ms=1000, max_records=BATCH)).values():
                        got += len(records)
                        nbytes += sum(len(r.value) for r in records)
                return got, nbytes
            finally:
                await consumer.stop()

        return asyncio.run(run())

    return body


# --------------------------------------------------------------------------- embedded, latency, CLI


def embedded_run(n: int, value: bytes, timeout: float, workdir: str) -> dict[str, float]:
    """produce_batch then a group consumer, in-process, both clients open throughout (one embedded
    broker): seconds of each half and the combined rate."""
    import logstore.client as kafka

    bootstrap = f"embedded://{os.path.join(workdir, 'embedded')}"
    producer = kafka.Producer({"bootstrap.servers": bootstrap, **PRODUCER})
    values = [value] * BATCH
    deadline = time.monotonic() + timeout
    start = time.perf_counter()
    for sent in range(0, n, BATCH):
        producer.produce_batch("emb", values if n - sent >= BATCH else values[: n - sent])
        producer.poll(0)
        _deadline_check(deadline, "embedded produce", sent, n, timeout)
    if producer.flush(max(deadline - time.monotonic(), 1.0)):
        raise BenchError("embedded produce: records left unacknowledged")
    produced = time.perf_counter() - start
    consumer = kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "emb", "auto.offset.reset": "earliest"}
    )
    consumer.subscribe(["emb"])
    start = time.perf_counter()
    got = 0
    while got < n:
        _deadline_check(deadline, "embedded consume", got, n, timeout)
        got += len(consumer.consume(BATCH, 1.0))
    consumed = time.perf_counter() - start
    consumer.close()
    producer.close()  # the last client: the embedded broker closes before its directory goes
    shutil.rmtree(os.path.join(workdir, "embedded"), ignore_errors=True)
    return {"produce_s": produced, "consume_s": consumed, "records_per_s": n / (produced + consumed),
            "produce_records_per_s": n / produced, "consume_records_per_s": n / consumed}  # fmt: skip


def latency_child(client: str, bootstrap: str, topic: str, total: int, seconds: float) -> None:
    """The reading half of the latency workload, in a process of its own (prints the latencies as JSON)."""
    kafka = module(client)
    consumer = kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "latency", "enable.auto.commit": False,
                               "fetch.wait.max.ms": 5})  # fmt: skip
    consumer.assign([kafka.TopicPartition(topic, 0, kafka.OFFSET_END)])
    consumer.poll(0.5)  # the first fetch is in flight before the first send
    print("ready", flush=True)
    latencies: list[float] = []
    deadline = time.monotonic() + seconds + 30
    while len(latencies) < total and time.monotonic() < deadline:
        m = consumer.poll(0.1)  # consume(n, t) would wait for n records or t
        if m is not None and m.error() is None:
            latencies.append(time.monotonic() - float(m.value()))
    consumer.close()
    print(json.dumps(latencies), flush=True)


def latency_run(kafka: ModuleType, bootstrap: str, topic: str, rate: int, seconds: float) -> dict[str, float]:
    """p50/p99 of send -> receive at ``rate`` records/s, linger.ms=0, acks=1.

    As Kafka's end-to-end latency tool, the consumer runs apart from the producer (a child
    process): in one process, Python threads of the two would wait on each other for the GIL.
    Send times are CLOCK_MONOTONIC, which both processes share.
    """
    producer = kafka.Producer({"bootstrap.servers": bootstrap, "acks": "1", "linger.ms": 0})
    producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
    total = int(rate * seconds)
    client = "logstore" if kafka.__name__.startswith("logstore") else "confluent"
    child = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--latency-child", client, bootstrap, topic, str(total),
         str(seconds)], stdout=subprocess.PIPE, text=True, cwd=ROOT,
    )  # fmt: skip
    assert child.stdout is not None
    if child.stdout.readline().strip() != "ready":
        child.kill()
        raise BenchError("latency: the consumer did not start")
    start = time.monotonic()
    for i in range(total):
        delay = start + i / rate - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # pacing by sleeping only: a spin would hold the GIL
        producer.produce(topic, repr(time.monotonic()).encode())
        if not i % 100:
            producer.poll(0)
    producer.flush(30)
    out, _ = child.communicate(timeout=seconds + 60)
    latencies = json.loads(out.strip().splitlines()[-1])
    if len(latencies) < total * 0.99:
        raise BenchError(f"latency: {len(latencies)} of {total} records came back")
    ordered = sorted(latencies)
    return {"p50_ms": ordered[len(ordered) // 2] * 1000, "p99_ms": ordered[int(len(ordered) * 0.99)] * 1000,
            "records": float(len(ordered))}  # fmt: skip


def cli_consume(client: str, bootstrap: str, topic: str, n: int, timeout: float) -> float:
    """Records/s of ``logstore consume`` to /dev/null, the command's start-up included."""
    start = time.perf_counter()
    with open(os.devnull, "wb") as sink:
        done = subprocess.run(
            [sys.executable, "-m", "logstore", "consume", "--bootstrap-server", bootstrap, "--client", client,
             "--topic", topic, "--from-beginning", "--max-messages", str(n)],
            stdout=sink, stderr=subprocess.PIPE, timeout=timeout, cwd=ROOT,
        )  # fmt: skip
    seconds = time.perf_counter() - start
    if done.returncode != 0 or f"Processed a total of {n} messages".encode() not in done.stderr:
        raise BenchError(f"logstore consume --client {client}: {done.stderr.decode()[-500:]}")
    return n / seconds


# --------------------------------------------------------------------------- the run


def one_run(args: argparse.Namespace, broker: Broker, run: int, workdir: str) -> dict[str, float]:
    value = b"x" * args.record_size
    n, slow, timeout = args.records, args.slow_records, args.phase_timeout
    out: dict[str, float] = {}

    def phase(name: str, topic: str, make: Callable[[], Callable[[], tuple[int, int]]], expect: int) -> Phase:
        print(f"run {run}: {name} ...", file=sys.stderr, flush=True)
        result = timed(broker, name, make())
        if expect and name.startswith("produce") and high_watermark(broker.bootstrap, topic) != expect:
            raise BenchError(f"{name}: the topic does not hold {expect} records")
        out[name] = result.records_per_s
        return result

    for name in args.clients:
        phase(f"produce per call {name}", f"p-{name}-{run}",
              lambda name=name: produce_per_call(module(name), broker.bootstrap, f"p-{name}-{run}", n, value, timeout), n)  # fmt: skip
    if "logstore" in args.clients:
        phase("produce_batch logstore", f"b-{run}",
              lambda: produce_batch(module("logstore"), broker.bootstrap, f"b-{run}", n, value, timeout), n)  # fmt: skip
    if slow:
        phase("produce per call kafka-python", f"kp-{run}",
              lambda: produce_kafka_python(broker.bootstrap, f"kp-{run}", slow, value, timeout), slow)  # fmt: skip
        phase("produce per call aiokafka", f"ak-{run}",
              lambda: produce_aiokafka(broker.bootstrap, f"ak-{run}", slow, value, timeout), slow)  # fmt: skip
    source = f"p-{args.clients[-1]}-{run}"
    for name in args.clients:
        phase(
            f"consume {name}",
            source,
            lambda name=name: consume(module(name), broker.bootstrap, source, n, timeout),
            0,
        )
    if slow:
        phase(
            "consume kafka-python",
            source,
            lambda: consume_kafka_python(broker.bootstrap, source, slow, timeout),
            0,
        )
        phase(
            "consume aiokafka", source, lambda: consume_aiokafka(broker.bootstrap, source, slow, timeout), 0
        )
    if "logstore" in args.clients:
        print(f"run {run}: embedded ...", file=sys.stderr, flush=True)
        emb = embedded_run(n, value, timeout, workdir)
        out.update({f"embedded {k}": v for k, v in emb.items()})
    if args.latency_seconds:
        for name in args.clients:
            print(f"run {run}: latency {name} ...", file=sys.stderr, flush=True)
            lat = latency_run(
                module(name), broker.bootstrap, f"lat-{name}-{run}", 10_000, args.latency_seconds
            )
            out.update({f"latency {name} {k}": v for k, v in lat.items()})
    for name in args.clients:
        print(f"run {run}: CLI consume {name} ...", file=sys.stderr, flush=True)
        out[f"cli consume {name}"] = cli_consume(name, broker.bootstrap, source, n, timeout)
    return out


def report(runs: list[dict[str, float]]) -> dict[str, float]:
    keys = runs[0].keys()
    med = {k: statistics.median(r[k] for r in runs) for k in keys}
    width = max(map(len, keys))
    print(f"\nmedians of {len(runs)} runs")
    for k in keys:
        print(f"  {k:<{width}}  {med[k]:>14,.1f}")

    def ratio(a: str, b: str, bar: float, what: str) -> None:
        if a in med and b in med:
            r = med[a] / med[b]
            print(f"  {what:<44} {r:6.2f}x  (bar {bar:g}x: {'met' if r >= bar else 'NOT met'})")

    print("\nratios")
    ratio("produce per call logstore", "produce per call confluent", 0.75, "produce() / confluent produce()")
    ratio("produce_batch logstore", "produce per call confluent", 2.0, "produce_batch / confluent produce()")
    ratio("consume logstore", "consume confluent", 1.5, "consume(10000) / confluent consume(10000)")
    for peer in ("kafka-python", "aiokafka"):
        bar = 10.0 if peer == "kafka-python" else 5.0
        ratio("produce per call logstore", f"produce per call {peer}", bar, f"produce() / {peer}")
        ratio("consume logstore", f"consume {peer}", bar, f"consume / {peer}")
    if "embedded records_per_s" in med:
        v = med["embedded records_per_s"]
        print(
            f"  {'embedded produce+consume records/s':<44} {v:,.0f}  (bar 2,000,000: {'met' if v >= 2e6 else 'NOT met'})"
        )
    if "latency logstore p99_ms" in med:
        v = med["latency logstore p99_ms"]
        print(f"  {'end-to-end p99 at 10K/s (ms)':<44} {v:.2f}  (bar 5: {'met' if v <= 5 else 'NOT met'})")
    if "cli consume logstore" in med:
        v = med["cli consume logstore"]
        print(
            f"  {'logstore consume to /dev/null records/s':<44} {v:,.0f}  (bar 500,000: {'met' if v >= 5e5 else 'NOT met'})"
        )
    return med


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--records", type=int, default=1_000_000, help="records per fast workload (default 1M)")
    p.add_argument(
        "--slow-records",
        type=int,
        default=100_000,
        help="records for kafka-python and aiokafka (0: skip them)",
    )
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument(
        "--latency-seconds", type=float, default=5.0, help="seconds of the latency workload (0: skip)"
    )
    p.add_argument("--phase-timeout", type=float, default=300.0)
    p.add_argument(
        "--clients", nargs="+", default=["logstore", "confluent"], choices=["logstore", "confluent"]
    )
    p.add_argument("--quick", action="store_true", help="200K records, 20K slow, 1 run, 3 s of latency")
    p.add_argument("--json", default=None, help="write the medians and versions here")
    p.add_argument("--tmp-root", default=None)
    args = p.parse_args(argv)
    if args.quick:
        args.records, args.slow_records, args.runs, args.latency_seconds = 200_000, 20_000, 1, 3.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--latency-child"]:
        client, bootstrap, topic, total, seconds = argv[1:6]
        latency_child(client, bootstrap, topic, int(total), float(seconds))
        return 0
    args = parse_args(argv)
    workdir = tempfile.mkdtemp(prefix="client-bench-", dir=args.tmp_root)
    broker = Broker(workdir, "auto", [])
    try:
        broker.start()
        runs = [one_run(args, broker, run, workdir) for run in range(1, args.runs + 1)]
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    med = report(runs)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"medians": med, "runs": runs, "versions": versions(), "args": vars(args)}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
