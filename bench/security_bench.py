"""Security's bars (issue 14): TLS vs plaintext throughput, and SCRAM authentication latency.

One run starts one broker on 127.0.0.1 with three listeners (PLAINTEXT, SSL,
SASL_PLAINTEXT with SCRAM-SHA-512; certificates made with ``cryptography``
by tests/kit/certs.py) and measures, ``--runs`` times, interleaved:

(a) confluent-kafka produce then consume of ``--records`` 100-byte values
    over PLAINTEXT and over SSL (acks=all, one partition, a topic per run and
    listener); the bar: TLS >= 60% of plaintext, for produce and consume.
    The broker's CPU per MB of values is printed too (what TLS costs the
    broker even where the client is the bottleneck);
(b) SCRAM-SHA-512 authentication (4,096 iterations, the user made with
    ``logstore users add --data-dir``): ``--connections`` raw-socket clients,
    each timed from TCP connect to a successful final SaslAuthenticate
    (SaslHandshake v1, client-first, client-final, server signature
    verified). Two figures: the client computing PBKDF2 itself each time
    (what librdkafka does), and the client reusing its salted password, which
    leaves the broker's share (its PBKDF2 ran once, when the credential was
    stored); the bar: median <= 10 ms.

Figures go to stderr as they come and as a table at the end (medians of the
runs; the ratio is the median of per-run ratios). Usage::

    .venv/bin/python bench/security_bench.py [--runs 3] [--records 1000000] [--connections 50]
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from logstore.security.scram import MECHANISMS, ScramClient  # noqa: E402

RECORD_BYTES = 100
TIMEOUT_S = 300.0


class Figures:
    """Figures by name, one per run: each printed as it comes, their medians at the end."""

    def __init__(self) -> None:
        self.values: dict[str, list[float]] = {}

    def note(self, name: str, value: float, unit: str) -> None:
        self.values.setdefault(name, []).append(value)
        print(f"  {name}: {value:,.2f} {unit}", file=sys.stderr, flush=True)

    def __getitem__(self, name: str) -> list[float]:
        return self.values[name]

    def print_medians(self) -> None:
        print("\nmedians over runs:")
        width = max(len(name) for name in self.values)
        for name, values in self.values.items():
            runs = ", ".join(f"{v:,.3f}" for v in values)
            print(f"  {name.ljust(width)}  {statistics.median(values):>14,.3f}  (runs: {runs})")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class SecureBroker:
    """``logstore broker`` with PLAINTEXT, SSL and SASL_PLAINTEXT listeners."""

    def __init__(self, workdir: str) -> None:
        from tests.kit.certs import TestPKI

        self.workdir = workdir
        self.pki = TestPKI(os.path.join(workdir, "pki"))
        self.server = self.pki.issue("broker", ip="127.0.0.1")
        self.ports = {name: free_port() for name in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT")}
        self.data_dir = os.path.join(workdir, "data")
        self.log_path = os.path.join(workdir, "broker.log")
        self.proc: subprocess.Popen[str] | None = None

    def at(self, listener: str) -> str:
        return f"127.0.0.1:{self.ports[listener]}"

    def start(self) -> None:
        made = subprocess.run(
            [sys.executable, "-m", "logstore", "users", "add", "--data-dir", self.data_dir, "--user", "bench",
             "--password", "bench-pw", "--mechanism", "SCRAM-SHA-512", "--iterations", "4096"],
            capture_output=True, text=True, check=False, cwd=ROOT,
        )  # fmt: skip
        if made.returncode:
            raise SystemExit(f"logstore users add failed: {made.stderr}")
        listeners = ",".join(f"{name}://{self.at(name)}" for name in self.ports)
        overrides = {
            "ssl.keystore.type": "PEM", "ssl.keystore.location": self.server.keystore,
            "sasl.enabled.mechanisms": "SCRAM-SHA-512", "offsets.topic.num.partitions": "1",
        }  # fmt: skip
        args = [
            sys.executable,
            "-m",
            "logstore",
            "broker",
            "--data-dir",
            self.data_dir,
            "--listeners",
            listeners,
        ]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=log, text=True, cwd=ROOT)
        stdout = self.proc.stdout
        assert stdout is not None
        lines: list[str] = []
        reader = threading.Thread(target=lambda: lines.append(stdout.readline()), daemon=True)
        reader.start()
        reader.join(60)
        if not lines or "listening on" not in lines[0]:
            self.stop()
            with open(self.log_path) as f:
                raise SystemExit(f"the broker did not start; its log:\n{f.read()[-3000:]}")

    def cpu_seconds(self) -> float:
        """utime + stime of the broker process so far (proc(5) fields 14, 15)."""
        assert self.proc is not None
        with open(f"/proc/{self.proc.pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def client(self, listener: str) -> dict[str, Any]:
        config: dict[str, Any] = {"bootstrap.servers": self.at(listener)}
        if listener == "SSL":
            config.update({"security.protocol": "SSL", "ssl.ca.location": self.pki.ca_path})
        return config

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def produce(broker: SecureBroker, listener: str, topic: str, records: int) -> float:
    """Records per second, from the first produce to the last acknowledgement."""
    from confluent_kafka import Producer

    failures: list[Any] = []
    producer = Producer({
        **broker.client(listener), "acks": "all", "linger.ms": 5, "batch.size": 1_048_576,
        "queue.buffering.max.messages": 1_000_000, "queue.buffering.max.kbytes": 1_048_576,
        "delivery.report.only.error": True, "on_delivery": lambda err, msg: failures.append(err),
    })  # fmt: skip
    producer.list_topics(topic, timeout=30)
    value = b"x" * RECORD_BYTES
    started = time.perf_counter()
    deadline = time.monotonic() + TIMEOUT_S
    sent = 0
    while sent < records:
        try:
            producer.produce(topic, value)
        except BufferError:
            producer.poll(0.005)
            continue
        sent += 1
        if not sent % 10_000:
            producer.poll(0)
            if time.monotonic() > deadline:
                raise SystemExit(f"produce over {listener}: {sent} of {records} in {TIMEOUT_S} s")
    if producer.flush(TIMEOUT_S) or failures:
        raise SystemExit(f"produce over {listener}: not all acknowledged ({failures[:3]})")
    return records / (time.perf_counter() - started)


def consume(broker: SecureBroker, listener: str, topic: str, records: int) -> float:
    """Records per second, from the assignment to the last record (the connection made before,
    untimed: the TLS handshake is not part of the figure)."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({
        **broker.client(listener), "group.id": f"bench-{time.monotonic_ns()}", "enable.auto.commit": False,
        "auto.offset.reset": "earliest", "fetch.max.bytes": 52_428_800,
        "max.partition.fetch.bytes": 10_485_760,
    })  # fmt: skip
    consumer.list_topics(topic, timeout=30)  # connected (and, over TLS, the handshake done)
    started = time.perf_counter()
    consumer.assign([TopicPartition(topic, 0, 0)])
    got = 0
    deadline = time.monotonic() + TIMEOUT_S
    while got < records:
        batch = consumer.consume(10_000, 1.0)
        got += sum(1 for message in batch if message.error() is None)
        if time.monotonic() > deadline:
            raise SystemExit(f"consume over {listener}: {got} of {records} in {TIMEOUT_S} s")
    elapsed = time.perf_counter() - started
    consumer.close()
    return records / elapsed


