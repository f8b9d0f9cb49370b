"""Log compaction (logstore.storage.cleaner) against a plain dict oracle."""

from __future__ import annotations

import os
import random
import time
from typing import Any

import pytest

from logstore import Log, Record, Store
from logstore.errors import ClosedError, CorruptRecordError, InvalidRecordError
from logstore.records import RecordBatch, build_batch, parse_batches
from logstore.storage.checkpoints import read_offsets
from logstore.storage.cleaner import (
    CHECKPOINT_FILE,
    DELETE_HORIZON_FLAG,
    Cleaner,
    delete_horizon,
    record_bounds,
)
from logstore.storage.store import UnknownTopicError

pytestmark = pytest.mark.unit

SEGMENT_MS = 2**62  # rolls only when asked (or by size)
COMPACT = {"cleanup.policy": "compact", "segment.ms": SEGMENT_MS, "index.interval.bytes": 64}
DAY = 86_400_000
NOW = 1_700_000_000_000

# (key, value, headers, timestamp) by offset: what the log was given.
Appended = dict[int, tuple[bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int]]


def contents(log: Log) -> list[Record]:
    """Every record from the log start to the log end, in order."""
    out: list[Record] = []
    offset = log.log_start_offset
    for _ in range(100_000):
        if offset >= log.log_end_offset:
            break
        read = log.read(offset, upto="log_end")
        if not read.size:
            break
        for batch in read.batches:
            out += [r for r in batch.records if r.offset >= offset]
            offset = batch.last_offset + 1
    return out


def batches(log: Log) -> list[RecordBatch]:
    result: list[RecordBatch] = []
    for segment in log.segments.values():
        result += list(parse_batches(bytes(segment.view())))
    return result


def files(directory: str) -> dict[str, bytes]:
    """Every file of a directory, by name."""
    result = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as f:
            result[name] = f.read()
    return result


def as_tuple(record: Record) -> tuple[Any, ...]:
    return (record.key, record.value, tuple(record.headers), record.timestamp)


def expected_offsets(
    appended: Appended, end: int, now: int | None = None, horizons: dict[int, int] | None = None
) -> list[int]:
    """The oracle: below ``end`` the latest record per key (tombstones while their horizon is ahead), then all."""
    latest: dict[bytes, int] = {}
    for offset in sorted(appended):
        key = appended[offset][0]
        if offset < end and key is not None:
            latest[key] = offset
    kept = []
    for offset in sorted(latest.values()):
        tombstone = appended[offset][1] is None
        horizon = (horizons or {}).get(offset)
        if tombstone and now is not None and horizon is not None and now >= horizon:
            continue
        kept.append(offset)
    return kept + [o for o in sorted(appended) if o >= end]


def fill(
    log: Log, rng: random.Random, batches: int, keys: bytes = b"abcdefgh", roll_every: int = 3
) -> Appended:
    """Keyed records (headers, timestamps, a few tombstones), rolling every few batches."""
    appended: Appended = {}
    for number in range(batches):
        records = []
        for _ in range(rng.randint(1, 4)):
            key = bytes([rng.choice(keys)])
            value = None if rng.random() < 0.1 else rng.randbytes(rng.randint(0, 50))
            headers = [("h", rng.randbytes(3))] if rng.random() < 0.5 else []
            records.append(
                Record(key=key, value=value, headers=headers, timestamp=NOW + number * 10 + rng.randint(0, 5))
            )
        info = log.append(records)
        for offset, record in zip(range(info.first_offset, info.last_offset + 1), records, strict=True):
            appended[offset] = (record.key, record.value, tuple(record.headers), record.timestamp)
        if number % roll_every == roll_every - 1:
            log.roll()
    return appended


def check_against(log: Log, appended: Appended, offsets: list[int]) -> None:
    records = contents(log)
    got = [r.offset for r in records]
    assert got == offsets
    assert got == sorted(set(got))
    for record in records:  # every survivor is the record appended at its offset, headers and timestamp too
        assert as_tuple(record) == appended[record.offset]


@pytest.fixture
def log(segment_dir: str) -> Any:
    with Log.open(segment_dir, COMPACT) as opened:
        yield opened


# -- what stays --------------------------------------------------------------------


