"""LogLoader (storage/loader.py): leftovers of interrupted work settled, unclean recovery, clean shutdown."""

from __future__ import annotations

import os
import time

import pytest

from logstore import Log
from logstore.storage.log import CLEAN_SHUTDOWN_FILE
from logstore.storage.segment import segment_file_name

pytestmark = pytest.mark.unit

CONFIG = {"segment.bytes": 1500, "index.interval.bytes": 200}


def fill(log: Log, batches: int, per: int = 4, ts0: int | None = None) -> None:
    """Append batches with timestamps ts0 + i (default: recent, so segment.ms does not roll)."""
    ts0 = int(time.time() * 1000) - 10_000 if ts0 is None else ts0
    for i in range(batches):
        log.append([bytes([i % 256]) * 60] * per, timestamp=ts0 + i)


def values(log: Log) -> list[tuple[int, bytes | None]]:
    out, offset = [], log.log_start_offset
    for _ in range(10_000):
        if offset >= log.log_end_offset:
            break
        records = log.read(offset, upto="log_end").records
        out += [(r.offset, r.value) for r in records]
        offset = records[-1].offset + 1
    return out


def crash(path: str) -> None:
    """Make the last close look unclean."""
    os.unlink(os.path.join(path, CLEAN_SHUTDOWN_FILE))


def test_leftovers_of_interrupted_work_are_settled(segment_dir: str) -> None:
    with Log.open(segment_dir, CONFIG) as log:
        fill(log, 30)
        before = values(log)
        bases = list(log.segments.keys())
    # A deletion in progress, a compaction that never reached its swap, a stray tmp.
    for name in ("00000000000000000999.log.deleted", "00000000000000000000.log.cleaned", "x.tmp"):
        with open(os.path.join(segment_dir, name), "wb") as f:
            f.write(b"junk")
    # A finished compaction: a .swap covering the first two segments (same records here).
    first, second, third = bases[0], bases[1], bases[2]
    with open(os.path.join(segment_dir, segment_file_name(first, ".log")), "rb") as f:
        merged = f.read()
    with open(os.path.join(segment_dir, segment_file_name(second, ".log")), "rb") as f:
        merged += f.read()
    with open(os.path.join(segment_dir, segment_file_name(first, ".log.swap")), "wb") as f:
        f.write(merged)
    with Log.open(segment_dir, CONFIG) as log:
        names = os.listdir(segment_dir)
        assert not any(n.endswith((".deleted", ".cleaned", ".tmp", ".swap")) for n in names)
        assert segment_file_name(second, ".log") not in names
        assert list(log.segments.keys())[:2] == [first, third]
        assert values(log) == before


def test_unclean_shutdown_truncates_at_the_first_bad_batch_and_drops_later_segments(segment_dir: str) -> None:
    with Log.open(segment_dir, {**CONFIG, "flush.messages": 1}) as log:
        fill(log, 30)
        bases = list(log.segments.keys())
        # Force a full rescan: recovery point 0.
    crash(segment_dir)
    os.unlink(os.path.join(segment_dir, "recovery-point-offset-checkpoint"))
    victim = os.path.join(segment_dir, segment_file_name(bases[2], ".log"))
    with open(victim, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0x40]))
    with Log.open(segment_dir, CONFIG) as log:
        assert log.truncated_bytes > 0
        assert list(log.segments.keys()) == bases[:3]
        assert log.log_end_offset == bases[2]  # the damaged batch was the segment's first
        assert [o for o, _ in values(log)] == list(range(bases[2]))
        log.append([b"after"])  # appends resume at the end
        assert log.get(bases[2]).value == b"after"


def test_clean_shutdown_skips_recovery(segment_dir: str) -> None:
    with Log.open(segment_dir, CONFIG) as log:
        fill(log, 20)
    with Log.open(segment_dir, CONFIG) as log:
        assert log.recovered_bytes == 0
    crash(segment_dir)
    with Log.open(segment_dir, CONFIG) as log:
        assert 0 < log.recovered_bytes <= 1500  # only the active segment, from the recovery point
