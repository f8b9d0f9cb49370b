"""The broker under real Kafka clients: produce and consume throughput, broker CPU per MB.

Starts ``python -m logstore broker`` on 127.0.0.1 (a free port, a fresh
temporary data directory under ``--tmp-root``, removed afterwards), then for
each of ``--runs`` runs:

1. ``produce acks=1``: confluent-kafka sends ``--records`` values of
   ``--record-size`` bytes (acks=1, linger.ms=5, batch.size=1048576,
   compression none) to a new one-partition topic: ``produce()`` in a tight
   loop, ``poll(0)`` every 1,000 records, a short ``poll`` on ``BufferError``,
   then ``flush``. Delivery reports are asked for failures only
   (``delivery.report.only.error``), so the client spends its time sending;
   the topic's high watermark is checked against the count afterwards;
2. ``consume``: a confluent-kafka consumer assigned to that partition from
   offset 0 (no group) reads every record back with ``consume(num_messages=
   10000)`` and sums the value sizes (``fetch.queue.backoff.ms=1``: librdkafka
   otherwise stops fetching for 1 s whenever 100,000 messages are queued);
3. ``produce acks=all``: as 1 with acks=all (one broker: the same work, plus
   the high-watermark wait);
4. ``produce kafka-python``: kafka-python's ``KafkaProducer`` (acks=1,
   linger_ms=5, batch_size=1048576) sends ``--kafka-python-records`` values
   (it is ~20x slower; fewer records keep the run short).

Each phase is timed from its first send (or fetch) to its last
acknowledgement (or record); connecting and creating the topic happen before.
Broker CPU is utime+stime of the broker process from ``/proc/<pid>/stat``
before and after the phase; client CPU is this process's (the client
libraries' threads included). MB = 10^6 bytes of record values. Figures are
medians over the runs. One untimed warm-up run (``--records`` / 10 records of
phases 1 and 2) comes first: this VM's memory is slow the first time it is
touched. The bars (produce >= 800,000 records/s, consume >= 1,000,000
records/s) are reported, never asserted. Client and broker share the machine's
cores, so the rates are the pair's; broker CPU per MB is the broker's own cost.

``--profile PATH`` adds one more produce phase (acks=1) with ``py-spy record``
attached to the broker (``--format raw`` by default: collapsed stacks, one per
line, the input of flamegraph tools) and prints where the broker's samples
fall: self and inclusive time per function and self time per file. py-spy is
on PyPI (``.venv/bin/pip install py-spy``); it pauses the broker briefly at
each sample, so the profiled phase is not among the timed ones. py-spy
samples where the main thread is, running or not: on two shared cores a
thread that waits for a CPU inside a system call counts there. ``--perf
PATH`` adds another produce phase under Linux ``perf record -g`` (on-CPU
samples, kernel included) and sorts the samples into categories: the Python
interpreter, memmove, page faults, pwrite, socket calls, the C core, ...

Every loop is bounded in count and in time (``--phase-timeout``).

Examples::

    .venv/bin/python bench/broker_perf.py                      # 1M records, 3 runs
    .venv/bin/python bench/broker_perf.py --quick              # 200K records
    .venv/bin/python bench/broker_perf.py --json /tmp/broker.json --profile /tmp/produce.txt
    .venv/bin/python bench/broker_perf.py --runs 1 --no-acks-all --kafka-python-records 0 \\
        --records 3000000 --profile /tmp/produce.txt --perf /tmp/produce.perf
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.metadata
import json
import os
import platform
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MB = 1_000_000
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
CONNECT_TIMEOUT_S = 10.0
POLL_EVERY = 1000
CONSUME_BATCH = 10_000
BARS = {"produce acks=1": 800_000.0, "consume": 1_000_000.0}
CLK_TCK = os.sysconf("SC_CLK_TCK")

PRODUCER_CONFIG: dict[str, Any] = {
    "acks": "1",
    "linger.ms": 5,
    "batch.size": 1_048_576,
    "compression.type": "none",
}
CONSUMER_CONFIG: dict[str, Any] = {
    "group.id": "broker-perf-unused",  # confluent-kafka wants one; assign() never uses it
    "enable.auto.commit": False,
    "auto.offset.reset": "earliest",
    "fetch.queue.backoff.ms": 1,
}


class BenchError(Exception):
    """A phase could not run or did not deliver every record."""


# --------------------------------------------------------------------------- the broker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """``logstore broker`` as a child process on a fresh data directory."""

    def __init__(
        self, workdir: str, event_loop: str, overrides: Sequence[str], listeners: str | None = None
    ) -> None:
        self.port = free_port()  # the port clients use (``bootstrap``)
        self.listeners = listeners  # default: PLAINTEXT on ``bootstrap``
        self.data_dir = os.path.join(workdir, "data")
        self.log_path = os.path.join(workdir, "broker.log")
        self.event_loop = event_loop
        self.overrides = list(overrides)
        self.proc: subprocess.Popen[str] | None = None
        self.banner = ""

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def start(self) -> None:
        args = [
            sys.executable, "-m", "logstore", "broker", "--data-dir", self.data_dir,
            "--listeners", self.listeners or f"PLAINTEXT://{self.bootstrap}", "--event-loop", self.event_loop,
        ]  # fmt: skip
        for override in self.overrides:
            args += ["--override", override]
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT)
        lines: list[str] = []
        stdout = self.proc.stdout
        assert stdout is not None
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(START_TIMEOUT_S)
        if not lines or "listening on" not in lines[0]:
            self.stop()
            raise BenchError(
                f"the broker did not start within {START_TIMEOUT_S:g} s "
                f"(stdout: {lines[:1]!r}); its log {self.log_path}:\n{self.log_tail()}"
            )
        self.banner = lines[0].strip()

    def log_tail(self, chars: int = 3000) -> str:
        try:
            with open(self.log_path) as f:
                return f.read()[-chars:]
        except OSError:
            return ""

    def cpu_seconds(self) -> float:
        """utime + stime of the broker process so far."""
        with open(f"/proc/{self.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / CLK_TCK  # fields 14, 15 of proc(5)

    def rss_mb(self) -> float:
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024 / MB
        return 0.0

    def stop(self) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(STOP_TIMEOUT_S)
        if self.proc.stdout is not None:
            self.proc.stdout.close()
        return self.proc.returncode

    def check_alive(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            raise BenchError(f"the broker exited; its log:\n{self.log_tail()}")


# --------------------------------------------------------------------------- phases


@dataclass
class Phase:
    """One timed phase of one run."""

    workload: str
    records: int
    bytes: int
    seconds: float
    broker_cpu_s: float
    client_cpu_s: float

    @property
    def records_per_s(self) -> float:
        return self.records / self.seconds

    @property
    def mb_per_s(self) -> float:
        return self.bytes / MB / self.seconds

    @property
    def broker_cpu_s_per_mb(self) -> float:
        return self.broker_cpu_s / (self.bytes / MB)

    @property
    def client_cpu_s_per_mb(self) -> float:
        return self.client_cpu_s / (self.bytes / MB)

    def figures(self) -> dict[str, float]:
        return {
            "records": self.records,
            "seconds": self.seconds,
            "records_per_s": self.records_per_s,
            "mb_per_s": self.mb_per_s,
            "broker_cpu_s": self.broker_cpu_s,
            "broker_cpu_s_per_mb": self.broker_cpu_s_per_mb,
            "client_cpu_s": self.client_cpu_s,
            "client_cpu_s_per_mb": self.client_cpu_s_per_mb,
            "bytes_mb": self.bytes / MB,
        }


def timed(broker: Broker, workload: str, body: Callable[[], tuple[int, int]]) -> Phase:
    """Runs ``body`` (returns records, bytes) between two CPU and clock readings."""
    broker_cpu = broker.cpu_seconds()
    client_cpu = time.process_time()
    start = time.perf_counter()
    records, nbytes = body()
    seconds = time.perf_counter() - start
    phase = Phase(
        workload,
        records,
        nbytes,
        seconds,
        broker.cpu_seconds() - broker_cpu,
        time.process_time() - client_cpu,
    )
    broker.check_alive()
    return phase


def high_watermark(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, **CONSUMER_CONFIG})
    try:
        metadata = consumer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)
        total = 0
        for partition in metadata.topics[topic].partitions:
            _, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=CONNECT_TIMEOUT_S, cached=False
            )
            total += high
        return total
    finally:
        consumer.close()


def produce_confluent(
    broker: Broker, topic: str, records: int, value: bytes, acks: str, timeout_s: float, label: str
) -> Phase:
    from confluent_kafka import KafkaError, Producer

    failures: list[str] = []

    def on_delivery(error: KafkaError | None, msg: Any) -> None:
        if error is not None and len(failures) < 1000:
            failures.append(error.str())

    producer = Producer(
        {
            "bootstrap.servers": broker.bootstrap,
            **PRODUCER_CONFIG,
            "acks": acks,
            "delivery.report.only.error": True,
            "on_delivery": on_delivery,
        }
    )
    producer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)  # connect and create the topic, untimed

    def body() -> tuple[int, int]:
        deadline = time.monotonic() + timeout_s
        produce = producer.produce
        poll = producer.poll
        sent = 0
        while sent < records:
            try:
                produce(topic, value)
            except BufferError:
                poll(0.005)
                if time.monotonic() > deadline:
                    raise BenchError(f"{label}: {sent} of {records} sent in {timeout_s:g} s") from None
                continue
            sent += 1
            if not sent % POLL_EVERY:
                poll(0)
                if time.monotonic() > deadline:
                    raise BenchError(f"{label}: {sent} of {records} sent in {timeout_s:g} s")
        left = producer.flush(max(deadline - time.monotonic(), 1.0))
        if left or failures:
            raise BenchError(f"{label}: {left} unacknowledged, {len(failures)} failed: {failures[:3]}")
        return records, records * len(value)

    phase = timed(broker, label, body)
    written = high_watermark(broker.bootstrap, topic)
    if written != records:
        raise BenchError(f"{label}: the topic holds {written} records, {records} were sent")
    return phase


def produce_kafka_python(
    broker: Broker, topic: str, records: int, value: bytes, timeout_s: float, label: str
) -> Phase:
    from kafka import KafkaProducer  # type: ignore[import-untyped]

    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, acks=1, linger_ms=5, batch_size=1_048_576, compression_type=None
    )
    try:
        producer.partitions_for(topic)  # connect and create the topic, untimed

        def body() -> tuple[int, int]:
            deadline = time.monotonic() + timeout_s
            send = producer.send
            for sent in range(records):
                send(topic, value)
                if not sent % POLL_EVERY and time.monotonic() > deadline:
                    raise BenchError(f"{label}: {sent} of {records} sent in {timeout_s:g} s")
            producer.flush(max(deadline - time.monotonic(), 1.0))
            return records, records * len(value)

        phase = timed(broker, label, body)
    finally:
        producer.close(timeout=STOP_TIMEOUT_S)
    written = high_watermark(broker.bootstrap, topic)
    if written != records:
        raise BenchError(f"{label}: the topic holds {written} records, {records} were sent")
    return phase


def consume_confluent(broker: Broker, topic: str, records: int, timeout_s: float, label: str) -> Phase:
    from confluent_kafka import Consumer, Message, TopicPartition

    error_of = Message.error
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, **CONSUMER_CONFIG})
    try:
        consumer.list_topics(topic, timeout=CONNECT_TIMEOUT_S)  # connect, untimed

        def body() -> tuple[int, int]:
            deadline = time.monotonic() + timeout_s
            consumer.assign([TopicPartition(topic, 0, 0)])
            got = 0
            nbytes = 0
            while got < records:
                if time.monotonic() > deadline:
                    raise BenchError(f"{label}: {got} of {records} read in {timeout_s:g} s")
                batch = consumer.consume(num_messages=min(CONSUME_BATCH, records - got), timeout=1.0)
                if any(map(error_of, batch)):
                    raise BenchError(f"{label}: {next(m.error() for m in batch if m.error())}")
                got += len(batch)
                nbytes += sum(map(len, batch))
            return got, nbytes

        return timed(broker, label, body)
    finally:
        consumer.close()


# --------------------------------------------------------------------------- profile


@dataclass
class Profile:
    """py-spy's samples of the broker through one produce phase, summarized."""

    path: str
    format: str
    seconds: float
    rate: int
    produce: dict[str, float]
    samples: int = 0
    idle: int = 0  # samples of threads waiting (py-spy does not always drop them)
    self_top: list[tuple[str, int]] = field(default_factory=list)
    inclusive_top: list[tuple[str, int]] = field(default_factory=list)
    files_top: list[tuple[str, int]] = field(default_factory=list)

    @property
    def busy(self) -> int:
        return self.samples - self.idle

    @property
    def busy_fraction(self) -> float:
        """Share of the phase the broker's main thread was running (samples / expected samples)."""
        return self.busy / (self.seconds * self.rate) if self.seconds else 0.0


