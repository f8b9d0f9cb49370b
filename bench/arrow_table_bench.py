"""``logstore.arrow.read_table`` on data a real broker wrote: GB/s of the FIRST call in a fresh process.

Starts ``python -m logstore broker`` on 127.0.0.1 (a free port, a fresh data
directory, removed afterwards) and produces ``--rows`` rows into a topic of 4
partitions with ``logstore.client.Producer.produce_batch`` (keys
``b"%08d"``, ``--record-size``-byte values; as ``bench/spark_bench.py``), so
every partition is one active segment the broker still owns. Then, ``--runs``
times and for each source (``path``: the broker's data directory;
``broker``: ``{"bootstrap.servers": ...}``), a fresh Python process imports
logstore and collects the imports' garbage (not timed: the client's imports
alone take ~0.4 s), calls ``read_table(source, topic)`` once (the timed
"first call"), checks the row count, and calls it ``--warm`` more times (the
"warm" figure: the best of those).

GB/s is record-set bytes (the partitions' ``.log`` bytes) per second of wall
time; user and sys are CPU time summed over the process's threads (sys is
mostly first-touch page faults and the active segments' ``pread``). This VM
gives memory left free for ~2 s back to its host (free page reporting), and
touching it again costs the host's faults too: ``--pause 4`` between the
processes measures that case. Medians over the runs are printed; nothing is
asserted.

    .venv/bin/python bench/arrow_table_bench.py                     # 1M rows, 5 runs
    .venv/bin/python bench/arrow_table_bench.py --threads 1 --pause 4
    .venv/bin/python bench/arrow_table_bench.py --arena-flags -1    # columns from Arrow's pool
    .venv/bin/python bench/arrow_table_bench.py --bootstrap 127.0.0.1:9092 --data-dir /data --topic t
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

SOURCES = ("path", "broker")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--record-size", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5, help="fresh processes per source (>= 3); medians")
    parser.add_argument("--warm", type=int, default=2, help="calls after the first in each process")
    parser.add_argument("--threads", type=int, default=None, help="read_table's threads (default: its own)")
    parser.add_argument("--pause", type=float, default=0.0, help="seconds between processes")
    parser.add_argument("--sources", default="path,broker")
    parser.add_argument("--bootstrap", help="use this running broker (with --data-dir and --topic)")
    parser.add_argument("--data-dir")
    parser.add_argument("--topic", default="bench")
    parser.add_argument("--read-bytes", type=int, help="logstore.arrow.TABLE_READ_BYTES (default: its own)")
    parser.add_argument("--arena-flags", type=int,
                        help="logstore.records.arrow.ARENA_FLAGS: 1 huge pages, 2 base pages, -1 Arrow's pool")  # fmt: skip
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not set(args.sources.split(",")) <= set(SOURCES):
        parser.error(f"--sources: a comma-separated list of {', '.join(SOURCES)}")
    if args.runs < 3 and not args.child:
        parser.error("--runs must be >= 3 (the median of at least three)")
    return args


def child(args: argparse.Namespace) -> int:
    """One fresh process: imports, then the timed first call, then the warm ones; JSON on stdout."""
    started = time.perf_counter()
    import logstore.arrow
    import logstore.client.ranges
    import logstore.storage.partition_files

    imported = time.perf_counter() - started
    gc.collect()  # the imports' garbage: a full collection is due soon after them, whoever allocates next
    if args.read_bytes is not None:
        logstore.arrow.TABLE_READ_BYTES = args.read_bytes
    if args.arena_flags is not None:
        import logstore.records.arrow

        logstore.records.arrow.ARENA_FLAGS = None if args.arena_flags < 0 else args.arena_flags
    source: Any = args.data_dir if args.child == "path" else {"bootstrap.servers": args.bootstrap}
    options = {} if args.threads is None else {"threads": args.threads}
    calls = []
    for _ in range(1 + args.warm):
        before = resource.getrusage(resource.RUSAGE_SELF)
        start = time.perf_counter()
        table = logstore.arrow.read_table(source, args.topic, **options)
        seconds = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_SELF)
        if table.num_rows != args.rows:
            raise SystemExit(f"{args.child}: {table.num_rows} rows, not {args.rows}")
        calls.append({
            "seconds": seconds,
            "user": after.ru_utime - before.ru_utime,
            "sys": after.ru_stime - before.ru_stime,
        })  # fmt: skip
        del table
    print(json.dumps({"imported": imported, "calls": calls}))
    return 0


def log_bytes(data_dir: str, topic: str) -> int:
    total, parts = 0, 0
    for name in os.listdir(data_dir):
        if name.rsplit("-", 1)[0] == topic and os.path.isdir(os.path.join(data_dir, name)):
            parts += 1
            folder = os.path.join(data_dir, name)
            total += sum(
                os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.endswith(".log")
            )
    if not parts:
        raise SystemExit(f"no partition of topic {topic!r} in {data_dir}")
    return total


def measure(args: argparse.Namespace, source: str) -> dict[str, Any]:
    command = [sys.executable, os.path.abspath(__file__), "--child", source, "--rows", str(args.rows),
               "--warm", str(args.warm), "--bootstrap", args.bootstrap or "", "--data-dir", args.data_dir,
               "--topic", args.topic]  # fmt: skip
    for flag in ("threads", "read_bytes", "arena_flags"):
        if getattr(args, flag) is not None:
            command += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, cwd=ROOT)
    if done.returncode != 0:
        raise SystemExit(f"the {source} child failed:\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def main() -> int:
    args = parse_args()
    if args.child:
        return child(args)
    workdir = None
    broker = None
    if args.bootstrap is None:
        from bench.broker_perf import Broker
        from bench.spark_bench import produce

        workdir = tempfile.mkdtemp(prefix="logstore-arrow-table-bench-")
        broker = Broker(workdir, "asyncio", ["auto.create.topics.enable=false"])
        broker.start()
        args.bootstrap, args.data_dir = broker.bootstrap, broker.data_dir
    try:
        if broker is not None:
            produce(args.bootstrap, args.topic, args.rows, args.record_size)
        nbytes = log_bytes(args.data_dir, args.topic)
        sources = [s for s in args.sources.split(",") if s]
        results: dict[str, list[dict[str, Any]]] = {s: [] for s in sources}
        print(f"{args.rows:,} rows, {nbytes / 1e6:.1f} MB of record sets, threads={args.threads or 'default'}, "
              f"{args.runs} fresh processes per source, cpu count {os.cpu_count()}", flush=True)  # fmt: skip
        for run in range(args.runs):
            for source in sources:
                if args.pause:
                    time.sleep(args.pause)
                result = measure(args, source)
                results[source].append(result)
                first = result["calls"][0]
                warm = min((c["seconds"] for c in result["calls"][1:]), default=float("nan"))
                print(f"  run {run + 1} {source:6}: first {first['seconds'] * 1000:6.0f} ms "
                      f"({nbytes / first['seconds'] / 1e9:5.2f} GB/s; user {first['user'] * 1000:4.0f} ms, "
                      f"sys {first['sys'] * 1000:4.0f} ms), warm {warm * 1000:5.0f} ms, "
                      f"imports {result['imported']:.2f} s", flush=True)  # fmt: skip
        print("medians:")
        for source in sources:
            firsts = [r["calls"][0]["seconds"] for r in results[source]]
            warms = [
                min(c["seconds"] for c in r["calls"][1:]) for r in results[source] if len(r["calls"]) > 1
            ]
            line = (
                f"  read_table ({source:6}) first call {nbytes / statistics.median(firsts) / 1e9:5.2f} GB/s"
            )
            line += f" ({args.rows / statistics.median(firsts) / 1e6:4.1f} M rows/s)"
            if warms:
                line += f", warm {nbytes / statistics.median(warms) / 1e9:5.2f} GB/s"
            print(line + "  (bar >= 2 GB/s)")
    finally:
        if broker is not None:
            broker.stop()
        if workdir is not None:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
