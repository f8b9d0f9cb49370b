"""Crash-point trials of log compaction: kill -9 at every step of the cleaner's swap.

The parent builds one compacted log (several segments per group, several
groups, tombstones, compressed batches) and records its content before and
after a clean (run on a copy). Each trial copies the log, starts a child that
opens it and cleans it with ``LOGSTORE_CRASH_POINT=<point>@<n>`` set, and
checks the child died there (by the leftover files that step leaves). The
parent then reopens the log: it must load (indexes verified), hold no
leftovers, have increasing offsets each holding the record appended there,
keep every record the finished clean keeps and give the same latest record
per key; a new clean must then complete with exactly the finished clean's
content.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from typing import Any

import pytest

from logstore import Log, Record
from logstore.records import build_batch
from logstore.storage.cleaner import CRASH_POINTS, Cleaner

pytestmark = [pytest.mark.crash, pytest.mark.slow]

NOW = 1_700_000_000_000
CONFIG: dict[str, Any] = {
    "cleanup.policy": "compact",
    "segment.ms": 2**62,
    "segment.bytes": 1200,
    "index.interval.bytes": 100,
    "delete.retention.ms": 86_400_000,
}
CHILD = """
import sys, json
from logstore import Log
from logstore.storage.cleaner import Cleaner
log = Log.open(sys.argv[1], json.loads(sys.argv[2]))
Cleaner().clean(log, now_ms=int(sys.argv[3]))
print("finished", flush=True)
"""
LEFTOVER = (".cleaned", ".swap", ".deleted")

# (point, count, a suffix some file must carry when the child dies there, or None)
TRIALS = [
    ("cleaner.write", 1, ".cleaned"),
    ("cleaner.write", 7, ".cleaned"),
    ("cleaner.after_cleaned", 1, ".cleaned"),
    ("cleaner.mid_swap_rename", 1, ".log.swap"),
    ("cleaner.after_swap", 1, ".swap"),
    ("cleaner.mid_delete_rename", 1, ".deleted"),
    ("cleaner.mid_delete_rename", 2, ".deleted"),
    ("cleaner.after_deleted", 1, ".deleted"),
    ("cleaner.mid_final_rename", 1, ".log.swap"),
    ("cleaner.after_final_rename", 1, ".deleted"),
    ("cleaner.after_switch", 1, ".deleted"),
    ("cleaner.after_swap", 2, ".swap"),
    ("cleaner.after_switch", 2, ".deleted"),
    ("cleaner.before_checkpoint", 1, None),
    ("checkpoint.after_tmp", 1, "cleaner-offset-checkpoint.tmp"),
    ("checkpoint.after_rename", 1, None),
]

Content = list[tuple[int, Any]]


def build(path: str) -> None:
    """The log every trial starts from (deterministic)."""
    rng = random.Random(7)
    with Log.open(path, CONFIG) as log:
        for number in range(48):
            records = [
                Record(
                    key=rng.choice([b"a", b"b", b"c", b"d", b"e", b"f"]),
                    value=None if rng.random() < 0.15 else rng.randbytes(rng.randint(0, 40)),
                    headers=[("n", b"%d" % number)],
                    timestamp=NOW + number,
                )
                for _ in range(rng.randint(1, 4))
            ]
            if number in (3, 30):  # key z ends on a tombstone, held until its delete horizon
                records.append(Record(key=b"z", value=b"z" if number == 3 else None, timestamp=NOW + number))
            if number % 5 == 4:
                log.append_batch(build_batch(records, compression="gzip"))
            else:
                log.append(records)
            if number % 2:
                log.roll()
        log.append([(b"a", b"active")], timestamp=NOW + 100)


def contents(log: Log) -> Content:
    out: Content = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        read = log.read(offset, upto="log_end")
        if not read.size:
            break
        for batch in read.batches:
            out += [(r.offset, (r.key, r.value, tuple(r.headers), r.timestamp)) for r in batch.records]
            offset = batch.last_offset + 1
    return out


def latest_per_key(content: Content) -> dict[Any, tuple[int, Any]]:
    return {record[0]: (offset, record) for offset, record in content}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Content, Content]:
    """The log before cleaning, its content, and the content a finished clean leaves."""
    root = tmp_path_factory.mktemp("cleaner-crash")
    path = str(root / "pristine" / "topic-0")
    build(path)
    with Log.open(path, CONFIG) as log:
        before = contents(log)
    done = str(root / "done" / "topic-0")
    shutil.copytree(path, done)
    with Log.open(done, CONFIG) as log:
        result = Cleaner().clean(log, now_ms=NOW)
        after = contents(log)
    assert (
        result.segments_written >= 2 and result.segments_replaced >= 6
    )  # several groups of several segments
    assert any(record[1] is None for _, record in after)  # tombstones held
    return path, before, after


def check_recovered(path: str, before: Content, after: Content) -> None:
    with Log.open(path, CONFIG) as log:  # the loader settles what the crash left
        assert not [name for name in os.listdir(path) if name.endswith(LEFTOVER)]
        for segment in log.segments.values():
            segment.verify_indexes()
        got = contents(log)
        offsets = [offset for offset, _ in got]
        assert offsets == sorted(set(offsets)), "offsets must increase, none twice"
        original = dict(before)
        assert all(original[offset] == record for offset, record in got), "a record changed"
        assert {o for o, _ in after} <= set(offsets), "a record the clean keeps was lost"
        assert latest_per_key(got) == latest_per_key(before) == latest_per_key(after)
        Cleaner().clean(log, now_ms=NOW)
        assert contents(log) == after


def test_every_crash_point_is_tried() -> None:
    assert {point for point, _, _ in TRIALS} >= set(CRASH_POINTS)


def test_crash_at_each_step_of_a_clean(pristine: tuple[str, Content, Content], tmp_path: Any) -> None:
    path, before, after = pristine
    children = []
    for number, (point, count, _) in enumerate(TRIALS):
        trial = str(tmp_path / f"trial{number}" / "topic-0")
        shutil.copytree(path, trial)
        env = {**os.environ, "LOGSTORE_CRASH_POINT": f"{point}@{count}"}
        args = [sys.executable, "-c", CHILD, trial, _json(CONFIG), str(NOW)]
        children.append(
            (trial, subprocess.Popen(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
        )
    for (trial, child), (point, count, suffix) in zip(children, TRIALS, strict=True):
        out, err = child.communicate(timeout=60)
        assert child.returncode == -9, f"{point}@{count}: the child did not die there: {out!r} {err!r}"
        if suffix is not None:
            assert any(name.endswith(suffix) for name in os.listdir(trial)), (
                f"{point}@{count}: {os.listdir(trial)}"
            )
        check_recovered(trial, before, after)


def test_a_crash_during_the_clean_after_a_crash(
    pristine: tuple[str, Content, Content], tmp_path: Any
) -> None:
    """Die mid-swap, then die again in the next clean (after the loader settled the first)."""
    path, before, after = pristine
    trial = str(tmp_path / "topic-0")
    shutil.copytree(path, trial)
    for spec in ("cleaner.after_deleted@2", "cleaner.mid_final_rename@1"):
        env = {**os.environ, "LOGSTORE_CRASH_POINT": spec}
        child = subprocess.run(
            [sys.executable, "-c", CHILD, trial, _json(CONFIG), str(NOW)],
            env=env,
            capture_output=True,
            timeout=60,
        )
        assert child.returncode == -9, child.stderr
    check_recovered(trial, before, after)


def _json(value: Any) -> str:
    import json

    return json.dumps(value)