# Leaf frames of a thread that waits: the event loop's epoll, the store's scheduler thread.
IDLE_LEAVES = frozenset(
    {
        "EpollSelector.select (selectors.py)",
        "PollSelector.select (selectors.py)",
        "SelectSelector.select (selectors.py)",
        "Condition.wait (threading.py)",
        "Event.wait (threading.py)",
        "Thread.join (threading.py)",
        "Loop.run_forever (uvloop/__init__.py)",
    }
)
# The call chain every sample of the main thread shares; not worth listing as inclusive time.
TRUNK_FILES = ("logstore/__main__.py", "logstore/cli/broker.py", "logstore/broker/run.py")


def _function(frame: str) -> str:
    """``"handle (logstore/broker/apis/produce.py:42)"`` -> ``"handle (logstore/broker/apis/produce.py)"``."""
    name, sep, where = frame.partition(" (")
    if not sep:
        return frame
    return f"{name} ({where.rsplit(':', 1)[0].rstrip(')')})"


def _file(function: str) -> str:
    return function.partition(" (")[2].rstrip(")") or function


def summarize_raw(profile: Profile, top: int) -> None:
    """Fills ``profile``'s counts from py-spy's collapsed stacks (``frame;frame;... count`` lines).

    Self time goes to a sample's innermost frame; inclusive time to every
    function of logstore on its stack (the trunk left out); idle samples are
    counted apart and left out of the rest.
    """
    self_time: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    files: Counter[str] = Counter()
    with open(profile.path) as f:
        for line in f:
            stack, _, count_text = line.rstrip("\n").rpartition(" ")
            if not stack or not count_text.isdigit():
                continue
            count = int(count_text)
            frames = [_function(frame) for frame in stack.split(";")]
            profile.samples += count
            if frames[-1] in IDLE_LEAVES:
                profile.idle += count
                continue
            self_time[frames[-1]] += count
            files[_file(frames[-1])] += count
            for name in set(frames):
                where = _file(name)
                if where.startswith("logstore/") and where not in TRUNK_FILES:
                    inclusive[name] += count
    profile.self_top = self_time.most_common(top)
    profile.inclusive_top = inclusive.most_common(top)
    profile.files_top = files.most_common(top)


