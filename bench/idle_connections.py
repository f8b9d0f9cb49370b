"""What an idle client connection costs the broker: RSS per connection, and Metadata latency with them open.

Starts ``python -m logstore broker`` on 127.0.0.1 (a free port, a fresh data
directory, removed afterwards), then:

1. opens ``--connections`` TCP connections (``--batch`` at a time), each of
   which sends one ApiVersions v0 request and reads its answer, and keeps them
   all open, idle;
2. reads the broker's ``VmRSS`` (``/proc/<pid>/status``) before the first and
   after the last connection: the growth divided by the count is the cost of
   one idle connection (kernel socket buffers are not in RSS);
3. times ``--requests`` Metadata v1 requests (all topics; ``--topics`` topics
   exist) on one more connection, one at a time, while the idle ones stay open,
   and prints the median and the 99th percentile;
4. checks every idle connection is still open (one more ApiVersions on a
   sample of ``--recheck`` of them is answered), closes them all and reads the
   RSS again.

The process raises its own ``RLIMIT_NOFILE`` soft limit to the hard limit
(10,000 connections need 10,000 descriptors on each side); the broker raises
its own at start (logstore/broker/run.py). Every wait is bounded
(``--timeout``). Bars (``docs/quotas.md``): <= 16 KiB per idle connection and
Metadata <= 50 ms at 10,000 connections; reported, never asserted.

Examples::

    .venv/bin/python bench/idle_connections.py                          # 10,000 connections, uvloop
    .venv/bin/python bench/idle_connections.py --connections 1000 --event-loop asyncio
    .venv/bin/python bench/idle_connections.py --json /tmp/idle.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import socket
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import BenchError, Broker

CLIENT_ID = b"idle-bench"


def request(api_key: int, version: int, correlation_id: int, body: bytes = b"") -> bytes:
    """A request frame with header v1 (not flexible)."""
    header = struct.pack(">hhih", api_key, version, correlation_id, len(CLIENT_ID)) + CLIENT_ID
    return struct.pack(">i", len(header) + len(body)) + header + body


API_VERSIONS_V0 = request(18, 0, 1)
METADATA_V1_ALL = request(3, 1, 7, struct.pack(">i", -1))  # topics: null = every topic


def raise_nofile() -> tuple[int, int]:
    """Raise this process's RLIMIT_NOFILE soft limit to the hard limit; returns (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise BenchError(f"no VmRSS for pid {pid}")


async def read_frame(reader: asyncio.StreamReader) -> bytes:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    return await reader.readexactly(size)