def test_clean_keeps_the_latest_record_per_key_and_everything_in_the_active_segment(log: Log) -> None:
    appended = fill(log, random.Random(1), 60)
    info = log.append([(b"a", b"in the active segment"), (b"zz", b"new key")], timestamp=NOW)
    appended[info.first_offset] = (b"a", b"in the active segment", (), NOW)
    appended[info.last_offset] = (b"zz", b"new key", (), NOW)
    active = log.active_segment
    active_bytes = bytes(active.view())

    result = Cleaner().clean(log, now_ms=NOW)

    assert result.end_offset == active.base_offset and result.first_dirty_offset == 0
    assert result.records_removed > 0 and result.changed
    check_against(log, appended, expected_offsets(appended, result.end_offset))
    assert log.active_segment is active and bytes(active.view()) == active_bytes
    assert log.log_end_offset == max(appended) + 1


def test_batches_keep_their_offsets_and_producer_fields(log: Log) -> None:
    for i in range(3):
        batch = build_batch(
            [(b"k", b"%d" % i), (b"other%d" % i, b"x")],
            timestamp=NOW + i,
            producer_id=7,
            producer_epoch=2,
            base_sequence=10 * i,
            partition_leader_epoch=-1,
        )
        log.append_batch(batch)
        log.roll()
    Cleaner().clean(log, now_ms=NOW)
    found = batches(log)
    assert [(b.base_offset, b.last_offset) for b in found] == [(0, 1), (2, 3), (4, 5)]
    assert [(b.producer_id, b.producer_epoch, b.base_sequence) for b in found] == [
        (7, 2, 0),
        (7, 2, 10),
        (7, 2, 20),
    ]
    assert [[r.offset for r in b.records] for b in found] == [[1], [3], [4, 5]]


@pytest.mark.parametrize("codec", ["gzip", "zstd", "lz4", "snappy"])
def test_compressed_batches_are_cleaned_and_keep_their_codec(log: Log, codec: str) -> None:
    appended: Appended = {}
    for i in range(6):
        records = [
            Record(
                key=b"k%d" % (j % 3), value=b"v%d-%d" % (i, j), headers=[("n", b"%d" % j)], timestamp=NOW + i
            )
            for j in range(5)
        ]
        info = log.append_batch(build_batch(records, compression=codec))
        for offset, r in zip(range(info.first_offset, info.last_offset + 1), records, strict=True):
            appended[offset] = (r.key, r.value, tuple(r.headers), r.timestamp)
        log.roll()
    result = Cleaner().clean(log, now_ms=NOW)
    check_against(log, appended, expected_offsets(appended, result.end_offset))
    survivors = [b for b in batches(log) if b.record_count]
    assert survivors and all(b.compression == codec for b in survivors)


def test_tombstones_stay_until_delete_retention_after_the_clean_that_saw_them(log: Log) -> None:
    log.config = log.config.with_overrides({"delete.retention.ms": DAY})
    log.append([(b"a", b"1"), (b"b", b"1")], timestamp=NOW)
    log.append([(b"a", None), (b"c", b"1")], timestamp=NOW + 1)
    log.roll()
    log.append([(b"d", b"1")], timestamp=NOW + 2)
    log.roll()

    first = Cleaner().clean(log, now_ms=NOW + 1000)
    assert [(r.key, r.value) for r in contents(log)] == [
        (b"b", b"1"),
        (b"a", None),
        (b"c", b"1"),
        (b"d", b"1"),
    ]
    assert first.delete_horizon_ms == NOW + 1000 + DAY
    stamped = [b for b in batches(log) if b.attributes & DELETE_HORIZON_FLAG]
    assert [delete_horizon(b) for b in stamped] == [NOW + 1000 + DAY]
    tombstone = log.get(2)
    assert (
        tombstone is not None and tombstone.value is None and tombstone.timestamp == NOW + 1
    )  # rebased, not moved

    assert not Cleaner().clean(log, now_ms=NOW + 1000 + DAY - 1).changed  # one ms before the horizon
    assert log.get(2) is not None

    last = Cleaner().clean(log, now_ms=NOW + 1000 + DAY)
    assert last.tombstones_removed == 1 and last.delete_horizon_ms is None
    assert [(r.key, r.value) for r in contents(log)] == [(b"b", b"1"), (b"c", b"1"), (b"d", b"1")]
    assert not any(b.attributes & DELETE_HORIZON_FLAG for b in batches(log))
    assert log.get(3) is not None and log.get(3).timestamp == NOW + 1  # type: ignore[union-attr]