def produce_under(
    broker: Broker,
    command: list[str],
    tool: str,
    topic: str,
    label: str,
    args: argparse.Namespace,
    value: bytes,
) -> Phase | None:
    """One produce phase while ``command`` (a profiler attached to the broker) records; None if it fails."""
    tool_log = os.path.join(os.path.dirname(broker.log_path), f"{tool}.log")
    with open(tool_log, "w") as log:
        recorder = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(1.0)  # let it attach
        if recorder.poll() is not None:
            with open(tool_log) as f:
                print(f"{tool} exited before the phase: {f.read()[-2000:]}", file=sys.stderr)
            return None
        return produce_confluent(broker, topic, args.records, value, "1", args.phase_timeout, label)
    finally:
        recorder.send_signal(signal.SIGINT)
        try:
            recorder.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            recorder.kill()
            recorder.wait()


def profile_produce(args: argparse.Namespace, broker: Broker, value: bytes) -> Profile | None:
    py_spy = shutil.which("py-spy") or os.path.join(os.path.dirname(sys.executable), "py-spy")
    if not os.path.exists(py_spy):
        print("--profile: py-spy is not installed (.venv/bin/pip install py-spy); skipped", file=sys.stderr)
        return None
    command = [
        py_spy, "record", "--pid", str(broker.pid), "--rate", str(args.profile_rate),
        "--format", args.profile_format, "--output", args.profile,
    ]  # fmt: skip
    if args.profile_native:
        command.append("--native")
    phase = produce_under(broker, command, "py-spy", "profile-produce", "profiled produce", args, value)
    if phase is None:
        return None
    profile = Profile(args.profile, args.profile_format, phase.seconds, args.profile_rate, phase.figures())
    if args.profile_format == "raw" and os.path.exists(args.profile):
        summarize_raw(profile, args.profile_top)
    return profile


