"""kill -9 trials: a child appends with flush.messages=1 and dies; the log must recover.

Each trial runs ``crash_child.py`` (see ``crashkit``), kills it (SIGKILL at a
random moment, or at an armed crash point), reopens the log in this process
and checks it with ``crashkit.verify_log``: every acknowledged batch reads back
byte for byte at dense offsets from 0; nothing but the one in-flight batch
may follow them; indexes verify; an append resumes at the log end.

Every failure message names the test, the seed and the trial, so a trial
reruns alone with the same numbers (``TRIAL_SEED`` below).
"""

from __future__ import annotations

import os
import pathlib
import random
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from logstore.storage.log import RECOVERY_POINT_FILE
from tests.kit import crashkit as ck

pytestmark = [pytest.mark.crash, pytest.mark.slow]

TRIAL_SEED = 20240611
FRESH_RANDOM_KILLS = 56  # fresh directory, SIGKILL at a random moment
CRASH_POINT_COUNTS = (1, 2, 3, 5)  # n of name@n, for every crash point (mid_write: see below)
MID_WRITE_LATE_TRIALS = 10  # mid_write armed before a random batch (the @n workaround)
REUSED_DIRECTORIES = 4  # directories that crash again and again...
REUSED_CYCLES = 15  # ...this many times each
STORE_DIRECTORIES = 2  # the same through a Store with its scheduler thread
STORE_CYCLES = 12
TIME_BUDGET_S = 150.0  # per test; a loop stops early (never fails) past it
KILL_WINDOW_S = 0.2  # random kills land this long after the child is ready (~10 ms per append here)
STARTUP_WINDOW_S = 0.2  # kills before "ready" land in imports, open and recovery (~0.16 s here)


@pytest.fixture(scope="module")
def server() -> Iterator[ck.ForkServer]:
    with ck.ForkServer() as fork_server:
        yield fork_server


# What a crash point leaves of the batch being appended when it fires (kill -9, no power loss).
IN_FLIGHT_KEPT = {
    "segment.mid_write": 0,  # half a batch: truncated by recovery
    "segment.after_log_write": 1,  # whole batch written, index not: kept
    "log.roll.after_seal": 0,  # the roll comes before the write
    "log.roll.after_create": 0,
    "checkpoint.after_tmp": 0,  # checkpoints are written on roll, before the write
    "checkpoint.after_rename": 0,
    "log.after_append": 1,  # appended, not acknowledged
}


@dataclass
class Tracked:
    """A log directory and the batches it is known to hold (all verified), and who forks its children."""

    server: ck.ForkServer
    path: str
    seq: ck.Sequence
    config: dict[str, Any]
    store: bool = False
    batches: int = 0


def crash_cycle(
    tracked: Tracked,
    workdir: str,
    rng: random.Random,
    ctx: str,
    *,
    crash_point: str | None = None,
    kill_after: float | None = None,
    kill_before_ready: bool = False,
    max_batches: int = 400,
    close_at_end: bool = False,
    arm_at_batch: int | None = None,
) -> tuple[ck.ChildResult, int]:
    """One child run from the tracked state, then recovery and verification.

    Returns the child's result and the batches found after recovery (before
    the resumed append, which ``tracked.batches`` includes). When an armed
    crash point fired, the in-flight batch must be kept or dropped as
    ``IN_FLIGHT_KEPT`` says.
    """
    start = tracked.batches
    spec = ck.child_spec(
        tracked.path,
        tracked.seq.seed,
        tracked.config,
        start,
        max_batches,
        store=tracked.store,
        close_at_end=close_at_end,
        arm_at_batch=arm_at_batch,
    )
    result = ck.run_child(
        tracked.server,
        spec,
        workdir,
        crash_point=crash_point,
        kill_after=kill_after,
        kill_before_ready=kill_before_ready,
    )
    ctx = f"{ctx} (start batch {start}, {result.describe()})"
    acked = ck.check_acks(result, tracked.seq, start, ctx)
    if result.returncode == 0:
        assert acked == max_batches, f"{ctx}: exited 0 after {acked} of {max_batches} batches"
    most = start + acked + (1 if result.sigkilled else 0)
    present = ck.reopen_and_verify(
        tracked.path,
        tracked.config,
        tracked.seq,
        start + acked,
        most=most,
        ctx=ctx,
        rng=rng,
        store=tracked.store,
        create=not result.ready,
    )
    tracked.batches = present + 1  # verify_log appended the next batch
    if crash_point is not None and result.sigkilled and not result.killed_by_parent and not tracked.store:
        # The point fired (in a Store, checkpoints run on the scheduler thread: no exact count).
        expected = start + acked + IN_FLIGHT_KEPT[crash_point.partition("@")[0]]
        assert present == expected, f"{ctx}: {present} batches after recovery, expected {expected}"
    return result, present


