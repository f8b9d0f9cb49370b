"""Two ways to append record batches to a segment file, measured in one run.

- ``pwrite``: ``os.pwrite`` of each batch at the end of the file (what
  ``LogSegment`` does today).
- ``mmap``: the file is preallocated to the total size first (``ftruncate``,
  or ``posix_fallocate`` with ``--prealloc fallocate``) and mapped; each batch
  is copied into the map.

Each strategy runs without fsync, and with a sync every N batches
(``os.fdatasync`` for pwrite, ``mmap.flush`` of the bytes written since the
last sync for the map) plus one at the end. The timed part is the append loop
(and the syncs); opening, preallocating, mapping, unmapping and closing are
timed apart and reported as "setup ms". Every run writes a fresh file in a
temporary directory (under ``/tmp`` unless ``--tmp-root`` says otherwise),
checks it with the native scanner (CRC of every batch), and deletes it.
Strategies are interleaved within each run, in a rotating order, so a drift of
the machine spreads over all of them; a warm-up run of every case comes first
and is left out. The table gives medians over the runs.

Example::

    .venv/bin/python bench/append_strategy.py --runs 5 --fsync-every 1 10
"""

from __future__ import annotations

import argparse
import json
import mmap
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from logstore._native import lib
from logstore.records import build_batch
from logstore.records.batch import scan

TIMESTAMP = 1_700_000_000_000
SEED = 20_261_121
LOG_NAME = "00000000000000000000.log"


@dataclass(frozen=True)
class Case:
    strategy: str  # "pwrite" or "mmap"
    fsync_every: int  # 0: never

    @property
    def label(self) -> str:
        sync = "no fsync" if not self.fsync_every else f"fsync every {self.fsync_every}"
        return f"{self.strategy}, {sync}"


@dataclass
class RunResult:
    case: Case
    batches: int
    records: int
    bytes: int
    seconds: float
    setup_seconds: float
    timed_out: bool


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=(
            "Measure appending record batches to a segment file: os.pwrite at the file end vs copying "
            "into a preallocated mmap of the file, each without fsync and with a sync every N batches. "
            "Prints records/s and MB/s (10^6 bytes), medians over the runs."
        ),
        epilog="Example: %(prog)s --runs 5 --fsync-every 1 10",
    )
    parser.add_argument(
        "--batches",
        type=int,
        default=1000,
        metavar="N",
        help="batches appended per run and strategy (default: %(default)s, ~105 MiB of 1,000 x 100 B)",
    )
    parser.add_argument(
        "--records", type=int, default=1000, metavar="N", help="records per batch (default: %(default)s)"
    )
    parser.add_argument(
        "--value-size",
        type=int,
        default=100,
        metavar="BYTES",
        help="bytes per record value, random (default: %(default)s)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=5,
        metavar="N",
        help="runs of every case; the table gives medians (default: %(default)s, at least 3)",
    )
    parser.add_argument(
        "--warmup",
        type=int,
        default=1,
        metavar="N",
        help="untimed runs of every case first, left out of the table (default: %(default)s)",
    )
    parser.add_argument(
        "--fsync-every",
        type=int,
        nargs="+",
        default=[10],
        metavar="N",
        help="sync every N batches, one case per N, besides the no-fsync cases (default: %(default)s)",
    )
    parser.add_argument(
        "--prealloc",
        choices=["ftruncate", "fallocate"],
        default="ftruncate",
        help="how the mmap strategy sizes its file: sparse (ftruncate) or allocated "
        "(posix_fallocate) (default: %(default)s)",
    )
    parser.add_argument(
        "--tmp-root",
        default="/tmp",
        metavar="DIR",
        help="where the temporary directory of the files goes (default: %(default)s)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="stop a run's appends after this long; the row is then marked (default: %(default)s)",
    )
    parser.add_argument("--json", metavar="PATH", help="also write every run's figures to PATH as JSON")
    args = parser.parse_args(argv)
    if args.runs < 3:
        parser.error("--runs must be at least 3 (the table gives medians)")
    if args.warmup < 0:
        parser.error("--warmup must not be negative")
    if args.batches < 1 or args.records < 1 or args.value_size < 0:
        parser.error("--batches and --records must be positive, --value-size not negative")
    if any(n < 1 for n in args.fsync_every):
        parser.error("--fsync-every values must be positive")
    if args.time_limit <= 0:
        parser.error("--time-limit must be positive")
    return args