@dataclass
class CpuProfile:
    """``perf record`` of the broker through one produce phase: on-CPU samples by category."""

    path: str
    produce: dict[str, float]
    samples: int = 0
    categories: list[tuple[str, int]] = field(default_factory=list)
    symbols: list[tuple[str, int]] = field(default_factory=list)


# Kernel stacks: the first matching marker names the category.
KERNEL_CATEGORIES = (
    ("page_fault", "kernel: page faults (first touch of fresh memory)"),
    ("pwrite", "kernel: pwrite (segment appends)"),
    ("sendfile", "kernel: sendfile"),
    ("recvfrom", "kernel: socket receive"),
    ("tcp_recvmsg", "kernel: socket receive"),
    ("sendto", "kernel: socket send"),
    ("tcp_sendmsg", "kernel: socket send"),
    ("munmap", "kernel: munmap / freeing memory"),
    ("tlb_finish_mmu", "kernel: munmap / freeing memory"),
    ("epoll", "kernel: epoll"),
    ("fsync", "kernel: fsync"),
)


def _categorize(stack: list[str]) -> tuple[str, str]:
    """(category, leaf symbol) of one ``perf script`` sample (frames as ``ip sym (dso)``, leaf first)."""
    leaf = stack[0]
    parts = leaf.split(None, 1)
    symbol = parts[1] if len(parts) > 1 else leaf
    text = " ".join(stack)
    if "kernel.kallsyms" in leaf or "page_fault" in text:
        for marker, category in KERNEL_CATEGORIES:
            if marker in text:
                return category, symbol
        return "kernel: other", symbol
    dso = symbol.rsplit("(", 1)[-1].rstrip(")").rsplit("/", 1)[-1]
    name = symbol.rsplit(" (", 1)[0]
    if "memmove" in name or "memcpy" in name:
        return "libc memmove/memcpy (user-space copies)", symbol
    if dso.startswith("libpython"):
        return "Python interpreter (libpython)", symbol
    if dso.startswith("_native_c") or dso.startswith("_speedups"):
        return "logstore C core", symbol
    return dso, symbol


