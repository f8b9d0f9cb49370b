"""Stateful property test: a ``Log`` against a plain in-memory model.

The model is a list of batches (base offset, records, encoded size and the
segment that holds it), the segment base offsets, and the log start offset,
log end offset and high watermark. Rules append (records of every kind, and
pre-encoded batches in every codec through ``append_batch``), read, roll,
truncate, delete records, apply retention, move the high watermark, look
offsets up by timestamp, and close and reopen the log; after every step the
log's offsets, segments (bases, sizes, max timestamps, which is active)
and full contents must match the model.

The model predicts segment rolls itself: ``segment.ms`` is set out of reach,
so a segment rolls only on ``roll()`` or when the next append would take a
non-empty active segment past ``segment.bytes`` (with tiny indexes it may
also roll when they fill up: that roll is taken from the log). A batch's
encoded size is taken from ``build_batch`` with the same arguments the log
uses (the encoding itself is checked by test_records_roundtrip.py; here the
records read back are compared with what was appended). Retention is
mirrored on the model's segments, which must equal the log's.

Semantics the model follows where the API leaves them open: the high
watermark is not kept across a close (it equals the log end again); a batch
that straddles a mid-batch high watermark is served whole; truncating below
the log start empties the log and restarts it at that offset.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from logstore import ClosedError, Log, OffsetOutOfRangeError, Record, build_batch
from logstore.errors import InvalidArgumentError, InvalidRecordError
from logstore.records import CODECS
from logstore.records.builder import RecordLike

pytestmark = pytest.mark.property

Header = tuple[str, bytes | None]
# key, value, headers, timestamp: what reading a record back must give.
ModelRecord = tuple[bytes | None, bytes | None, tuple[Header, ...], int]
# What an append takes, and what it stands for (the timestamp None: the batch's).
Item = tuple[RecordLike, bytes | None, bytes | None, tuple[Header, ...], int | None]

ROOMY_INDEX_BYTES = 64 * 1024  # never fills here (the 10 MiB default only costs time to scan on open)
SEGMENT_MS = 2**62  # out of reach: rolls are by size (and roll()) only, so the model can predict them
MAX_TS = 10_000
MAX_BYTES_CHOICES = [1, 100, 500, 1_000, 2_000]

# Each example's log lives in a fresh directory under TMP_ROOT: tmpfs when there is one, since
# the fsyncs of rolls, closes and checkpoints are most of the cost on a disk (2-3x the runtime,
# and a failure takes minutes to shrink). LOGSTORE_TEST_TMPDIR overrides it; None: tempfile's.
TMP_ROOT = os.environ.get("LOGSTORE_TEST_TMPDIR") or (
    "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None
)


@dataclass
class ModelBatch:
    base: int
    records: list[ModelRecord]
    size: int  # encoded bytes
    segment: int  # base offset of the segment that holds it

    @property
    def next(self) -> int:
        return self.base + len(self.records)

    def with_offsets(self) -> list[tuple[int, ModelRecord]]:
        return [(self.base + i, r) for i, r in enumerate(self.records)]


def read_back(records: list[Record]) -> list[tuple[int, ModelRecord]]:
    """Records read from the log, as (offset, model record)."""
    result = []
    for r in records:
        assert r.timestamp is not None, f"record {r.offset} has no timestamp"
        result.append((r.offset, (r.key, r.value, tuple(r.headers), r.timestamp)))
    return result


# -- strategies ----------------------------------------------------------------


def _filler(size: int) -> bytes:
    """``size`` bytes of a fixed pattern: big values without drawing each byte."""
    return (bytes(range(256)) * (size // 256 + 1))[:size]


small = st.binary(max_size=16)
# Past the smallest segment.bytes on its own: such a batch fills a segment by itself.
big = st.integers(min_value=150, max_value=400).map(_filler)
keys = st.none() | st.binary(max_size=8)
values = st.none() | small | big
headers = st.lists(st.tuples(st.text(max_size=4), st.none() | st.binary(max_size=8)), max_size=2).map(tuple)
# Small timestamps make ties (and the timestamp 0) common; wide ones spread retention out.
timestamps = (
    st.just(0)
    | st.integers(min_value=0, max_value=3)
    | st.integers(min_value=0, max_value=30)
    | st.integers(min_value=0, max_value=MAX_TS)
)


def _plain(value: bytes) -> Item:
    return value, None, value, (), None


def _bytearray(value: bytes) -> Item:
    return bytearray(value), None, value, (), None


def _pair(kv: tuple[bytes | None, bytes | None]) -> Item:
    return kv, kv[0], kv[1], (), None


def _record(key: bytes | None, value: bytes | None, hs: tuple[Header, ...], ts: int | None) -> Item:
    return Record(key=key, value=value, headers=list(hs), timestamp=ts), key, value, hs, ts


plain_items = small.map(_plain) | big.map(_plain)
mixed_items = st.one_of(
    plain_items,
    small.map(_bytearray),
    st.just((None, None, None, (), None)),
    st.tuples(keys, values).map(_pair),
    st.builds(_record, keys, values, headers, st.none() | timestamps),
)
# All-bytes batches take the C fast path of build_batch; mixed ones the general path.
batches = st.lists(plain_items, min_size=1, max_size=5) | st.lists(mixed_items, min_size=1, max_size=6)


class LogStateMachine(RuleBasedStateMachine):
    """One standalone Log in a fresh directory, and its model."""

    def __init__(self) -> None:
        super().__init__()
        self.tmp = tempfile.mkdtemp(prefix="logstore-sm-", dir=TMP_ROOT)
        self.path = os.path.join(self.tmp, "topic-0")
        self.config: dict[str, Any] = {}
        self.log: Log | None = None
        self.batches: list[ModelBatch] = []
        self.segments: list[int] = [0]
        self.start = 0
        self.end = 0
        self.hw: int | None = None  # None: never set since the log was opened, so the log end

    def teardown(self) -> None:
        try:
            if self.log is not None:
                self.log.close()
        finally:
            shutil.rmtree(self.tmp, ignore_errors=True)

    # -- model helpers ---------------------------------------------------------

    @property
    def opened(self) -> Log:
        assert self.log is not None
        return self.log

    @property
    def hw_effective(self) -> int:
        return self.end if self.hw is None else self.hw

    def segment_batches(self, base: int) -> list[ModelBatch]:
        return [b for b in self.batches if b.segment == base]

    def segment_size(self, base: int) -> int:
        return sum(b.size for b in self.segment_batches(base))

    def segment_max_timestamp(self, base: int) -> int:
        return max((r[3] for b in self.segment_batches(base) for r in b.records), default=-1)

    def segment_next_offset(self, i: int) -> int:
        return self.segments[i + 1] if i + 1 < len(self.segments) else self.end

    def containing(self, offset: int) -> int:
        """Index of the batch holding ``offset`` (it must be in the log)."""
        for i, b in enumerate(self.batches):
            if b.base <= offset < b.next:
                return i
        raise AssertionError(f"model: no batch holds offset {offset}")

    def records_from(self, offset: int) -> list[tuple[int, ModelRecord]]:
        return [(o, r) for b in self.batches for o, r in b.with_offsets() if o >= offset]

    def interesting_offsets(self) -> list[int]:
        points = {self.start, self.end, self.hw_effective, *self.segments}
        for b in self.batches:
            points.update((b.base, b.next - 1))
        return sorted(points)

    def offsets(self, low: int, high: int) -> st.SearchStrategy[int]:
        """Within the log, its boundaries, or in [low, high] around it."""
        return (
            st.integers(min_value=self.start, max_value=self.end)
            | st.sampled_from(self.interesting_offsets())
            | st.integers(min_value=low, max_value=high)
        )

    def draw_offset(self, data: st.DataObject, low: int, high: int, label: str) -> int:
        return data.draw(self.offsets(low, high), label=label)

    def delete_first_segments_while(self, predicate: Callable[[int, int], bool]) -> int:
        """The model of Log._delete_segments_while: whole segments, oldest first, below the HW."""
        deleted = 0
        while len(self.segments) >= 2:
            first, following = self.segments[0], self.segments[1]
            if following > self.hw_effective or not predicate(first, following):
                break
            self.batches = [b for b in self.batches if b.segment != first]
            self.segments.pop(0)
            deleted += 1
        self.start = max(self.start, self.segments[0])
        return deleted

    # -- rules -----------------------------------------------------------------

    @initialize(
        segment_bytes=st.sampled_from([150, 300, 700, 2_000, 5_000]),
        index_interval=st.sampled_from([0, 1, 100, 256, 4_096]),
        retention_bytes=st.just(-1) | st.integers(min_value=0, max_value=3_000),
        retention_ms=st.just(-1) | st.integers(min_value=0, max_value=MAX_TS),
        cleanup_policy=st.sampled_from(["delete", "delete", "compact,delete", "compact"]),
        index_bytes=st.sampled_from([ROOMY_INDEX_BYTES, ROOMY_INDEX_BYTES, 24, 40]),
    )
    def open_log(
        self,
        segment_bytes: int,
        index_interval: int,
        retention_bytes: int,
        retention_ms: int,
        cleanup_policy: str,
        index_bytes: int,
    ) -> None:
        self.config = {
            "segment.bytes": segment_bytes,
            "index.interval.bytes": index_interval,
            "retention.bytes": retention_bytes,
            "retention.ms": retention_ms,
            "cleanup.policy": cleanup_policy,
            "segment.index.bytes": index_bytes,
            "segment.ms": SEGMENT_MS,
        }
        self.log = Log.open(self.path, self.config)

    @rule(items=batches, timestamp=timestamps, flush=st.booleans())
    def append_one(self, items: list[Item], timestamp: int, flush: bool) -> None:
        self.append(items, timestamp)
        if flush:
            self.opened.flush()

    def refuses(self, items: list[Item]) -> bool:
        """A compacted log takes only records with keys (InvalidRecordError, nothing stored)."""
        return "compact" in self.config["cleanup.policy"] and any(item[1] is None for item in items)

    def append(self, items: list[Item], timestamp: int) -> None:
        records = [item[0] for item in items]
        size = len(build_batch(records, base_offset=self.end, timestamp=timestamp))
        if self.refuses(items):
            with pytest.raises(InvalidRecordError):
                self.opened.append(records, timestamp=timestamp)
            return
        info = self.opened.append(records, timestamp=timestamp)
        assert (info.first_offset, info.last_offset) == (self.end, self.end + len(items) - 1)
        self.model_append([(items, timestamp, size)])

    @rule(
        encoded=st.lists(
            st.tuples(batches, timestamps, st.integers(min_value=0, max_value=2**40)), min_size=1, max_size=3
        ),
        compression=st.sampled_from(sorted(CODECS)),
    )
    def append_batch(self, encoded: list[tuple[list[Item], int, int]], compression: str) -> None:
        """Pre-encoded batches in one call (the broker's path, any codec): the log assigns their offsets."""
        data = [
            build_batch([item[0] for item in items], base_offset=base, timestamp=ts, compression=compression)
            for items, ts, base in encoded
        ]
        if self.refuses([item for items, _, _ in encoded for item in items]):
            with pytest.raises(InvalidRecordError):
                self.opened.append_batch(b"".join(data))
            return
        info = self.opened.append_batch(b"".join(data))
        count = sum(len(items) for items, _, _ in encoded)
        assert (info.first_offset, info.last_offset) == (self.end, self.end + count - 1)
        self.model_append([(items, ts, len(d)) for (items, ts, _), d in zip(encoded, data, strict=True)])

    def model_append(self, appended: list[tuple[list[Item], int, int]]) -> None:
        """The batches of one append call (items, batch timestamp, encoded size): one roll check, one segment."""
        total = sum(size for _, _, size in appended)
        active = self.segments[-1]
        if self.segment_batches(active) and self.segment_size(active) + total > self.config["segment.bytes"]:
            self.segments.append(self.end)
        elif (
            self.config["segment.index.bytes"] != ROOMY_INDEX_BYTES
            and active != self.end
            and self.opened.segments.keys()[-1] == self.end
        ):
            # Tiny indexes fill up: then the log rolls before a batch the size allows (the one
            # roll the model does not predict; the invariants check everything else).
            self.segments.append(self.end)
        for items, timestamp, size in appended:
            records = [(k, v, hs, timestamp if ts is None else ts) for _, k, v, hs, ts in items]
            self.batches.append(ModelBatch(self.end, records, size, self.segments[-1]))
            self.end += len(items)

    @rule(
        count=st.integers(min_value=2, max_value=12),
        records=st.integers(min_value=1, max_value=4),
        size=st.integers(min_value=0, max_value=200),
        stamps=st.lists(timestamps, min_size=1, max_size=4),
    )
    def append_many(self, count: int, records: int, size: int, stamps: list[int]) -> None:
        """Several plain batches in one step, from a few draws: logs grow past a few segments."""
        keyed = "compact" in self.config["cleanup.policy"]
        for i in range(count):
            value = _filler(size + i)
            item = _pair((b"k%d" % (i % 3), value)) if keyed else _plain(value)
            self.append([item] * records, stamps[i % len(stamps)])

    @precondition(lambda self: self.end > self.start)  # reads of an empty log: see contents()
    @rule(
        data=st.data(),
        max_bytes=st.just(1 << 20)
        | st.sampled_from(MAX_BYTES_CHOICES)
        | st.integers(min_value=1, max_value=3_000),
        upto=st.sampled_from(["high_watermark", "log_end"]),
    )
    def read(self, data: st.DataObject, max_bytes: int, upto: str) -> None:
        limit = self.hw_effective if upto == "high_watermark" else self.end
        # Mostly offsets with records to serve (below the limit); else anywhere around the log.
        servable = (
            st.integers(min_value=self.start, max_value=limit - 1) if limit > self.start else st.nothing()
        )
        offset = data.draw(servable | self.offsets(self.start - 3, self.end + 3), label="offset")
        if not self.start <= offset <= self.end:
            with pytest.raises(OffsetOutOfRangeError):
                self.opened.read(offset, max_bytes=max_bytes, upto=upto)
            return
        result = self.opened.read(offset, max_bytes=max_bytes, upto=upto)
        chosen: list[ModelBatch] = []
        if offset < limit:
            first = self.containing(offset)
            total = 0
            for b in self.batches[first:]:
                # Whole batches of one segment, based below the limit; the first even past max_bytes.
                # (A batch that straddles a mid-batch HW is served whole, as Log._below does.)
                if b.segment != self.batches[first].segment or b.base >= limit:
                    break
                if chosen and total + b.size > max_bytes:
                    break
                chosen.append(b)
                total += b.size
        expected = [(o, r) for b in chosen for o, r in b.with_offsets() if o >= offset]
        assert read_back(result.records) == expected
        assert [(b.base_offset, b.record_count) for b in result.batches] == [
            (b.base, len(b.records)) for b in chosen
        ]
        assert result.size == sum(b.size for b in chosen)
        assert len(chosen) <= 1 or result.size <= max_bytes
        event(f"read: {min(len(chosen), 3)} batches")
        event(f"read: log of {min(len(self.segments), 5)} segments")

    @rule()
    def roll(self) -> None:
        segment = self.opened.roll()
        if self.segment_batches(self.segments[-1]):
            self.segments.append(self.end)
        assert segment.base_offset == self.segments[-1]

    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        # Mostly a few records off the end (a follower's divergence), else anywhere.
        few_off_the_end = st.integers(min_value=1, max_value=max(self.end - self.start, 1)).map(
            lambda k: self.end - k
        )
        offset = data.draw(few_off_the_end | self.offsets(-1, self.end + 2), label="truncate_offset")
        if offset >= self.end:
            assert self.opened.truncate_to(offset) == 0
            return
        if offset < 0:
            with pytest.raises(InvalidArgumentError):
                self.opened.truncate_to(offset)
            return
        removed = self.opened.truncate_to(offset)
        event(f"truncate: {'below the log start' if offset < self.start else 'within the log'}")
        if offset < self.start:
            # Below the log start: everything goes and the log starts again at ``offset``.
            expected_removed = sum(b.size for b in self.batches)
            self.batches, self.segments = [], [offset]
            self.start = self.end = offset
        else:
            cut = self.batches[self.containing(offset)].base  # the whole batch holding offset goes
            expected_removed = sum(b.size for b in self.batches if b.base >= cut)
            self.batches = [b for b in self.batches if b.base < cut]
            self.segments = [s for s in self.segments if s <= offset]
            self.end = cut
            self.start = min(self.start, self.end)
        if self.hw is not None:
            self.hw = min(self.hw, self.end)
        assert removed == expected_removed

    @rule(data=st.data())
    def set_high_watermark(self, data: st.DataObject) -> None:
        offset = self.draw_offset(data, self.start - 1, self.end + 1, "hw")
        if not self.start <= offset <= self.end:
            with pytest.raises(InvalidArgumentError):
                self.opened.high_watermark = offset
            return
        self.opened.high_watermark = offset
        self.hw = offset

    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        before = self.draw_offset(data, -1, self.hw_effective + 2, "before_offset")
        if not 0 <= before <= self.hw_effective:
            with pytest.raises(OffsetOutOfRangeError):
                self.opened.delete_records(before)
            return
        new_start = self.opened.delete_records(before)
        if before > self.start:
            self.start = before
            self.delete_first_segments_while(lambda first, following: following <= self.start)
        assert new_start == self.start
        event(f"delete_records segments={len(self.segments)}")

    @rule(now_ms=st.integers(min_value=0, max_value=MAX_TS + 2_000))
    def delete_old_segments(self, now_ms: int) -> None:
        log = self.opened
        before, start_before, hw = list(log.segments.keys()), log.log_start_offset, log.high_watermark
        deleted = log.delete_old_segments(now_ms=now_ms)
        remaining = list(log.segments.keys())
        # Checked on the log itself: whole segments go, oldest first, never the active one, none
        # holding an offset at or past the HW, and the log start moves up to the first one left.
        assert deleted == len(before) - len(remaining)
        assert remaining == before[deleted:]
        assert remaining[-1] == before[-1]
        assert deleted == 0 or remaining[0] <= hw
        assert log.log_start_offset == max(start_before, remaining[0])
        if "delete" not in self.config["cleanup.policy"]:
            assert deleted == 0
            return

        # The model decides which: retention.ms, then retention.bytes, then the log start.
        expected = 0
        retention_ms = self.config["retention.ms"]
        if retention_ms >= 0:
            expected += self.delete_first_segments_while(
                lambda first, following: now_ms - self.segment_max_timestamp(first) > retention_ms
            )
        retention_bytes = self.config["retention.bytes"]
        if retention_bytes >= 0:
            excess = sum(b.size for b in self.batches) - retention_bytes

            def over_size(first: int, following: int) -> bool:
                nonlocal excess
                size = self.segment_size(first)
                if excess - size < 0:
                    return False
                excess -= size
                return True

            expected += self.delete_first_segments_while(over_size)
        expected += self.delete_first_segments_while(lambda first, following: following <= self.start)
        assert deleted == expected
        event(f"retention deleted {min(deleted, 3)}")

    @rule(data=st.data())
    def offset_for_timestamp(self, data: st.DataObject) -> None:
        stamps = sorted({r[3] for b in self.batches for r in b.records} | {-2, -1, 0})
        target = data.draw(
            st.integers(min_value=-2, max_value=MAX_TS + 1) | st.sampled_from(stamps), label="timestamp"
        )
        found = self.opened.offset_for_timestamp(target)
        if target == -2:
            expected: tuple[int, int] | None = (-1, self.start)
        elif target == -1:
            expected = (-1, self.end)
        else:
            expected = next(
                ((r[3], o) for o, r in self.records_from(self.start) if r[3] >= target),
                None,
            )
        assert found == expected
        event(f"oft found={found is not None}")

    @rule()
    def reopen(self) -> None:
        # A clean shutdown trims the indexes to their entries; reopening must find every one of them
        # (none dropped, none rebuilt: a rebuilt sealed time index would lack the entry added on roll).
        entries = {b: (s.offset_index.entries, s.time_index.entries) for b, s in self.opened.segments.items()}
        self.opened.close()
        assert self.opened.closed
        with pytest.raises(ClosedError):
            self.opened.read(self.start)
        self.log = Log.open(self.path, self.config)
        self.hw = None  # the HW is not part of a log's files: it equals the log end again
        reopened = {
            b: (s.offset_index.entries, s.time_index.entries) for b, s in self.opened.segments.items()
        }
        assert reopened == entries, (
            f"index entries (offset, time) by segment: {reopened} after, {entries} before"
        )

    # -- invariants ------------------------------------------------------------

    @invariant()
    def offsets_and_segments(self) -> None:
        if self.log is None:
            return
        log = self.log
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
        assert log.recovery_point <= log.log_end_offset
        assert log.size == sum(b.size for b in self.batches)
        assert (log.log_start_offset, log.high_watermark, log.log_end_offset) == (
            self.start,
            self.hw_effective,
            self.end,
        )
        assert list(log.segments.keys()) == self.segments
        segments = list(log.segments.values())
        for i, segment in enumerate(segments):
            base = self.segments[i]
            assert segment.base_offset == base
            assert segment.active == (i == len(segments) - 1), f"segment {base}: only the last is active"
            assert segment.next_offset == self.segment_next_offset(i)
            assert segment.size == self.segment_size(base)
            assert segment.max_timestamp == self.segment_max_timestamp(base)
        assert self.segments[0] <= self.start

    @invariant()
    def contents(self) -> None:
        """Reading on from the log start gives every record, offsets dense, up to the log end."""
        if self.log is None:
            return
        got: list[tuple[int, ModelRecord]] = []
        offset = self.start
        for _ in range(self.end - self.start + 1):
            if offset >= self.end:
                break
            records = self.log.read(offset, max_bytes=1 << 20, upto="log_end").records
            assert records, f"no records read at {offset} below the log end {self.end}"
            got += read_back(records)
            offset = records[-1].offset + 1
        assert got == self.records_from(self.start)
        assert not self.log.read(self.end, upto="log_end").records
        for outside in (self.start - 1, self.end + 1):
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(outside)


# About 45 s on this 2-core machine with TMP_ROOT on tmpfs (over 2 minutes with it on the disk).
LogStateMachine.TestCase.settings = settings(
    max_examples=400,
    stateful_step_count=50,
    deadline=None,
    # No explain phase: it traces every shrink attempt, which makes shrinking a failure ~5x slower.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
TestLogStateMachine = LogStateMachine.TestCase


def _sealed(state: LogStateMachine) -> None:
    state.append_one(items=[_plain(b"")], timestamp=0, flush=False)
    state.roll()


def _active(state: LogStateMachine) -> None:
    state.append_many(count=2, records=1, size=0, stamps=[0])


def _active_full(state: LogStateMachine) -> None:
    state.append_many(count=2, records=1, size=0, stamps=[0])
    state.append_many(count=2, records=1, size=0, stamps=[0])
    state.append_many(count=2, records=1, size=0, stamps=[1])


@pytest.mark.parametrize(
    ("config", "steps"),
    [
        pytest.param((150, 0, ROOMY_INDEX_BYTES), _sealed, id="sealed"),
        pytest.param((150, 1, ROOMY_INDEX_BYTES), _active, id="active"),
        pytest.param((700, 100, 24), _active_full, id="active-index-full"),
    ],
)
def test_reopen_keeps_a_time_index_that_starts_at_timestamp_zero(
    config: tuple[int, int, int], steps: Callable[[LogStateMachine], None]
) -> None:
    """The machine's minimal examples: reopening a segment whose time index starts (0, +0).

    That entry (timestamp 0, relative offset 0) is all zeros, which must not be taken for
    the end of a preallocated index: sealed, active, or active with a full index, the
    reopened segment must keep every entry. (When one is lost, reads and lookups stay
    right, by scanning the segment from its start.)
    """
    segment_bytes, index_interval, index_bytes = config
    state = LogStateMachine()
    try:
        state.open_log(
            segment_bytes=segment_bytes,
            index_interval=index_interval,
            retention_bytes=-1,
            retention_ms=-1,
            cleanup_policy="delete",
            index_bytes=index_bytes,
        )
        steps(state)
        state.reopen()
        state.offsets_and_segments()
        state.contents()
    finally:
        state.teardown()