def test_a_superseded_tombstone_goes_at_once(log: Log) -> None:
    log.append([(b"a", None)], timestamp=NOW)
    log.append([(b"a", b"back")], timestamp=NOW)
    log.roll()
    result = Cleaner().clean(log, now_ms=NOW)
    assert [(r.offset, r.value) for r in contents(log)] == [(1, b"back")]
    assert result.delete_horizon_ms is None


def test_cleaning_twice_changes_nothing_the_second_time(log: Log) -> None:
    fill(log, random.Random(2), 40)
    Cleaner().clean(log, now_ms=NOW)
    before = files(log.path)
    second = Cleaner().clean(log, now_ms=NOW + 1)
    after = files(log.path)
    assert not second.changed and second.records_removed == 0
    assert after == before


def test_a_reopened_log_reads_the_same_and_keeps_its_checkpoint(segment_dir: str) -> None:
    with Log.open(segment_dir, COMPACT) as log:
        appended = fill(log, random.Random(3), 30)
        result = Cleaner().clean(log, now_ms=NOW)
        cleaned = [(*as_tuple(r), r.offset) for r in contents(log)]
    assert read_offsets(os.path.join(segment_dir, CHECKPOINT_FILE)) == {("topic", 0): result.end_offset}
    with Log.open(segment_dir, COMPACT) as log:
        assert [(*as_tuple(r), r.offset) for r in contents(log)] == cleaned
        check_against(log, appended, expected_offsets(appended, result.end_offset))
        assert Cleaner().first_dirty_offset(log) == result.end_offset
        assert not Cleaner().clean(log, now_ms=NOW).changed


def test_offset_for_timestamp_and_get_after_clean(log: Log) -> None:
    for i in range(10):
        log.append([(b"k%d" % (i % 4), b"%d" % i)], timestamp=NOW + 100 * i)
        log.roll()
    Cleaner().clean(log, now_ms=NOW)
    # Offsets 0..5 are superseded (keys k0, k1 at 4, 5, then k0..k3 at 6..9 ... ): the survivors are 6..9.
    assert [r.offset for r in contents(log)] == [6, 7, 8, 9]
    assert log.offset_for_timestamp(NOW) == (NOW + 600, 6)
    assert log.offset_for_timestamp(NOW + 650) == (NOW + 700, 7)
    assert log.offset_for_timestamp(NOW + 901) is None
    assert log.get(3) is None and log.get(7) is not None
    assert log.read(2).records[0].offset == 6  # a read in a gap serves the next record


def test_only_the_part_below_the_high_watermark_is_cleaned(log: Log) -> None:
    for i in range(6):
        log.append([(b"k", b"%d" % i)], timestamp=NOW)
        log.roll()
    log.high_watermark = 3
    result = Cleaner().clean(log, now_ms=NOW)
    assert result.end_offset == 3
    assert [r.offset for r in contents(log)] == [2, 3, 4, 5]


def test_min_compaction_lag_keeps_recent_segments_out(segment_dir: str) -> None:
    with Log.open(segment_dir, {**COMPACT, "min.compaction.lag.ms": 1000}) as log:
        for i in range(4):
            log.append([(b"k", b"%d" % i)], timestamp=NOW + 1000 * i)
            log.roll()
        result = Cleaner().clean(log, now_ms=NOW + 2500)  # segments of NOW and NOW+1000 are old enough
        assert result.end_offset == 2
        assert [r.offset for r in contents(log)] == [1, 2, 3]


# -- producers, transactions, records without keys -------------------------------------