def summarize_perf(profile: CpuProfile, top: int) -> None:
    script = subprocess.run(
        ["perf", "script", "-i", profile.path, "-F", "ip,sym,dso"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    categories: Counter[str] = Counter()
    symbols: Counter[str] = Counter()
    stack: list[str] = []
    for line in [*script.stdout.splitlines(), ""]:
        if line.strip():
            stack.append(line.strip())
            continue
        if stack:
            category, symbol = _categorize(stack)
            categories[category] += 1
            name, _, dso = symbol.partition(" (")
            symbols[f"{name} ({os.path.basename(dso.rstrip(')'))})"] += 1
            stack = []
    profile.samples = sum(categories.values())
    profile.categories = categories.most_common(top)
    profile.symbols = symbols.most_common(top)


def perf_produce(args: argparse.Namespace, broker: Broker, value: bytes) -> CpuProfile | None:
    if shutil.which("perf") is None:
        print("--perf: Linux perf is not installed; skipped", file=sys.stderr)
        return None
    command = ["perf", "record", "-F", "999", "-g", "-p", str(broker.pid), "-o", args.perf]
    phase = produce_under(broker, command, "perf", "perf-produce", "produce under perf", args, value)
    if phase is None:
        return None
    profile = CpuProfile(args.perf, phase.figures())
    summarize_perf(profile, args.profile_top)
    return profile


# --------------------------------------------------------------------------- report


def medians(phases: list[Phase]) -> dict[str, float]:
    keys = phases[0].figures().keys()
    return {key: statistics.median(p.figures()[key] for p in phases) for key in keys}


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in ("confluent-kafka", "kafka-python", "rich", "py-spy"):
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            found[name] = importlib.metadata.version(name)
    try:
        import confluent_kafka

        found["librdkafka"] = confluent_kafka.libversion()[0]
    except ImportError:
        pass
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        found["git"] = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
        ).stdout.strip()
    return found


def print_report(
    summary: dict[str, dict[str, float]], runs: int, profile: Profile | None, cpu: CpuProfile | None
) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 120)
    table = Table(title=f"logstore broker, medians of {runs} runs (MB = 10^6 B of values)")
    for column in (
        "workload",
        "records",
        "records/s",
        "MB/s",
        "broker CPU per MB",
        "client CPU per MB",
        "bar",
    ):
        table.add_column(column, justify="left" if column in ("workload", "bar") else "right")
    for workload, m in summary.items():
        bar = BARS.get(workload)
        verdict = ""
        if bar is not None:
            verdict = f">= {bar:,.0f}/s: " + ("met" if m["records_per_s"] >= bar else "missed")
        table.add_row(
            escape(workload),
            f"{m['records']:,.0f}",
            f"{m['records_per_s']:,.0f}",
            f"{m['mb_per_s']:.1f}",
            f"{m['broker_cpu_s_per_mb'] * 1000:.2f} ms",
            f"{m['client_cpu_s_per_mb'] * 1000:.2f} ms",
            verdict,
        )
    console.print(table)
    if cpu is not None and cpu.samples:
        produce = cpu.produce
        console.print(
            f"perf record of the broker through one more produce phase ({produce['records']:,.0f} records, "
            f"{produce['records_per_s']:,.0f} records/s): {cpu.path}; {cpu.samples} on-CPU samples at 999 Hz "
            f"(~{cpu.samples / 999 / (produce['bytes_mb'] or 1) * 1000:.2f} ms CPU per MB)"
        )
        for title, rows in (("by category", cpu.categories), ("by symbol", cpu.symbols)):
            section = Table(title=f"broker CPU (perf): {title}")
            section.add_column("%", justify="right")
            section.add_column("where")
            for name, count in rows:
                section.add_row(f"{100 * count / cpu.samples:.1f}", escape(name))
            console.print(section)
    if profile is None:
        return
    produce = profile.produce
    console.print(
        f"profile of the broker through one more produce phase (acks=1, {produce['records']:,.0f} records): "
        f"{profile.path} ({profile.format}); {produce['records_per_s']:,.0f} records/s under py-spy, "
        f"broker CPU {produce['broker_cpu_s'] / produce['seconds']:.0%} of the phase's wall time"
    )
    if not profile.samples:
        return
    console.print(
        f"{profile.samples} samples at {profile.rate}/s; {profile.idle} idle (epoll, events) left out; "
        f"{profile.busy} not idle = main thread running or waiting for a CPU {profile.busy_fraction:.0%} "
        "of the phase (wall-clock positions, not CPU time); % below are of those"
    )
    for title, rows in (
        ("self time by function", profile.self_top),
        ("inclusive time by logstore function", profile.inclusive_top),
        ("self time by file", profile.files_top),
    ):
        section = Table(title=f"broker profile: {title}")
        section.add_column("%", justify="right")
        section.add_column("where")
        for name, count in rows:
            section.add_row(f"{100 * count / max(profile.busy, 1):.1f}", escape(name))
        console.print(section)