def make_batches(count: int, records: int, value_size: int) -> list[bytes]:
    """``count`` distinct batches with increasing base offsets, as a producer would send."""
    rng = random.Random(SEED)
    batches = []
    for i in range(count):
        values = [rng.randbytes(value_size) for _ in range(records)]
        batches.append(build_batch(values, base_offset=i * records, timestamp=TIMESTAMP))
    return batches


def pwrite_all(fd: int, data: bytes, position: int) -> None:
    view = memoryview(data)
    written = 0
    # pwrite may write less than asked; each pass writes at least one byte.
    for _ in range(len(view) + 1):
        if written >= len(view):
            return
        written += os.pwrite(fd, view[written:], position + written)
    raise OSError(f"pwrite made no progress at byte {position + written}")


def append_pwrite(
    path: str, batches: Sequence[bytes], fsync_every: int, deadline: float
) -> tuple[int, int, float, float, bool]:
    """Returns (batches written, bytes, loop seconds, setup seconds, timed out)."""
    setup_start = time.perf_counter()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    setup = time.perf_counter() - setup_start
    position = written = 0
    timed_out = False
    try:
        start = time.perf_counter()
        for data in batches:
            pwrite_all(fd, data, position)
            position += len(data)
            written += 1
            if fsync_every and written % fsync_every == 0:
                os.fdatasync(fd)
            if time.perf_counter() > deadline:
                timed_out = True
                break
        if fsync_every and written % fsync_every:
            os.fdatasync(fd)
        seconds = time.perf_counter() - start
    finally:
        close_start = time.perf_counter()
        os.close(fd)
        setup += time.perf_counter() - close_start
    return written, position, seconds, setup, timed_out


def append_mmap(
    path: str, batches: Sequence[bytes], fsync_every: int, deadline: float, prealloc: str
) -> tuple[int, int, float, float, bool]:
    """Returns (batches written, bytes, loop seconds, setup seconds, timed out)."""
    total = sum(len(data) for data in batches)
    setup_start = time.perf_counter()
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
    if prealloc == "fallocate":
        os.posix_fallocate(fd, 0, total)
    else:
        os.ftruncate(fd, total)
    mapped = mmap.mmap(fd, total, flags=mmap.MAP_SHARED, access=mmap.ACCESS_WRITE)
    setup = time.perf_counter() - setup_start
    position = written = synced = 0
    timed_out = False
    try:
        start = time.perf_counter()
        for data in batches:
            mapped[position : position + len(data)] = data
            position += len(data)
            written += 1
            if fsync_every and written % fsync_every == 0:
                # msync wants a page-aligned start: flush from the page holding `synced`.
                first = synced - synced % mmap.PAGESIZE
                mapped.flush(first, position - first)
                synced = position
            if time.perf_counter() > deadline:
                timed_out = True
                break
        if fsync_every and synced < position:
            first = synced - synced % mmap.PAGESIZE
            mapped.flush(first, position - first)
        seconds = time.perf_counter() - start
    finally:
        close_start = time.perf_counter()
        mapped.close()
        os.close(fd)
        setup += time.perf_counter() - close_start
    return written, position, seconds, setup, timed_out


def verify(path: str, expected_bytes: int, expected_batches: int) -> None:
    """Every batch written is in the file, whole and with a valid CRC."""
    with (
        open(path, "rb") as f,
        mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
        memoryview(mapped) as view,
        view[:expected_bytes] as written,
    ):
        state = scan(written, lib.LS_SCAN_CRC)
        ok = (
            state.stop == lib.LS_OK
            and state.bytes_valid == expected_bytes
            and state.batch_count == expected_batches
        )
    if not ok:
        raise SystemExit(f"{path}: the file does not hold the {expected_batches} batches written")


def run_case(case: Case, batches: Sequence[bytes], records: int, args: argparse.Namespace) -> RunResult:
    directory = tempfile.mkdtemp(prefix="logstore-append-", dir=args.tmp_root)
    try:
        path = os.path.join(directory, LOG_NAME)
        deadline = time.perf_counter() + args.time_limit
        if case.strategy == "pwrite":
            result = append_pwrite(path, batches, case.fsync_every, deadline)
        else:
            result = append_mmap(path, batches, case.fsync_every, deadline, args.prealloc)
        count, size, seconds, setup, timed_out = result
        verify(path, size, count)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    return RunResult(case, count, count * records, size, seconds, setup, timed_out)