def _frame(api_key: int, version: int, correlation_id: int, body: bytes) -> bytes:
    header = struct.pack(">hhih", api_key, version, correlation_id, 5) + b"bench"
    return struct.pack(">i", len(header) + len(body)) + header + body


def _read(sock: socket.socket) -> bytes:
    def exact(n: int) -> bytes:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    return exact(struct.unpack(">i", exact(4))[0])


def _authenticate(sock: socket.socket, token: bytes, correlation_id: int) -> bytes:
    """SaslAuthenticate v1 (non-flexible): bytes in, the server's bytes out; SystemExit on an error."""
    sock.sendall(_frame(36, 1, correlation_id, struct.pack(">i", len(token)) + token))
    frame = _read(sock)
    at = 4
    (error,) = struct.unpack_from(">h", frame, at)
    at += 2
    (length,) = struct.unpack_from(">h", frame, at)
    message = frame[at + 2 : at + 2 + max(length, 0)].decode()
    at += 2 + max(length, 0)
    (size,) = struct.unpack_from(">i", frame, at)
    if error:
        raise SystemExit(f"SaslAuthenticate failed: error {error}: {message}")
    return frame[at + 4 : at + 4 + size]


def scram_login(at: str, salted: bytes | None = None) -> tuple[float, bytes]:
    """(seconds from TCP connect to a verified server-final, the salted password used)."""
    host, port = at.rsplit(":", 1)
    started = time.perf_counter()
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        mechanism = b"SCRAM-SHA-512"
        sock.sendall(_frame(17, 1, 1, struct.pack(">h", len(mechanism)) + mechanism))
        frame = _read(sock)
        if struct.unpack_from(">h", frame, 4)[0]:
            raise SystemExit("SaslHandshake SCRAM-SHA-512 refused")
        client = ScramClient(MECHANISMS["SCRAM-SHA-512"], "bench", "bench-pw")
        server_first = _authenticate(sock, client.first(), 2)
        server_final = _authenticate(sock, client.final(server_first, salted), 3)
        if not client.verify(server_final):
            raise SystemExit("the broker's SCRAM server signature does not verify")
        elapsed = time.perf_counter() - started
    return elapsed, client._salted


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="Interleaved runs (medians over them).")
    parser.add_argument(
        "--records", type=int, default=1_000_000, help="100-byte records per produce/consume."
    )
    parser.add_argument("--connections", type=int, default=50, help="SCRAM logins per run and way.")
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="security-bench-")
    broker = SecureBroker(workdir)
    broker.start()
    figures = Figures()
    note = figures.note

    try:
        for run in range(1, args.runs + 1):
            print(f"run {run}", file=sys.stderr, flush=True)
            order = ("PLAINTEXT", "SSL") if run % 2 else ("SSL", "PLAINTEXT")
            rates: dict[str, float] = {}
            cpu: dict[str, float] = {}
            megabytes = args.records * RECORD_BYTES / 1e6
            for listener in order:
                topic = f"bench-{listener.lower()}-{run}-{time.monotonic_ns()}"
                for phase, work in (("produce", produce), ("consume", consume)):
                    before = broker.cpu_seconds()
                    rates[f"{phase} {listener}"] = work(broker, listener, topic, args.records)
                    cpu[f"{phase} {listener}"] = (broker.cpu_seconds() - before) * 1000 / megabytes
            for name, value in rates.items():
                note(f"{name} records/s", value, "records/s")
            for name, value in cpu.items():
                note(f"{name} broker CPU ms/MB", value, "ms/MB")
            note("produce TLS/plaintext", rates["produce SSL"] / rates["produce PLAINTEXT"], "x")
            note("consume TLS/plaintext", rates["consume SSL"] / rates["consume PLAINTEXT"], "x")
            _, salted = scram_login(broker.at("SASL_PLAINTEXT"))  # warm up; learn the salted password
            pbkdf2 = [scram_login(broker.at("SASL_PLAINTEXT"))[0] * 1000 for _ in range(args.connections)]
            cached = [
                scram_login(broker.at("SASL_PLAINTEXT"), salted)[0] * 1000 for _ in range(args.connections)
            ]
            note("SCRAM-SHA-512 login, client PBKDF2 each time, median ms", statistics.median(pbkdf2), "ms")
            note(
                "SCRAM-SHA-512 login, client salted password reused, median ms",
                statistics.median(cached),
                "ms",
            )
            note(
                "SCRAM-SHA-512 login, client PBKDF2 each time, p95 ms",
                sorted(pbkdf2)[int(len(pbkdf2) * 0.95)],
                "ms",
            )
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    figures.print_medians()
    produce_ratio = statistics.median(figures["produce TLS/plaintext"])
    consume_ratio = statistics.median(figures["consume TLS/plaintext"])
    login = statistics.median(figures["SCRAM-SHA-512 login, client PBKDF2 each time, median ms"])
    print(f"\nbar TLS >= 0.60x plaintext: produce {produce_ratio:.2f}x, consume {consume_ratio:.2f}x "
          f"({'met' if min(produce_ratio, consume_ratio) >= 0.6 else 'NOT met'})")  # fmt: skip
    print(f"bar SCRAM-SHA-512 login <= 10 ms median: {login:.2f} ms ({'met' if login <= 10 else 'NOT met'})")


if __name__ == "__main__":
    main()
