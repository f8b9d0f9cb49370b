"""Shared machinery of the crash suite: workload, child processes, checks, power loss.

The workload is a deterministic sequence of batches: batch ``b`` of seed
``s`` always holds the same records (keys, values of varying sizes incl.
empty and None, headers, timestamps), so a log after any crash must hold
exactly batches ``0..m-1`` of that sequence, at the offsets the sequence
gives, for some ``m`` at least the number of acknowledged batches.

The child (``crash_child.py``) appends that sequence and writes one line
``b first last`` to stdout after each append returns; stdout is a regular
file, so acknowledgements survive the child's SIGKILL. Children are forked
by a :class:`ForkServer` (``crash_child.py --server``), which saves each
trial the ~0.3 s of importing numpy; the child imports logstore itself,
after its ``LOGSTORE_CRASH_POINT`` is set, as a fresh process would.

Power loss is emulated from a side log the child writes after every fsync
(see ``crash_child.py``): the parent rewrites the directory as the disk could
hold it after a power cut (see :func:`emulate_power_loss`).
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from logstore import Record, Store
from logstore.errors import CorruptIndexError, OffsetOutOfRangeError
from logstore.records import build_batch
from logstore.storage.log import CLEAN_SHUTDOWN_FILE, Log

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "crash_child.py")
# Far in the future: segment.ms (7 days by default) never rolls on timestamps.
TS_BASE = 4_000_000_000_000
STORE_TOPIC = "events"

CRASH_POINTS = (
    "segment.mid_write",
    "segment.after_log_write",
    "log.roll.after_seal",
    "log.roll.after_create",
    "checkpoint.after_tmp",
    "checkpoint.after_rename",
    "log.after_append",
)

# -- the workload ------------------------------------------------------------


@dataclass(frozen=True)
class BatchSpec:
    """One batch of the sequence: what to append, and what must read back."""

    number: int
    records: list[Any]  # what Log.append takes
    timestamp: int  # the append's timestamp argument
    expected: list[tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]]

    @property
    def count(self) -> int:
        return len(self.expected)


def _blob(rng: random.Random) -> bytes | None:
    size = rng.choice([None, 0, 0, 1, 7, 33, 120, 400, 900, 1500, 2600])
    if size is not None and rng.random() < 0.01:
        size = rng.randint(9000, 26000)  # larger than some segments
    return None if size is None else rng.randbytes(size)


def batch_spec(seed: int, number: int) -> BatchSpec:
    """Batch ``number`` of the sequence of ``seed`` (pure function of both)."""
    rng = random.Random(f"logstore-crash/{seed}/{number}")
    count = rng.choice([1, 1, 1, 2, 3, 4, 6, 9]) if rng.random() < 0.9 else rng.randint(10, 40)
    timestamp = TS_BASE + number * 1000
    kind = rng.choice(["plain", "pairs", "records", "records"])
    records: list[Any] = []
    expected: list[Any] = []
    for i in range(count):
        value = _blob(rng)
        if kind == "plain":
            records.append(value)
            expected.append((None, value, (), timestamp))
            continue
        key = rng.choice([None, b"", rng.randbytes(rng.randint(1, 24))])
        if kind == "pairs":
            records.append((key, value))
            expected.append((key, value, (), timestamp))
            continue
        headers = tuple(
            (
                rng.choice(["", "h", "trace-id", f"n{i}", "ü"]),
                rng.choice([None, b"", rng.randbytes(rng.randint(1, 30))]),
            )
            for _ in range(rng.choice([0, 0, 1, 2, 3]))
        )
        stamp = timestamp + rng.randint(-400, 400)
        records.append(Record(key=key, value=value, headers=list(headers), timestamp=stamp))
        expected.append((key, value, headers, stamp))
    return BatchSpec(number, records, timestamp, expected)


class Sequence:
    """The batch sequence of one seed, with cumulative offsets (cached)."""

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self._specs: list[BatchSpec] = []
        self._firsts: list[int] = [0]

    def spec(self, number: int) -> BatchSpec:
        for n in range(len(self._specs), number + 1):
            spec = batch_spec(self.seed, n)
            self._specs.append(spec)
            self._firsts.append(self._firsts[-1] + spec.count)
        return self._specs[number]

    def first_offset(self, number: int) -> int:
        if number > 0:
            self.spec(number - 1)
        return self._firsts[number]

    def end_offset(self, batches: int) -> int:
        """The log end offset once batches ``0..batches-1`` are in."""
        return self.first_offset(batches)

    def raw(self, number: int) -> bytes:
        """The exact bytes Log.append stores for batch ``number``."""
        spec = self.spec(number)
        return build_batch(spec.records, base_offset=self.first_offset(number), timestamp=spec.timestamp)


def random_config(rng: random.Random) -> dict[str, Any]:
    """Small segments (frequent rolls), small index intervals; sometimes tiny indexes."""
    config: dict[str, Any] = {
        "flush.messages": 1,
        "segment.bytes": rng.choice([4000, 9000, 20000, 50000]),
        "index.interval.bytes": rng.choice([0, 64, 512, 2048]),
    }
    roll = rng.random()
    if roll < 0.25:
        config["segment.index.bytes"] = rng.choice([96, 240, 1024])  # indexes fill: IndexFullError rolls
    elif roll < 0.85:
        config["segment.index.bytes"] = 65536  # the default (10 MiB) costs ~70 ms per open here
    return config


class TrialFailures:
    """Failures of independent trials, collected so one failing trial does not hide the others."""

    def __init__(self, label: str, show: int = 6) -> None:
        self.label = label
        self.show = show
        self.trials = 0
        self.failures: list[str] = []

    @contextlib.contextmanager
    def trial(self) -> Iterator[None]:
        self.trials += 1
        try:
            yield
        except AssertionError as exc:
            self.failures.append(str(exc))

    def check(self) -> None:
        shown = "\n\n".join(self.failures[: self.show])
        more = f"\n\n... and {len(self.failures) - self.show} more" if len(self.failures) > self.show else ""
        if self.failures:
            raise AssertionError(
                f"{self.label}: {len(self.failures)} of {self.trials} trials failed:\n\n{shown}{more}"
            )


# -- child processes -----------------------------------------------------------


@dataclass
class ChildResult:
    acks: list[tuple[int, int, int]]  # (batch, first offset, last offset)
    returncode: int
    ready: bool
    killed_by_parent: bool
    stderr: str
    timed_out: bool = False

    @property
    def sigkilled(self) -> bool:
        return self.returncode == -signal.SIGKILL

    def describe(self) -> str:
        return (
            f"child rc={self.returncode} ready={self.ready} killed_by_parent={self.killed_by_parent} "
            f"timed_out={self.timed_out} "
            f"acks={len(self.acks)} last_ack={self.acks[-1] if self.acks else None}"
            + (f"\nstderr:\n{self.stderr[-3000:]}" if self.stderr.strip() else "")
        )


def _read_lines(path: str) -> list[str]:
    with open(path, "rb") as f:
        data = f.read().decode()
    lines = data.split("\n")
    return lines[:-1]  # a line without its newline was not acknowledged


class ForkServer:
    """``crash_child.py --server``: forks trial children without re-importing numpy each time.

    Every child is reaped by the server, which reports its return code
    (``-9`` for SIGKILL); closing the server kills and reaps any child left.
    """

    def __init__(self) -> None:
        env = {k: v for k, v in os.environ.items() if k != "LOGSTORE_CRASH_POINT"}
        env.update(PYTHONDONTWRITEBYTECODE="1", OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1")
        self._proc = subprocess.Popen(
            [sys.executable, CHILD, "--server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
        )
        self._cond = threading.Condition()
        self._spawned: list[int] = []
        self._exits: dict[int, int] = {}
        self._eof = False
        self._reader = threading.Thread(target=self._read, name="crash-forkserver-reader", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self._proc.stdout is not None
        for raw in self._proc.stdout:
            word, *rest = raw.decode().split()
            with self._cond:
                if word == "spawned":
                    self._spawned.append(int(rest[0]))
                elif word == "exit":
                    self._exits[int(rest[0])] = int(rest[1])
                self._cond.notify_all()
        with self._cond:
            self._eof = True
            self._cond.notify_all()

    def _send(self, request: dict[str, Any]) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.write((json.dumps(request) + "\n").encode())
        self._proc.stdin.flush()

    def spawn(self, spec: dict[str, Any], env: dict[str, str], stdout: str, stderr: str, cwd: str) -> int:
        with self._cond:
            self._send(
                {"op": "spawn", "spec": spec, "env": env, "stdout": stdout, "stderr": stderr, "cwd": cwd}
            )
            if not self._cond.wait_for(lambda: self._spawned or self._eof, timeout=30):
                raise AssertionError("the fork server did not answer a spawn request")
            if not self._spawned:
                raise AssertionError(f"the fork server died (rc {self._proc.poll()})")
            return self._spawned.pop(0)

    def poll(self, pid: int) -> int | None:
        with self._cond:
            return self._exits.get(pid)

    def wait(self, pid: int, timeout: float) -> int | None:
        with self._cond:
            self._cond.wait_for(lambda: pid in self._exits or self._eof, timeout=max(timeout, 0))
            return self._exits.get(pid)

    def kill(self, pid: int) -> None:
        """SIGKILL the child ``pid`` unless it is already reaped (the server checks)."""
        with self._cond:
            if pid not in self._exits and not self._eof:
                self._send({"op": "kill", "pid": pid})

    def close(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            with contextlib.suppress(BrokenPipeError):
                self._proc.stdin.close()
        try:
            self._proc.wait(timeout=30)
        finally:
            if self._proc.poll() is None:
                self._proc.kill()
                self._proc.wait()
            self._reader.join(timeout=5)

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def run_child(
    server: ForkServer,
    spec: dict[str, Any],
    workdir: str,
    *,
    crash_point: str | None = None,
    kill_after: float | None = None,
    kill_before_ready: bool = False,
    timeout: float = 60.0,
) -> ChildResult:
    """Run a child with ``spec``; SIGKILL it ``kill_after`` s after it is ready (or after start).

    The child is reaped before this returns, whatever happens.
    """
    out_path = os.path.join(workdir, "child.stdout")
    err_path = os.path.join(workdir, "child.stderr")
    env = {"LOGSTORE_CRASH_POINT": crash_point} if crash_point is not None else {}
    for path in (out_path, err_path):
        open(path, "wb").close()  # exists even if the child dies before opening it
    pid = server.spawn(spec, env, out_path, err_path, workdir)
    killed = timed_out = False
    returncode: int | None = None
    try:
        deadline = time.monotonic() + timeout
        if kill_after is not None:
            if not kill_before_ready:
                # Poll for the "ready" line; bounded by the deadline and the child's exit.
                for _ in range(int(timeout / 0.003) + 1):
                    if server.poll(pid) is not None or time.monotonic() > deadline:
                        break
                    with open(out_path, "rb") as f:
                        if f.read(6) == b"ready\n":
                            break
                    time.sleep(0.003)
            if server.wait(pid, kill_after) is None:
                server.kill(pid)
                killed = True
        returncode = server.wait(pid, deadline - time.monotonic())
    finally:
        if returncode is None:  # past the deadline (a hang), or this test is failing
            server.kill(pid)
            timed_out = killed = True
            returncode = server.wait(pid, 30)
    assert returncode is not None, f"child {pid} was not reaped"
    lines = _read_lines(out_path)
    with open(err_path, "rb") as f:
        stderr = f.read().decode(errors="replace")
    ready = bool(lines) and lines[0] == "ready"
    acks = [tuple(int(x) for x in line.split()) for line in lines[1:] if line.strip()]
    return ChildResult(acks, returncode, ready, killed, stderr, timed_out)  # type: ignore[arg-type]


def child_spec(
    path: str,
    seed: int,
    config: dict[str, Any],
    start_batch: int,
    max_batches: int,
    *,
    store: bool = False,
    close_at_end: bool = False,
    sync_log: str | None = None,
    arm_at_batch: int | None = None,
) -> dict[str, Any]:
    return {
        "path": path,
        "seed": seed,
        "config": config,
        "start_batch": start_batch,
        "max_batches": max_batches,
        "store": store,
        "close_at_end": close_at_end,
        "sync_log": sync_log,
        "arm_at_batch": arm_at_batch,
    }


def check_acks(result: ChildResult, seq: Sequence, start_batch: int, ctx: str) -> int:
    """The acks are consecutive batches from start_batch at their offsets; returns the count."""
    for i, (number, first, last) in enumerate(result.acks):
        expected = (
            start_batch + i,
            seq.first_offset(start_batch + i),
            seq.first_offset(start_batch + i + 1) - 1,
        )
        assert (number, first, last) == expected, (
            f"{ctx}: ack {i} is {(number, first, last)}, expected {expected}"
        )
    assert not result.timed_out, f"{ctx}: the child hung until the deadline\n{result.describe()}"
    assert result.returncode in (0, -signal.SIGKILL), f"{ctx}: the child failed\n{result.describe()}"
    return len(result.acks)


# -- checks --------------------------------------------------------------------


def _record_tuple(record: Any) -> tuple[Any, ...]:
    return (
        record.offset,
        record.key,
        record.value,
        tuple(tuple(h) for h in record.headers),
        record.timestamp,
    )


def expected_records(seq: Sequence, number: int) -> list[tuple[Any, ...]]:
    first = seq.first_offset(number)
    return [(first + i, *e) for i, e in enumerate(seq.spec(number).expected)]


def log_batches(log: Log, rng: random.Random, ctx: str) -> Iterator[tuple[int, bytes, list[tuple[Any, ...]]]]:
    """Every batch from the log start to the log end: (base offset, raw bytes, records)."""
    offset = log.log_start_offset
    end = log.log_end_offset
    for _ in range(end - offset + 1):
        if offset >= end:
            return
        result = log.read(offset, max_bytes=rng.choice([1, 5000, 1 << 20]), upto="log_end")
        batches = result.batches
        assert batches, f"{ctx}: read({offset}) below the log end {end} returned nothing"
        for batch in batches:
            assert batch.base_offset == offset, (
                f"{ctx}: read at {offset} served a batch at {batch.base_offset} (gap or overlap)"
            )
            records = [_record_tuple(r) for r in batch.records]
            yield batch.base_offset, bytes(batch.raw), records
            offset = batch.last_offset + 1
    raise AssertionError(f"{ctx}: reading did not reach the log end {end}")


def verify_log(
    log: Log,
    seq: Sequence,
    acked: int,
    *,
    most: int | None,
    ctx: str,
    rng: random.Random,
    resume: bool = True,
) -> int:
    """Check a reopened log against the sequence; returns the batches it held when opened.

    Batches ``0..acked-1`` must be there byte for byte, at dense offsets from 0;
    at most ``most`` batches may be (the unacknowledged in-flight one, if any);
    the indexes agree with the logs; every batch is found at its first offset;
    and an append resumes at the log end (when ``resume``: the log then holds
    one batch more than returned).
    """
    assert log.log_start_offset == 0, f"{ctx}: log start {log.log_start_offset}"
    present = 0
    for base, raw, records in log_batches(log, rng, ctx):
        assert most is None or present < most, (
            f"{ctx}: batch {present} at offset {base} is beyond the {most} the child could have written"
        )
        assert base == seq.first_offset(present), (
            f"{ctx}: batch {present} at {base}, expected {seq.first_offset(present)}"
        )
        assert records == expected_records(seq, present), f"{ctx}: batch {present} at {base}: wrong records"
        assert raw == seq.raw(present), f"{ctx}: batch {present} at {base}: bytes differ from those appended"
        present += 1
    assert present >= acked, f"{ctx}: {acked} batches acknowledged, only {present} in the log"
    assert log.log_end_offset == seq.end_offset(present), (
        f"{ctx}: log end {log.log_end_offset}, expected {seq.end_offset(present)} for {present} batches"
    )
    check_structure(log, ctx)
    # Every batch is found at its first offset and at its last (index lookups).
    numbers = range(present) if present <= 600 else sorted(rng.sample(range(present), 600))
    for n in numbers:
        for offset in {seq.first_offset(n), seq.first_offset(n + 1) - 1}:
            batches = log.read(offset, max_bytes=1, upto="log_end").batches
            assert batches and batches[0].base_offset == seq.first_offset(n), (
                f"{ctx}: read({offset}) did not return batch {n}"
            )
    end = log.log_end_offset
    assert not log.read(end, upto="log_end").batches, f"{ctx}: read at the log end returned batches"
    try:
        log.read(end + 1, upto="log_end")
    except OffsetOutOfRangeError:
        pass
    else:
        raise AssertionError(f"{ctx}: read past the log end did not raise")
    if resume:
        spec = seq.spec(present)
        info = log.append(spec.records, timestamp=spec.timestamp)
        assert (info.first_offset, info.last_offset) == (
            seq.first_offset(present),
            seq.first_offset(present + 1) - 1,
        ), f"{ctx}: the append after recovery got {info}"
        batches = log.read(info.first_offset, upto="log_end").batches
        assert batches and bytes(batches[0].raw) == seq.raw(present), (
            f"{ctx}: the resumed batch reads back wrong"
        )
        assert [_record_tuple(r) for r in batches[0].records] == expected_records(seq, present)
        check_structure(log, ctx + " (after the resumed append)")
    return present


def check_structure(log: Log, ctx: str) -> None:
    """Segments are ordered and contiguous, the last is active, indexes verify."""
    segments = list(log.segments.values())
    assert segments, f"{ctx}: no segments"
    for i, segment in enumerate(segments):
        assert segment.active == (i == len(segments) - 1), f"{ctx}: {segment} active flag is wrong"
        try:
            segment.verify_indexes()
        except CorruptIndexError as exc:
            raise AssertionError(f"{ctx}: {segment}: {exc}") from exc
        assert segment.size == os.path.getsize(segment.log_path), (
            f"{ctx}: {segment} size differs from its file"
        )
        if i + 1 < len(segments):
            assert segment.next_offset == segments[i + 1].base_offset, (
                f"{ctx}: {segment} ends at {segment.next_offset}, the next starts at {segments[i + 1].base_offset}"
            )
            assert segment.size > 0, f"{ctx}: empty sealed segment {segment}"


@contextlib.contextmanager
def opened(path: str, config: dict[str, Any], store: bool, create: bool = False) -> Iterator[Log]:
    """The log (standalone, or partition 0 of the Store's topic), closed afterwards.

    ``create``: the Store's topic may be missing (the child died creating it).
    """
    if not store:
        log = Log.open(path, config)
        try:
            yield log
        finally:
            log.close()
        return
    with Store(path, scheduler=False) as s:
        if create and STORE_TOPIC not in s.topics():
            s.create_topic(STORE_TOPIC, 1, config)
        yield s.log(STORE_TOPIC, 0)


def reopen_and_verify(
    path: str,
    config: dict[str, Any],
    seq: Sequence,
    acked: int,
    *,
    most: int | None,
    ctx: str,
    rng: random.Random,
    store: bool = False,
    create: bool = False,
) -> int:
    """Open the log (recovering it), ``verify_log`` it, close it; any error fails with ``ctx``."""
    try:
        with opened(path, config, store, create=create) as log:
            return verify_log(log, seq, acked, most=most, ctx=ctx, rng=rng)
    except AssertionError:
        raise
    except Exception as exc:
        raise AssertionError(f"{ctx}: {type(exc).__name__}: {exc}") from exc


def marker_path(path: str) -> str:
    return os.path.join(path, CLEAN_SHUTDOWN_FILE)


# -- power loss ----------------------------------------------------------------

SEGMENT_SUFFIXES = (".log", ".index", ".timeindex")


@dataclass
class DirState:
    """A directory as the parent saw it: name -> (inode, bytes)."""

    files: dict[str, tuple[int, bytes]] = field(default_factory=dict)

    @classmethod
    def capture(cls, path: str) -> DirState:
        state = cls()
        for entry in os.scandir(path):
            if entry.is_file(follow_symlinks=False):
                with open(entry.path, "rb") as f:
                    state.files[entry.name] = (entry.inode(), f.read())
        return state


@dataclass
class PowerLossReport:
    actions: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return "; ".join(self.actions)


def sync_events(sync_log: str) -> list[dict[str, Any]]:
    """Every whole record in a child's sync log (crash_child.install_sync_recorder)."""
    if not os.path.exists(sync_log):
        return []
    events = []
    for line in _read_lines(sync_log):
        if not line:
            continue
        try:
            events.append(json.loads(line))
        except json.JSONDecodeError:
            continue  # torn by a kill -9 mid-write: that sync never returned (crash_child.py)
    return events


def _events(sync_log: str, root: str) -> list[dict[str, Any]]:
    return [
        event
        for event in sync_events(sync_log)
        if event.get("dir") == root or os.path.dirname(event.get("file", "")) == root
    ]


def emulate_power_loss(
    root: str,
    baseline: DirState,
    sync_log: str,
    rng: random.Random,
    *,
    untrimmed_indexes: bool = True,
    holed_tails: bool = True,
) -> PowerLossReport:
    """Rewrite ``root`` as a disk could hold it after a power cut at the child's death.

    - A name survives if it was in the last fsynced listing of the directory
      (the baseline listing if the child fsynced none), or if its file was
      fsynced; a small file (checkpoint, marker) replaced after the last
      directory fsync may come back with its old content (chosen at random).
    - A file holds what it had at its last fsync (the baseline's content if it
      was not fsynced in this run; nothing if it is new and never fsynced).
    - A ``.log`` file then gets, at random, no tail, a torn tail (part of
      what was written after the fsync), a holed one (the same with a run of
      zeros inside: pages that never reached the disk), a zero-filled tail or
      a garbage tail.
    - An index file (written with pwrite, fdatasync'd when its segment is
      flushed, trimmed to its live entries on roll) holds, at random, that
      durable content, what it held at the kill, or zeros.

    ``untrimmed_indexes=False`` keeps index files at their live entries (as
    if the trim on roll had persisted) and ``holed_tails=False`` leaves out
    holed tails: each steers clear of a known bug (see the tests).

    Inode numbers are reused once a file is gone, so an fsync record counts
    for a file only if it was made under the file's name (or its ``.tmp``).
    """
    root = os.path.abspath(root)
    report = PowerLossReport()
    synced: dict[int, tuple[str, int]] = {}  # inode -> (name, size) at its last fsync in this run
    listing = {name: ino for name, (ino, _) in baseline.files.items()}
    listed_data = {name: data for name, (_, data) in baseline.files.items()}
    for event in _events(sync_log, root):
        if "file" in event:
            synced[event["ino"]] = (os.path.basename(event["file"]), event["size"])
        else:
            listing = dict(event["names"])
            listed_data = {name: bytes.fromhex(h) for name, h in event["data"].items()}
    current = DirState.capture(root)

    def synced_size(name: str, ino: int) -> int | None:
        entry = synced.get(ino)
        return entry[1] if entry is not None and entry[0] in (name, name + ".tmp") else None

    result: dict[str, bytes] = {}
    for name in sorted(set(listing) | set(current.files)):
        now = current.files.get(name)
        options: list[tuple[str, bytes, bytes]] = []  # (what, durable content, content at the kill)
        if not name.endswith(SEGMENT_SUFFIXES):
            if name in listing and name in listed_data:
                options.append(("as listed", listed_data[name], now[1] if now is not None else b""))
            if now is not None and synced_size(name, now[0]) is not None:
                options.append(("as fsynced", now[1], now[1]))
        elif now is not None and listing.get(name) == now[0]:
            size = synced_size(name, now[0])
            base = baseline.files.get(name)
            if size is not None and len(now[1]) < size and name.endswith((".index", ".timeindex")):
                # Trimmed to its live entries after its last fsync (a roll, a close): the trim
                # reached the disk, or it did not and the zeros past the live entries are back.
                durable = rng.choice([now[1], now[1] + bytes(size - len(now[1]))])
            elif size is not None:
                assert len(now[1]) >= size, f"power-loss emulation: {name} shrank below its fsynced size"
                durable = now[1][:size]
            elif base is not None and base[0] == now[0]:
                durable = base[1]  # not fsynced in this run: what the disk had when it began
            else:
                durable = b""  # created in this run, never fsynced
            options.append(("listed", durable, now[1]))
        elif now is not None and synced_size(name, now[0]) is not None:
            options.append(("fsynced, unlisted", now[1][: synced_size(name, now[0])], now[1]))
        elif name in listing and name in baseline.files and baseline.files[name][0] == listing[name]:
            options.append(("deleted, back", baseline.files[name][1], baseline.files[name][1]))
        elif name in listing:
            report.actions.append(f"{name}: listed, content unknown, left out")
        if not options:
            if now is not None:
                report.actions.append(f"{name}: gone")
            continue
        what, content, at_kill = rng.choice(options)
        if name.endswith((".index", ".timeindex")):
            choice = rng.choice(["durable", "at kill", "zeros"])
            if choice == "at kill":
                content = at_kill
            elif choice == "zeros":
                content = bytes(len(at_kill))
            if not untrimmed_indexes:
                entry = 8 if name.endswith(".index") else 12
                live = 0
                for _ in range(len(content) // entry):
                    if not any(content[live * entry : (live + 1) * entry]):
                        break
                    live += 1
                content = content[: live * entry]
            report.actions.append(f"{name}: {what}, {choice} ({len(content)} bytes)")
        elif name.endswith(".log") and len(at_kill) > len(content) and at_kill.startswith(content):
            rest = len(at_kill) - len(content)
            size = rng.randint(1, rest)
            tail = rng.choice(["none", "torn", "zeros", "garbage", "holed"][: 5 if holed_tails else 4])
            if tail == "torn":
                content = at_kill[: len(content) + size]
            elif tail == "holed":  # all written, but a run of it never reached the disk
                written = bytearray(at_kill)
                hole = rng.randint(len(content), len(written) - 1)
                end = rng.randint(hole + 1, len(written))
                written[hole:end] = bytes(end - hole)
                content = bytes(written)
            elif tail == "zeros":
                content = content + bytes(size)
            elif tail == "garbage":
                content = content + rng.randbytes(size)
            report.actions.append(f"{name}: {what}, {len(at_kill)} -> {len(content)} bytes ({tail} tail)")
        elif content != at_kill:
            report.actions.append(f"{name}: {what}, {len(at_kill)} -> {len(content)} bytes")
        result[name] = content
    for name in current.files:
        os.unlink(os.path.join(root, name))
    for name, content in result.items():
        with open(os.path.join(root, name), "wb") as f:
            f.write(content)
    return report