# --------------------------------------------------------------------------- main


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/broker_perf.py",
        description="Produce and consume throughput of a logstore broker process, with broker CPU per MB.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--runs", type=int, default=3, help="timed runs; figures are medians")
    parser.add_argument(
        "--records", type=int, default=None, help="records per phase (default 1M, --quick 200K)"
    )
    parser.add_argument("--record-size", type=int, default=100, help="bytes per record value")
    parser.add_argument(
        "--kafka-python-records",
        type=int,
        default=None,
        help="records of the kafka-python phase (default: min(records, 200K); 0 skips it)",
    )
    parser.add_argument("--no-acks-all", action="store_true", help="skip the acks=all phase")
    parser.add_argument("--quick", action="store_true", help="200K records, 50K for kafka-python")
    parser.add_argument("--phase-timeout", type=float, default=120.0, help="seconds any one phase may take")
    parser.add_argument("--event-loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="broker config (repeatable)"
    )
    parser.add_argument("--json", metavar="PATH", help="write the runs, medians and profile as JSON")
    parser.add_argument("--profile", metavar="PATH", help="py-spy the broker through one more produce phase")
    parser.add_argument("--profile-format", default="raw", choices=["raw", "flamegraph", "speedscope"])
    parser.add_argument("--profile-rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--profile-native", action="store_true", help="py-spy --native (C frames too)")
    parser.add_argument("--profile-top", type=int, default=15, help="rows per profile table")
    parser.add_argument(
        "--perf",
        metavar="PATH",
        help="perf record (on-CPU, kernel too) the broker through one more produce phase",
    )
    parser.add_argument("--tmp-root", default=tempfile.gettempdir(), help="where the data directory goes")
    args = parser.parse_args(argv)
    if args.records is None:
        args.records = 200_000 if args.quick else 1_000_000
    if args.kafka_python_records is None:
        args.kafka_python_records = min(args.records, 50_000 if args.quick else 200_000)
    if args.runs < 1 or args.records < 1:
        parser.error("--runs and --records must be at least 1")
    return args


