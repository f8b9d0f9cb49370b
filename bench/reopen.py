"""Reopen after an unclean shutdown: the issue-3 bar (1 GiB log, <= 1 s).

A child process appends 1,000-record batches of 100-byte values to a fresh
``Log`` (default config: 1 GiB segments) until the log passes ``--size-mb``,
keeps appending into the next segment for ``--tail-mb``, and is killed with
SIGKILL mid-stream. The roll flushed the full segment, so the recovery point
is the last segment's start. The parent then times ``Log.open`` (the loader:
a header walk of the sealed segment, a CRC rescan of the active one) and
checks the reopened log: offsets dense up to its end, the last record read.

    .venv/bin/python bench/reopen.py --runs 3
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

from logstore import Log

READY_TIMEOUT_S = 300  # writing 1 GiB takes ~5-20 s here

CHILD = """
import os, sys, time
from logstore import Log
path, size, tail = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
values = [os.urandom(100) for _ in range(1000)]
log = Log.open(path)
written = 0
for _ in range((size + tail) // 100_000 + 10):
    log.append(values)
    written += 105_000
    if written > size + tail:
        print("ready", log.log_end_offset, flush=True)
        break
deadline = time.monotonic() + 30
for _ in range(5_000):  # until killed (bounded: 525 MB, 30 s): appends in flight at SIGKILL
    log.append(values)
    if time.monotonic() > deadline:
        break
"""


def one_run(root: str, size: int, tail: int) -> float:
    path = os.path.join(root, f"log-{time.monotonic_ns()}")
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, path, str(size), str(tail)], stdout=subprocess.PIPE, text=True
    )
    assert child.stdout is not None
    ready = threading.Timer(READY_TIMEOUT_S, child.kill)  # a hung writer ends the run
    ready.start()
    line = child.stdout.readline()
    ready.cancel()
    if not line.startswith("ready"):
        child.kill()
        raise SystemExit(f"the writer died before it was ready: {line!r}")
    time.sleep(0.05)
    child.send_signal(signal.SIGKILL)
    child.wait()
    started = time.perf_counter()
    log = Log.open(path)
    seconds = time.perf_counter() - started
    try:
        end = log.log_end_offset
        segments = len(log.segments)
        if end < int(line.split()[1]):
            raise SystemExit(f"reopened log ends at {end}, below the {line.split()[1]} acknowledged")
        last = log.read(end - 1, upto="log_end").records[-1]
        if last.offset != end - 1:
            raise SystemExit(f"the last record read back is {last.offset}, not {end - 1}")
    finally:
        log.close()
        shutil.rmtree(path)
    print(f"  reopen {seconds:.3f} s, {segments} segments, {end:,} records", flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="timed runs (default 3)")
    parser.add_argument("--size-mb", type=int, default=1024, help="log size before the kill (default 1024)")
    parser.add_argument("--tail-mb", type=int, default=16, help="bytes written past the roll (default 16)")
    parser.add_argument("--dir", default=None, help="where the logs go (default: a temporary dir)")
    args = parser.parse_args()
    root = tempfile.mkdtemp(prefix="logstore-reopen-", dir=args.dir)
    try:
        times = [one_run(root, args.size_mb << 20, args.tail_mb << 20) for _ in range(args.runs)]
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"reopen after kill -9, {args.size_mb} MiB: median {statistics.median(times):.3f} s "
        f"(range {min(times):.3f}-{max(times):.3f}); bar <= 1 s"
    )


if __name__ == "__main__":
    main()