def test_the_last_batch_of_a_producer_stays_empty_until_it_expires(segment_dir: str) -> None:
    def build(log: Log) -> None:
        log.append_batch(
            build_batch([(b"k", b"old")], timestamp=NOW, producer_id=5, producer_epoch=0, base_sequence=0)
        )
        log.append_batch(
            build_batch([(b"j", b"x")], timestamp=NOW, producer_id=6, producer_epoch=0, base_sequence=0)
        )
        log.roll()
        log.append([(b"k", b"new")], timestamp=NOW)
        log.append([(b"j", b"y")], timestamp=NOW)
        log.roll()

    with Log.open(segment_dir, COMPACT) as log:
        build(log)
        Cleaner(producer_expiration_ms=DAY).clean(log, now_ms=NOW + 1000)
        found = batches(log)
        producer = [b for b in found if b.producer_id == 5]
        assert len(producer) == 1 and producer[0].record_count == 0
        assert (producer[0].base_offset, producer[0].last_offset, producer[0].base_sequence) == (0, 0, 0)
        assert [r.offset for r in contents(log)] == [2, 3]
        assert [b.producer_id for b in found if b.record_count == 0] == [5, 6]  # both producers' last batches

    with Log.open(segment_dir + "-expired", COMPACT) as log:
        build(log)
        Cleaner(producer_expiration_ms=DAY).clean(log, now_ms=NOW + DAY)  # both producers expired
        assert [b.record_count for b in batches(log)] == [1, 1]


def test_transactional_batches_are_kept_whole_and_shadow_nothing(log: Log) -> None:
    log.append([(b"k", b"before")], timestamp=NOW)
    log.append_batch(
        build_batch(
            [(b"k", b"in a transaction")],
            timestamp=NOW,
            producer_id=9,
            producer_epoch=0,
            base_sequence=0,
            transactional=True,
        )
    )
    log.append([(b"k", b"after")], timestamp=NOW)
    log.roll()
    log.append([(b"x", b"1")], timestamp=NOW)
    log.roll()
    Cleaner().clean(log, now_ms=NOW)
    assert [(r.offset, r.value) for r in contents(log)] == [
        (1, b"in a transaction"),
        (2, b"after"),
        (3, b"1"),
    ]


def test_a_compacted_log_refuses_records_without_a_key(segment_dir: str) -> None:
    with Log.open(segment_dir, COMPACT) as log:
        for records in ([b"no key"], [(None, b"v")], [(b"k", b"v"), Record(key=None, value=b"w")]):
            with pytest.raises(
                InvalidRecordError, match=r"give every record a key, or change cleanup\.policy"
            ):
                log.append(records)
        for codec in ("none", "gzip"):
            with pytest.raises(InvalidRecordError, match="without a key"):
                log.append_batch(build_batch([(b"k", b"v"), (None, b"w")], compression=codec))
        assert log.log_end_offset == 0
        assert log.append([(b"k", b"v")]).last_offset == 0
        assert log.append_batch(build_batch([(b"k", None)], compression="zstd")).last_offset == 1
    with Log.open(segment_dir + "-delete", {"cleanup.policy": "delete"}) as log:
        assert log.append([b"no key"]).last_offset == 0
        assert log.append_batch(build_batch([(None, b"w")])).last_offset == 1


def test_records_without_keys_written_before_compaction_are_dropped(segment_dir: str) -> None:
    with Log.open(segment_dir, {"cleanup.policy": "delete", "segment.ms": SEGMENT_MS}) as log:
        log.append([b"keyless", (b"k", b"v")], timestamp=NOW)
        log.roll()
        log.config = log.config.with_overrides({"cleanup.policy": "compact"})
        log.append([(b"j", b"w")], timestamp=NOW)
        result = Cleaner().clean(log, now_ms=NOW)
        assert result.keyless_removed == 1
        assert [(r.offset, r.key) for r in contents(log)] == [(1, b"k"), (2, b"j")]


# -- the clean itself --------------------------------------------------------------


def test_a_small_offset_map_cleans_in_several_passes(log: Log) -> None:
    appended = fill(log, random.Random(4), 45, keys=b"abcdefghijklmnop")
    cleaner = Cleaner(max_map_keys=1)
    ends = []
    for _ in range(40):
        result = cleaner.clean(log, now_ms=NOW)
        ends.append(result.end_offset)
        if result.end_offset == log.active_segment.base_offset:
            break
    assert len(ends) > 2 and ends == sorted(ends)
    check_against(log, appended, expected_offsets(appended, ends[-1]))