def _terminate(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)  # so that the broker is stopped and the data removed


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    shown = sys.argv[1:] if argv is None else list(argv)
    command = " ".join([".venv/bin/python", "bench/broker_perf.py", *map(shlex.quote, shown)])
    started = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M:%S %Z")
    load_before = os.getloadavg()
    signal.signal(signal.SIGTERM, _terminate)
    value = os.urandom(args.record_size)
    workdir = tempfile.mkdtemp(prefix="logstore-broker-perf-", dir=args.tmp_root)
    broker = Broker(workdir, args.event_loop, args.override)
    runs: list[list[Phase]] = []
    profile: Profile | None = None
    cpu: CpuProfile | None = None
    try:
        broker.start()
        print(f"{broker.banner}; pid {broker.pid}", file=sys.stderr)
        warm = max(args.records // 10, 1)
        produce_confluent(broker, "warmup", warm, value, "1", args.phase_timeout, "warm-up produce")
        consume_confluent(broker, "warmup", warm, args.phase_timeout, "warm-up consume")
        for run in range(args.runs):
            phases = [
                produce_confluent(
                    broker, f"run{run}-acks1", args.records, value, "1", args.phase_timeout, "produce acks=1"
                )
            ]
            phases.append(
                consume_confluent(broker, f"run{run}-acks1", args.records, args.phase_timeout, "consume")
            )
            if not args.no_acks_all:
                phases.append(
                    produce_confluent(
                        broker,
                        f"run{run}-acksall",
                        args.records,
                        value,
                        "all",
                        args.phase_timeout,
                        "produce acks=all",
                    )
                )
            if args.kafka_python_records:
                phases.append(
                    produce_kafka_python(
                        broker,
                        f"run{run}-kafka-python",
                        args.kafka_python_records,
                        value,
                        args.phase_timeout,
                        "produce kafka-python acks=1",
                    )
                )
            for p in phases:
                print(
                    f"run {run + 1}/{args.runs} {p.workload}: {p.records_per_s:,.0f} records/s, "
                    f"{p.mb_per_s:.1f} MB/s, broker {p.broker_cpu_s_per_mb * 1000:.2f} ms CPU/MB, "
                    f"client {p.client_cpu_s_per_mb * 1000:.2f} ms CPU/MB",
                    file=sys.stderr,
                )
            runs.append(phases)
        if args.profile:
            profile = profile_produce(args, broker, value)
        if args.perf:
            cpu = perf_produce(args, broker, value)
        rss = broker.rss_mb()
    except BenchError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    finally:
        code = broker.stop()
        if code not in (0, None):
            print(f"the broker exited with {code}; its log:\n{broker.log_tail()}", file=sys.stderr)
        shutil.rmtree(workdir, ignore_errors=True)
    summary = {
        workload: medians([p for phases in runs for p in phases if p.workload == workload])
        for workload in dict.fromkeys(p.workload for p in runs[0])
    }
    print(
        f"# {command}\n# {started}; load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}"
    )
    print_report(summary, args.runs, profile, cpu)
    if args.json:
        result = {
            "command": command,
            "started": started,
            "machine": {"cpus": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg()},
            "versions": versions(),
            "config": {
                "records": args.records,
                "record_size": args.record_size,
                "kafka_python_records": args.kafka_python_records,
                "producer": PRODUCER_CONFIG,
                "consumer": CONSUMER_CONFIG,
                "event_loop": args.event_loop,
                "overrides": args.override,
            },
            "bars_records_per_s": BARS,
            "broker_rss_mb_at_end": rss,
            "medians": summary,
            "runs": [[{"workload": p.workload, **p.figures()} for p in phases] for phases in runs],
            "profile": (
                asdict(profile) | {"busy": profile.busy, "busy_fraction": profile.busy_fraction}
                if profile
                else None
            ),
            "perf": asdict(cpu) if cpu else None,
        }
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