def unclean_next_open(tracked: Tracked, rng: random.Random) -> None:
    """Make the next open an unclean one (sometimes a full recovery from offset 0)."""
    marker = ck.marker_path(tracked.path)
    if os.path.exists(marker) and rng.random() < 0.6:
        os.unlink(marker)
        if not tracked.store and rng.random() < 0.3:
            os.unlink(os.path.join(tracked.path, RECOVERY_POINT_FILE))


def test_random_kills_in_fresh_directories(server: ck.ForkServer, tmp_path: pathlib.Path) -> None:
    rng = random.Random(TRIAL_SEED)
    failures = ck.TrialFailures("random kills in fresh directories")
    deadline = time.monotonic() + TIME_BUDGET_S
    for trial in range(FRESH_RANDOM_KILLS):
        if time.monotonic() > deadline:
            break
        seed = rng.randrange(1 << 30)
        workdir = tmp_path / f"t{trial}"
        workdir.mkdir()
        tracked = Tracked(server, str(workdir / "log-0"), ck.Sequence(seed), ck.random_config(rng))
        before_ready = rng.random() < 0.2
        kill_after = rng.uniform(0, STARTUP_WINDOW_S if before_ready else KILL_WINDOW_S)
        with failures.trial():
            crash_cycle(
                tracked,
                str(workdir),
                rng,
                f"random kill trial {trial} seed {seed} config {tracked.config} kill_after {kill_after:.3f}"
                f"{' before ready' if before_ready else ''}",
                kill_after=kill_after,
                kill_before_ready=before_ready,
            )
    failures.check()


CRASH_POINT_TRIALS = [
    (point, n)
    for point in ck.CRASH_POINTS
    for n in CRASH_POINT_COUNTS
    if point != "segment.mid_write" or n == 1
]


@pytest.mark.parametrize(("point", "n"), CRASH_POINT_TRIALS)
def test_crash_point(server: ck.ForkServer, tmp_path: pathlib.Path, point: str, n: int) -> None:
    """Each crash point, hit the n-th time, in a fresh log with small segments."""
    for variant in range(2):  # two configs per (point, n)
        rng = random.Random(f"{TRIAL_SEED}/{point}/{n}/{variant}")
        seed = rng.randrange(1 << 30)
        config = ck.random_config(rng)
        config["segment.bytes"] = rng.choice([4000, 9000])  # rolls (and checkpoints) every few batches
        workdir = tmp_path / f"v{variant}"
        workdir.mkdir()
        tracked = Tracked(server, str(workdir / "log-0"), ck.Sequence(seed), config)
        ctx = f"crash point {point}@{n} variant {variant} seed {seed} config {config}"
        result, _ = crash_cycle(tracked, str(workdir), rng, ctx, crash_point=f"{point}@{n}")
        assert result.sigkilled and not result.killed_by_parent, f"{ctx}: the crash point did not fire"


def test_mid_write_fires_on_the_nth_write(server: ck.ForkServer, tmp_path: pathlib.Path) -> None:
    """segment.mid_write@3 must kill the child in its third write, like every other point.

    Fails today: ``is_armed`` is only true when one hit remains, and it guards
    the only call to ``crash_point("segment.mid_write")``, so the count never
    goes down and @n with n > 1 never fires.
    """
    workdir = tmp_path / "w"
    workdir.mkdir()
    config = {"flush.messages": 1, "segment.bytes": 9000, "index.interval.bytes": 512}
    tracked = Tracked(server, str(workdir / "log-0"), ck.Sequence(7), config)
    result, present = crash_cycle(
        tracked,
        str(workdir),
        random.Random(7),
        "mid_write@3",
        crash_point="segment.mid_write@3",
        max_batches=20,
    )
    assert result.sigkilled, f"segment.mid_write@3 never fired: {len(result.acks)} appends acknowledged"
    assert len(result.acks) == 2 and present == 2