def test_groups_fit_segment_bytes_and_merge_small_segments(segment_dir: str) -> None:
    with Log.open(segment_dir, {**COMPACT, "segment.bytes": 600}) as log:
        for i in range(40):
            log.append([(b"k%d" % (i % 5), bytes(40))], timestamp=NOW)
            if i % 2:
                log.roll()
        before = len(log.segments)
        Cleaner().clean(log, now_ms=NOW)
        assert len(log.segments) < before
        assert all(s.size <= 600 for s in log.segments.values())
        for segment in log.segments.values():
            segment.verify_indexes()


def test_progress_reaches_the_total(log: Log) -> None:
    fill(log, random.Random(5), 20)
    calls: list[tuple[int, int]] = []
    Cleaner().clean(log, now_ms=NOW, progress=lambda done, total: calls.append((done, total)))
    assert calls and calls[-1][0] == calls[-1][1]
    assert [done for done, _ in calls] == sorted(done for done, _ in calls)


def test_a_group_changed_by_retention_before_its_swap_is_dropped(log: Log) -> None:
    for i in range(6):
        log.append([(b"k", b"%d" % i)], timestamp=NOW)
        log.roll()

    class Racing(Cleaner):
        def _swap(self, log: Log, group: Any, writer: Any) -> Any:
            log.delete_records(2)  # retention removes the group's first segments meanwhile
            return super()._swap(log, group, writer)

    result = Racing().clean(log, now_ms=NOW)
    assert not result.changed and log.log_start_offset == 2
    assert not [n for n in os.listdir(log.path) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert [r.offset for r in contents(log)] == [2, 3, 4, 5]
    assert Cleaner().clean(log, now_ms=NOW).changed
    assert [r.offset for r in contents(log)] == [5]


def test_a_segment_deleted_while_being_read_stops_the_clean(log: Log) -> None:
    for i in range(6):
        log.append([(b"k", b"%d" % i)], timestamp=NOW)
        log.roll()

    def meanwhile(done: int, total: int) -> None:
        if log.log_start_offset == 0:
            log.delete_records(2)

    with pytest.raises(ClosedError):
        Cleaner().clean(log, now_ms=NOW, progress=meanwhile)
    assert not [n for n in os.listdir(log.path) if n.endswith((".cleaned", ".swap", ".deleted"))]
    Cleaner().clean(log, now_ms=NOW)
    assert [r.offset for r in contents(log)] == [5]


def test_a_read_in_progress_keeps_its_bytes_across_the_swap(log: Log) -> None:
    for i in range(4):
        log.append([(b"k", b"%d" % i)], timestamp=NOW)
        log.roll()
    read = log.read(0)
    Cleaner().clean(log, now_ms=NOW)
    assert [r.value for r in read.records] == [b"0"]  # the old segment is closed, its view is not
    assert [r.offset for r in contents(log)] == [3]


def test_record_bounds_walk_a_records_section() -> None:
    batch = next(parse_batches(build_batch([(b"a", b"x" * 70), (b"bb", None), (None, b"")], timestamp=1)))
    section = batch.records_section()
    bounds = record_bounds(section, batch.record_count)
    assert len(bounds) == 4 and bounds[0] == 0 and bounds[-1] == len(section)
    # Each record's key and value (as the C decoder finds them) lie inside its bounds.
    columns = batch.columns()
    for i in range(batch.record_count):
        for position, length in (
            (columns.key_positions[i], columns.key_lengths[i]),
            (columns.value_positions[i], columns.value_lengths[i]),
        ):
            if length >= 0:
                assert bounds[i] < position and position + length <= bounds[i + 1]
    # Record sizes by hand: length varint, attributes, timestamp and offset deltas, key, value, headers.
    first = 2 + 1 + 1 + 1 + 1 + 1 + 2 + 70 + 1  # a 2-byte length (78) and value length (70)
    second = 1 + 1 + 1 + 1 + 1 + 2 + 1 + 1  # a null value
    third = 1 + 1 + 1 + 1 + 1 + 1 + 1  # a null key, an empty value
    assert [bounds[i + 1] - bounds[i] for i in range(3)] == [first, second, third]
    with pytest.raises(CorruptRecordError):
        record_bounds(section, batch.record_count - 1)  # the section holds more than that


def test_dirty_ratio_and_needs_cleaning(log: Log) -> None:
    cleaner = Cleaner()
    assert cleaner.dirty_ratio(log) == 0 and not cleaner.needs_cleaning(log)
    for i in range(4):
        log.append([(b"k", b"%d" % i)], timestamp=NOW)
        log.roll()
    assert cleaner.dirty_ratio(log) == 1 and cleaner.needs_cleaning(log)
    cleaner.clean(log, now_ms=NOW)
    assert cleaner.dirty_ratio(log) == 0 and not cleaner.needs_cleaning(log)
    log.append([(b"j", None)], timestamp=NOW)
    log.roll()
    ratio = cleaner.dirty_ratio(log)
    assert 0 < ratio < 1
    log.config = log.config.with_overrides({"min.cleanable.dirty.ratio": ratio + 0.01})
    assert not cleaner.needs_cleaning(log, NOW)
    log.config = log.config.with_overrides({"min.cleanable.dirty.ratio": ratio})
    assert cleaner.needs_cleaning(log, NOW)
    cleaner.clean(log, now_ms=NOW)
    horizon = NOW + DAY
    assert not cleaner.needs_cleaning(log, horizon - 1)
    assert cleaner.needs_cleaning(log, horizon)  # the tombstone's delete horizon passed
    assert Cleaner().needs_cleaning(log, horizon)  # a new cleaner reads horizons from the batches


# -- the Store ---------------------------------------------------------------------


def test_store_compact_now_and_the_scheduler(tmp_path: Any) -> None:
    with Store(str(tmp_path), scheduler=False) as store:
        store.create_topic("kv", 2, {"cleanup.policy": "compact", "segment.ms": SEGMENT_MS})
        store.create_topic("plain", 1)
        for partition in range(2):
            log = store.log("kv", partition)
            for i in range(5):
                log.append([(b"k", b"%d" % i)], timestamp=int(time.time() * 1000))
                log.roll()
        results = store.compact_now("kv")
        assert sorted(results) == [("kv", 0), ("kv", 1)] and all(r.changed for r in results.values())
        assert read_offsets(os.path.join(str(tmp_path), CHECKPOINT_FILE)) == {("kv", 0): 5, ("kv", 1): 5}
        assert not os.path.exists(os.path.join(store.log("kv", 0).path, CHECKPOINT_FILE))
        again = store.compact_now()
        assert sorted(again) == [("kv", 0), ("kv", 1)] and not any(r.changed for r in again.values())
        assert store.run_cleaner() == {}
        store.log("kv", 1).append([(b"k", b"again")])
        store.log("kv", 1).roll()
        assert list(store.run_cleaner()) == [("kv", 1)]
        assert [r.value for r in contents(store.log("kv", 1))] == [b"again"]
        with pytest.raises(UnknownTopicError, match="unknown topic"):
            store.compact_now("nope")


def test_store_scheduler_compacts_due_logs(tmp_path: Any) -> None:
    with Store(str(tmp_path), scheduler=True, scheduler_interval_ms=5, cleaner_backoff_ms=5) as store:
        store.create_topic("kv", 1, {"cleanup.policy": "compact", "segment.ms": SEGMENT_MS})
        log = store.log("kv", 0)
        for i in range(4):
            log.append([(b"k", b"%d" % i)])
            log.roll()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and [r.offset for r in contents(log)] != [3]:
            time.sleep(0.01)
        assert [r.offset for r in contents(log)] == [3]


def test_compact_delete_still_applies_retention(segment_dir: str) -> None:
    with Log.open(segment_dir, {**COMPACT, "cleanup.policy": "compact,delete", "retention.ms": 1000}) as log:
        old = int(time.time() * 1000) - 10_000
        for i in range(3):
            log.append([(b"k%d" % i, b"v")], timestamp=old)
            log.roll()
        for value in (b"first", b"recent"):  # compaction keeps only the second of these
            log.append([(b"k", value)])
            log.roll()
        log.append([(b"other", b"active")])
        assert log.delete_old_segments() == 3  # retention drops the old segments ...
        assert [r.value for r in contents(log)] == [b"first", b"recent", b"active"]
        assert Cleaner().clean(log).records_removed == 1  # ... and compaction the superseded record
        assert [r.value for r in contents(log)] == [b"recent", b"active"]