def machine() -> str:
    model = "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return f"{model}, {os.cpu_count()} CPUs, Linux {platform.release()}, Python {platform.python_version()}"


def filesystem(path: str) -> str:
    """The mount (device, type) holding ``path``, from /proc/mounts."""
    best = ("?", "?", "")
    real = os.path.realpath(path)
    try:
        with open("/proc/mounts") as f:
            for line in f:
                device, mount_point, fs_type = line.split()[:3]
                inside = real == mount_point or real.startswith(mount_point.rstrip("/") + "/")
                if inside and len(mount_point) >= len(best[2]):
                    best = (device, fs_type, mount_point)
    except OSError:
        pass
    return f"{best[1]} on {best[0]} (mounted at {best[2]})"


def table(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = []
    for n, row in enumerate(rows):
        lines.append("| " + " | ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def sync_label(fsync_every: int) -> str:
    if not fsync_every:
        return "none"
    return "every batch" if fsync_every == 1 else f"every {fsync_every} batches"


def summarize(cases: Sequence[Case], results: Sequence[RunResult]) -> str:
    rows = [
        [
            "strategy",
            "sync",
            "records/s (median)",
            "MB/s (median)",
            "MB/s min..max",
            "vs pwrite",
            "setup ms",
            "runs",
        ]
    ]
    medians: dict[Case, float] = {}
    for case in cases:
        mine = [r for r in results if r.case == case]
        mb = [r.bytes / r.seconds / 1e6 for r in mine]
        medians[case] = statistics.median(mb)
    for case in cases:
        mine = [r for r in results if r.case == case]
        records_s = statistics.median(r.records / r.seconds for r in mine)
        mb = [r.bytes / r.seconds / 1e6 for r in mine]
        peer = medians[Case("pwrite", case.fsync_every)]
        flag = " (timed out)" if any(r.timed_out for r in mine) else ""
        rows.append(
            [
                case.strategy,
                sync_label(case.fsync_every),
                f"{records_s / 1e6:.2f} M",
                f"{medians[case]:.0f}",
                f"{min(mb):.0f}..{max(mb):.0f}",
                f"{medians[case] / peer:.2f}x",
                f"{statistics.median(r.setup_seconds for r in mine) * 1e3:.1f}",
                f"{len(mine)}{flag}",
            ]
        )
    return table(rows)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    print(f"machine: {machine()}")
    print(f"files:   {filesystem(args.tmp_root)}")
    build_start = time.perf_counter()
    batches = make_batches(args.batches, args.records, args.value_size)
    total = sum(len(b) for b in batches)
    print(
        f"data:    {args.batches} batches x {args.records} records x {args.value_size} B values = "
        f"{total / 2**20:.1f} MiB per run (built in {time.perf_counter() - build_start:.1f} s)"
    )
    print(
        f"mmap:    preallocated with {args.prealloc}; runs: {args.runs} (after {args.warmup} warm-up); "
        f"sync cases: {args.fsync_every}"
    )
    syncs = [0, *sorted(set(args.fsync_every))]
    cases = [Case(strategy, n) for n in syncs for strategy in ("pwrite", "mmap")]
    results: list[RunResult] = []
    # The first use of a strategy pays one-off costs (first-touch page faults of the
    # process and the page cache); warm-up runs take them and are left out.
    for run in range(args.warmup + args.runs):
        shift = run % len(cases)
        label = (
            f"warm-up {run + 1}/{args.warmup}"
            if run < args.warmup
            else f"run {run - args.warmup + 1}/{args.runs}"
        )
        for case in cases[shift:] + cases[:shift]:
            result = run_case(case, batches, args.records, args)
            if run >= args.warmup:
                results.append(result)
            print(
                f"  {label} {case.label:<28} {result.bytes / result.seconds / 1e6:8.0f} MB/s"
                f"{'  (timed out)' if result.timed_out else ''}",
                file=sys.stderr,
            )
    print()
    print(summarize(cases, results))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "machine": machine(),
                    "filesystem": filesystem(args.tmp_root),
                    "args": vars(args),
                    "runs": [asdict(r) for r in results],
                },
                f,
                indent=2,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