def test_mid_write_at_random_batches(server: ck.ForkServer, tmp_path: pathlib.Path) -> None:
    """Half-written batches at random points of a reused log (armed by the child at batch k)."""
    rng = random.Random(f"{TRIAL_SEED}/mid-write")
    seed = rng.randrange(1 << 30)
    tracked = Tracked(server, str(tmp_path / "log-0"), ck.Sequence(seed), ck.random_config(rng))
    deadline = time.monotonic() + TIME_BUDGET_S
    for trial in range(MID_WRITE_LATE_TRIALS):
        if time.monotonic() > deadline:
            break
        arm = tracked.batches + rng.randint(0, 12)
        ctx = f"mid_write armed at batch {arm}, trial {trial} seed {seed} config {tracked.config}"
        result, present = crash_cycle(
            tracked,
            str(tmp_path),
            rng,
            ctx,
            crash_point="segment.mid_write@1000000",  # armed, count set by the child at `arm`
            arm_at_batch=arm,
        )
        assert result.sigkilled and not result.killed_by_parent, f"{ctx}: did not fire"
        assert present == arm, f"{ctx}: {present} batches after recovery, expected {arm}"
        unclean_next_open(tracked, rng)


def random_cycle_kind(rng: random.Random) -> dict[str, Any]:
    """A random way for the next child to die (or to finish and close cleanly)."""
    roll = rng.random()
    if roll < 0.45:
        before_ready = rng.random() < 0.2
        return {
            "kill_after": rng.uniform(0, STARTUP_WINDOW_S if before_ready else KILL_WINDOW_S),
            "kill_before_ready": before_ready,
        }
    if roll < 0.85:
        point = rng.choice(ck.CRASH_POINTS)
        n = 1 if point == "segment.mid_write" else rng.randint(1, 6)
        return {"crash_point": f"{point}@{n}", "max_batches": 60}  # may finish first: a clean exit
    # A short run that may finish and close cleanly, or die in the close's checkpoint.
    kind: dict[str, Any] = {"max_batches": rng.randint(1, 6), "close_at_end": True}
    if rng.random() < 0.5:
        kind["crash_point"] = (
            f"{rng.choice(['checkpoint.after_tmp', 'checkpoint.after_rename'])}@{rng.randint(1, 4)}"
        )
    return kind


@pytest.mark.parametrize("directory", range(REUSED_DIRECTORIES))
def test_repeated_crashes_in_one_directory(
    server: ck.ForkServer, tmp_path: pathlib.Path, directory: int
) -> None:
    """Crash, recover, append, crash again: the same log through many kills."""
    rng = random.Random(f"{TRIAL_SEED}/reused/{directory}")
    seed = rng.randrange(1 << 30)
    tracked = Tracked(server, str(tmp_path / "log-0"), ck.Sequence(seed), ck.random_config(rng))
    deadline = time.monotonic() + TIME_BUDGET_S / REUSED_DIRECTORIES
    for cycle in range(REUSED_CYCLES):
        if time.monotonic() > deadline:
            break
        kind = random_cycle_kind(rng)
        ctx = f"reused directory {directory} cycle {cycle} seed {seed} config {tracked.config} {kind}"
        crash_cycle(tracked, str(tmp_path), rng, ctx, **kind)
        unclean_next_open(tracked, rng)


@pytest.mark.parametrize("directory", range(STORE_DIRECTORIES))
def test_repeated_crashes_of_a_store(server: ck.ForkServer, tmp_path: pathlib.Path, directory: int) -> None:
    """The same through a Store whose scheduler flushes and checkpoints every few ms."""
    rng = random.Random(f"{TRIAL_SEED}/store/{directory}")
    seed = rng.randrange(1 << 30)
    tracked = Tracked(server, str(tmp_path / "data"), ck.Sequence(seed), ck.random_config(rng), store=True)
    deadline = time.monotonic() + TIME_BUDGET_S / STORE_DIRECTORIES
    for cycle in range(STORE_CYCLES):
        if time.monotonic() > deadline:
            break
        kind = random_cycle_kind(rng)
        ctx = f"store {directory} cycle {cycle} seed {seed} config {tracked.config} {kind}"
        crash_cycle(tracked, str(tmp_path), rng, ctx, **kind)
        unclean_next_open(tracked, rng)