async def open_idle(host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_connection(host, port)
    writer.write(API_VERSIONS_V0)
    answer = await read_frame(reader)
    if struct.unpack_from(">i", answer)[0] != 1:
        raise BenchError("ApiVersions answered with the wrong correlation id")
    return reader, writer


async def open_many(
    host: str, port: int, count: int, batch: int, timeout: float
) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    opened: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    deadline = time.monotonic() + timeout
    while len(opened) < count:
        left = deadline - time.monotonic()
        if left <= 0:
            raise BenchError(f"opened {len(opened)} of {count} connections in {timeout:g} s")
        n = min(batch, count - len(opened))
        opened += await asyncio.wait_for(asyncio.gather(*(open_idle(host, port) for _ in range(n))), left)
    return opened


def metadata_latencies(host: str, port: int, requests: int, timeout: float) -> list[float]:
    """Seconds per Metadata v1 round trip, one at a time on one connection."""
    latencies = []
    with socket.create_connection((host, port), timeout=timeout) as s:
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(requests):
            started = time.perf_counter()
            s.sendall(METADATA_V1_ALL)
            size = struct.unpack(">i", _recv_exactly(s, 4))[0]
            _recv_exactly(s, size)
            latencies.append(time.perf_counter() - started)
    return latencies


def _recv_exactly(s: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = s.recv(n)
        if not chunk:
            raise BenchError("the broker closed the Metadata connection")
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


async def recheck(conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]], sample: int) -> int:
    """How many of ``sample`` spread-out idle connections still answer ApiVersions."""
    step = max(len(conns) // max(sample, 1), 1)
    picked = conns[::step][:sample]

    async def one(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        try:
            writer.write(API_VERSIONS_V0)
            await asyncio.wait_for(read_frame(reader), 10)
            return True
        except (TimeoutError, OSError, asyncio.IncompleteReadError):
            return False

    return sum(await asyncio.gather(*(one(r, w) for r, w in picked)))


def create_topics(bootstrap: str, count: int) -> None:
    if not count:
        return
    from confluent_kafka.admin import AdminClient, NewTopic

    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.create_topics([NewTopic(f"idle-{i}", 1, 1) for i in range(count)])
    for future in futures.values():
        future.result(30)


async def measure(args: argparse.Namespace, broker: Broker) -> dict[str, Any]:
    host, port = "127.0.0.1", broker.port
    await open_many(host, port, 1, 1, args.timeout)  # the broker's first connection allocates shared state
    metadata_latencies(host, port, 20, args.timeout)  # warm the Metadata path
    time.sleep(0.5)
    before = rss_bytes(broker.pid)
    started = time.monotonic()
    conns = await open_many(host, port, args.connections, args.batch, args.timeout)
    open_s = time.monotonic() - started
    time.sleep(args.settle)
    after = rss_bytes(broker.pid)
    latencies = await asyncio.get_running_loop().run_in_executor(
        None, metadata_latencies, host, port, args.requests, args.timeout
    )
    answered = await recheck(conns, args.recheck)
    broker.check_alive()
    for _, writer in conns:
        writer.close()
    await asyncio.sleep(args.settle)
    closed = rss_bytes(broker.pid)
    latencies.sort()
    return {
        "connections": args.connections,
        "open_s": open_s,
        "rss_before_mb": before / 2**20,
        "rss_after_mb": after / 2**20,
        "rss_after_close_mb": closed / 2**20,
        "bytes_per_connection": (after - before) / args.connections,
        "metadata_median_ms": statistics.median(latencies) * 1000,
        "metadata_p99_ms": latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))] * 1000,
        "recheck_answered": answered,
        "recheck_sample": min(args.recheck, args.connections),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="bench/idle_connections.py",
        description="Broker memory per idle connection (each past ApiVersions) and Metadata latency with them open.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument("--connections", type=int, default=10_000, help="idle connections to open")
    parser.add_argument("--batch", type=int, default=500, help="connections opened concurrently")
    parser.add_argument("--requests", type=int, default=200, help="Metadata requests timed")
    parser.add_argument("--topics", type=int, default=10, help="topics created first (Metadata lists them)")
    parser.add_argument(
        "--recheck", type=int, default=200, help="idle connections asked once more at the end"
    )
    parser.add_argument("--settle", type=float, default=1.0, help="seconds to wait before reading the RSS")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds any one step may take")
    parser.add_argument("--event-loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    parser.add_argument(
        "--override", action="append", default=[], metavar="KEY=VALUE", help="broker config (repeatable)"
    )
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    parser.add_argument("--tmp-root", default=tempfile.gettempdir(), help="where the data directory goes")
    args = parser.parse_args(argv)
    if args.connections < 1 or args.batch < 1 or args.requests < 1:
        parser.error("--connections, --batch and --requests must be at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    soft, _ = raise_nofile()
    if soft < args.connections + 100:
        raise SystemExit(
            f"RLIMIT_NOFILE is {soft}: too low for {args.connections} connections; "
            f"raise the hard limit (ulimit -Hn) or ask for fewer"
        )
    workdir = tempfile.mkdtemp(prefix="logstore-idle-", dir=args.tmp_root)
    broker = Broker(workdir, args.event_loop, args.override)
    try:
        broker.start()
        print(f"{broker.banner}; pid {broker.pid}", file=sys.stderr)
        create_topics(broker.bootstrap, args.topics)
        figures = asyncio.run(measure(args, broker))
    finally:
        code = broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    figures["event_loop"] = args.event_loop
    figures["broker_exit"] = code
    print(
        f"{figures['connections']} idle connections ({args.event_loop} loop) opened in {figures['open_s']:.1f} s: "
        f"broker RSS {figures['rss_before_mb']:.1f} -> {figures['rss_after_mb']:.1f} MB "
        f"= {figures['bytes_per_connection'] / 1024:.1f} KiB per connection "
        f"({figures['rss_after_close_mb']:.1f} MB after closing them); "
        f"Metadata median {figures['metadata_median_ms']:.2f} ms, p99 {figures['metadata_p99_ms']:.2f} ms; "
        f"{figures['recheck_answered']}/{figures['recheck_sample']} rechecked connections answered"
    )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
