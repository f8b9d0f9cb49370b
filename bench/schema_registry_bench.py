"""The schema registry on the broker (issue 26): register and look up latency, cached lookups per second.

Starts ``python -m logstore broker`` with ``schema.registry.listeners`` on
127.0.0.1 (free ports, a fresh temporary data directory, removed afterwards;
``bench/broker_perf.py``'s ``Broker``) and measures, ``--runs`` times each:

1. **register + lookup**: over one keep-alive HTTP/1.1 connection
   (``http.client``), ``--count`` times: POST a new Avro schema to a new
   subject (``/subjects/{s}/versions``: parsed, checked, appended to
   ``_schemas`` and read back), then GET it by its id (``/schemas/ids/{id}``).
   Reported: the median and p99 of each, in ms. The bar: <= 2 ms median.
2. **cached lookups**: ``--connections`` keep-alive sockets, each in its own
   thread, pipelining ``--window`` identical ``GET /schemas/ids/1`` requests
   at a time for ``--seconds`` (the request bytes made once; every answer's
   status line checked, its length known from the first). Reported:
   lookups answered per second. The bar: >= 50,000/s.

Figures are medians over the runs. Every loop is bounded in count and time.

Examples::

    .venv/bin/python bench/schema_registry_bench.py
    .venv/bin/python bench/schema_registry_bench.py --runs 1 --count 200 --seconds 3
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shutil
import socket
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bench.broker_perf import Broker, free_port

CT = "application/vnd.schemaregistry.v1+json"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def register_and_lookup(port: int, count: int, run: int) -> tuple[list[float], list[float]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    registers, lookups = [], []
    for n in range(count):
        schema = json.dumps({"type": "record", "name": f"R{run}_{n}", "fields": [{"name": "f", "type": "long"}]})
        body = json.dumps({"schema": schema}).encode()
        started = time.perf_counter()
        conn.request("POST", f"/subjects/bench-{run}-{n}/versions", body=body, headers={"Content-Type": CT})
        reply = conn.getresponse()
        answer = json.loads(reply.read())
        registers.append(time.perf_counter() - started)
        assert reply.status == 200, answer
        started = time.perf_counter()
        conn.request("GET", f"/schemas/ids/{answer['id']}")
        reply = conn.getresponse()
        found = json.loads(reply.read())
        lookups.append(time.perf_counter() - started)
        assert reply.status == 200 and found["schema"] == schema, found
    conn.close()
    return registers, lookups


def _read_exactly(sock: socket.socket, size: int) -> bytes:
    chunks, got = [], 0
    for _ in range(1 << 20):
        if got >= size:
            break
        chunk = sock.recv(max(size - got, 65536))
        if not chunk:
            raise ConnectionError("the registry closed the connection")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def cached_lookups(port: int, connections: int, window: int, seconds: float) -> float:
    request = b"GET /schemas/ids/1 HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    # one answer, to learn its length (every answer to this request has the same length)
    probe = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    probe.request("GET", "/schemas/ids/1")
    reply = probe.getresponse()
    body = reply.read()
    assert reply.status == 200
    head = f"HTTP/1.1 200 OK\r\n{reply.headers}".replace("\n", "\r\n").replace("\r\r\n", "\r\n")
    probe.close()
    answer_size = len(head.encode()) + len(body)
    counts = [0] * connections
    stop_at = time.monotonic() + seconds

    def worker(index: int) -> None:
        with socket.create_connection(("127.0.0.1", port), timeout=30) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            burst = request * window
            for _ in range(1 << 30):
                if time.monotonic() > stop_at:
                    break
                sock.sendall(burst)
                data = _read_exactly(sock, answer_size * window)
                assert data.count(b"HTTP/1.1 200 OK\r\n") == window, data[:300]
                counts[index] += window

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(connections)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(seconds + 30)
    return sum(counts) / (time.monotonic() - started)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--count", type=int, default=500, help="registers (and lookups) per run")
    parser.add_argument("--connections", type=int, default=4)
    parser.add_argument("--window", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--event-loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    args = parser.parse_args()
    workdir = tempfile.mkdtemp(prefix="registry-bench-")
    port = free_port()
    broker = Broker(workdir, args.event_loop, [f"schema.registry.listeners=http://127.0.0.1:{port}"])
    medians: dict[str, list[float]] = {"register": [], "lookup": [], "register_p99": [], "lookup_p99": [], "rate": []}
    try:
        broker.start()
        for run in range(args.runs):
            registers, lookups = register_and_lookup(port, args.count, run)
            medians["register"].append(statistics.median(registers) * 1000)
            medians["lookup"].append(statistics.median(lookups) * 1000)
            medians["register_p99"].append(percentile(registers, 0.99) * 1000)
            medians["lookup_p99"].append(percentile(lookups, 0.99) * 1000)
            medians["rate"].append(cached_lookups(port, args.connections, args.window, args.seconds))
            print(
                f"run {run + 1}: register median {medians['register'][-1]:.3f} ms (p99 "
                f"{medians['register_p99'][-1]:.3f}), lookup by id median {medians['lookup'][-1]:.3f} ms (p99 "
                f"{medians['lookup_p99'][-1]:.3f}), cached lookups {medians['rate'][-1]:,.0f}/s",
                flush=True,
            )
    finally:
        broker.stop()
        shutil.rmtree(workdir, ignore_errors=True)
    m = {key: statistics.median(values) for key, values in medians.items()}
    print(
        f"median of {args.runs} runs: register {m['register']:.3f} ms (p99 {m['register_p99']:.3f}), "
        f"lookup by id {m['lookup']:.3f} ms (p99 {m['lookup_p99']:.3f}), cached lookups {m['rate']:,.0f}/s "
        f"({args.connections} connections x {args.window} pipelined)"
    )


if __name__ == "__main__":
    main()
