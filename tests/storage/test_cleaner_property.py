"""Stateful property test: compaction against a plain dict oracle.

Keys come from a small alphabet so they collide; appends (plain or
pre-encoded in any codec, a few tombstones), rolls, cleans (with an advancing
clock, a tiny ``delete.retention.ms`` and sometimes a tiny offset map, so a
clean may cover only part of the dirty section) and reopens run in any
order. After every clean with end offset ``E`` the log must read exactly:
below ``E`` the latest record of each key among the records below ``E``
(a tombstone only while its delete horizon, set by the first clean that kept
it, is ahead of the clock), from ``E`` on every record appended; each
record with the offset, key, value and timestamp it was appended with.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from logstore import Log, Record
from logstore.records import CODECS, build_batch
from logstore.storage.cleaner import Cleaner

pytestmark = pytest.mark.property

TMP_ROOT = os.environ.get("LOGSTORE_TEST_TMPDIR") or (
    "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
)
RETENTION_MS = 100
T0 = 1_700_000_000_000

keys = st.sampled_from([b"a", b"b", b"c", b"d", b"e"])
values = st.none() | st.binary(max_size=40)
records = st.lists(st.tuples(keys, values), min_size=1, max_size=5)


class CleanerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.path = os.path.join(tempfile.mkdtemp(dir=TMP_ROOT), "topic-0")
        self.appended: dict[int, tuple[bytes, bytes | None, int]] = {}
        self.horizons: dict[int, int] = {}  # tombstone offset -> its delete horizon
        self.now = T0
        self.end = 0  # the last clean's end offset

    @initialize(segment_bytes=st.sampled_from([300, 800, 4000]), map_keys=st.sampled_from([1, 2, 1_000_000]))
    def open_log(self, segment_bytes: int, map_keys: int) -> None:
        self.config = {
            "cleanup.policy": "compact",
            "segment.bytes": segment_bytes,
            "segment.ms": 2**62,
            "index.interval.bytes": 64,
            "delete.retention.ms": RETENTION_MS,
        }
        self.cleaner = Cleaner(max_map_keys=map_keys)
        self.log = Log.open(self.path, self.config)

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)

    # -- rules -----------------------------------------------------------------

    @rule(items=records, codec=st.sampled_from(sorted(CODECS)), pre_encoded=st.booleans())
    def append(self, items: list[tuple[bytes, bytes | None]], codec: str, pre_encoded: bool) -> None:
        stamp = self.now - 1_000
        batch = [Record(key=k, value=v, timestamp=stamp + i) for i, (k, v) in enumerate(items)]
        if pre_encoded:
            info = self.log.append_batch(build_batch(batch, compression=codec))
        else:
            info = self.log.append(batch)
        for offset, (k, v) in zip(range(info.first_offset, info.last_offset + 1), items, strict=True):
            self.appended[offset] = (k, v, stamp + offset - info.first_offset)

    @rule()
    def roll(self) -> None:
        self.log.roll()

    @rule(advance=st.integers(min_value=0, max_value=3 * RETENTION_MS))
    def clean(self, advance: int) -> None:
        self.now += advance
        result = self.cleaner.clean(self.log, now_ms=self.now)
        assert result.end_offset >= self.end or result.end_offset == self.log.log_start_offset
        self.end = result.end_offset
        event(f"clean: {'rewrote' if result.changed else 'no change'}")
        if result.tombstones_removed:
            event("clean: tombstones past their horizon removed")
        if result.delete_horizon_ms is not None:
            event("clean: tombstones held")
        if self.end < self.log.active_segment.base_offset:
            event("clean: a partial pass (small offset map)")
        self._stamp_horizons()
        assert not [n for n in os.listdir(self.path) if n.endswith((".cleaned", ".swap", ".deleted"))]
        self.check_contents()

    @rule()
    def reopen(self) -> None:
        self.log.close()
        self.log = Log.open(self.path, self.config)
        self.check_contents()

    # -- the oracle ------------------------------------------------------------

    def _latest_below_end(self) -> dict[bytes, int]:
        latest: dict[bytes, int] = {}
        for offset in sorted(o for o in self.appended if o < self.end):
            latest[self.appended[offset][0]] = offset
        return latest

    def _stamp_horizons(self) -> None:
        """A tombstone that is its key's latest gets its horizon from the first clean that keeps it."""
        for offset in self._latest_below_end().values():
            if self.appended[offset][1] is None:
                self.horizons.setdefault(offset, self.now + RETENTION_MS)

    def expected(self) -> list[tuple[int, tuple[bytes, bytes | None, int]]]:
        kept = [
            o
            for o in self._latest_below_end().values()
            if self.appended[o][1] is not None or self.now < self.horizons[o]
        ]
        kept += [o for o in self.appended if o >= self.end]
        return [(o, self.appended[o]) for o in sorted(kept)]

    def read_all(self) -> list[tuple[int, tuple[Any, Any, Any]]]:
        out: list[tuple[int, tuple[Any, Any, Any]]] = []
        offset = self.log.log_start_offset
        while offset < self.log.log_end_offset:
            read = self.log.read(offset, max_bytes=500, upto="log_end")
            assert read.size, f"nothing served at {offset} below the log end {self.log.log_end_offset}"
            for batch in read.batches:
                out += [
                    (r.offset, (r.key, r.value, r.timestamp)) for r in batch.records if r.offset >= offset
                ]
                offset = batch.last_offset + 1
        return out

    def check_contents(self) -> None:
        assert self.read_all() == self.expected()

    @invariant()
    def offsets_and_segments(self) -> None:
        if not hasattr(self, "log"):
            return
        assert self.log.log_end_offset == len(self.appended)
        bases = list(self.log.segments.keys())
        assert bases == sorted(bases) and self.log.active_segment is self.log.segments[bases[-1]]


CleanerMachine.TestCase.settings = settings(
    max_examples=250,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_cleaner_against_a_dict = CleanerMachine.TestCase
