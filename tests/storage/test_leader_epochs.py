"""The leader-epoch cache (logstore.storage.epochs) and its use by the Log (KIP-101, KIP-279).

The cache: Kafka's file format byte for byte, reloads, Kafka's ``assign``,
``endOffsetFor``, ``truncateFromEnd`` and ``truncateFromStart``, against a
plain model under hypothesis. The Log: batches stamped with their leader
epoch survive a restart (the loader's epoch check accepts them), a follower
stores the leader's bytes unchanged, truncation and log-start moves keep the
cache in step.
"""

from __future__ import annotations

import os
import pathlib
import shutil
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.errors import CorruptRecordError, InvalidArgumentError, RecordTooLargeError
from logstore.records import RecordBatch, build_batch
from logstore.storage.checkpoints import CorruptCheckpointError
from logstore.storage.cleaner import Cleaner
from logstore.storage.epochs import LEADER_EPOCH_FILE, LeaderEpochFileCache
from logstore.storage.log import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_FILE, Log

pytestmark = pytest.mark.unit

SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
SEGMENT_MS = 2**62  # rolls only by size


def file_text(directory: str | pathlib.Path) -> str:
    return pathlib.Path(directory, LEADER_EPOCH_FILE).read_text()


def cache_with(directory: str | pathlib.Path, *entries: tuple[int, int]) -> LeaderEpochFileCache:
    cache = LeaderEpochFileCache(str(directory))
    for epoch, start in entries:
        cache.assign(epoch, start)
    return cache


# -- the file ------------------------------------------------------------------------


def test_file_is_kafkas_checkpoint_format(tmp_path: pathlib.Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (3, 120))
    assert file_text(tmp_path) == "0\n2\n0 0\n3 120\n"
    assert sorted(os.listdir(tmp_path)) == [LEADER_EPOCH_FILE]  # no .tmp left behind
    cache.clear()
    assert file_text(tmp_path) == "0\n0\n"


def test_missing_file_is_empty_and_no_change_writes_nothing(tmp_path: pathlib.Path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path))
    assert (cache.entries, cache.latest_epoch) == ([], -1)
    cache.truncate_from_end(0)
    cache.truncate_from_start(10)
    cache.clear()
    assert os.listdir(tmp_path) == []  # a log without replication gets no epoch file


def test_reload_round_trips_and_ignores_a_torn_tmp(tmp_path: pathlib.Path) -> None:
    cache_with(tmp_path, (0, 0), (2, 40), (7, 41))
    (tmp_path / (LEADER_EPOCH_FILE + ".tmp")).write_text("0\n9\n1")  # a crash mid-write
    reloaded = LeaderEpochFileCache(str(tmp_path))
    assert reloaded.entries == [(0, 0), (2, 40), (7, 41)] and reloaded.latest_epoch == 7


def test_load_folds_conflicting_entries_as_kafka_does(tmp_path: pathlib.Path) -> None:
    # Kafka loads a checkpoint by assigning each entry: a later entry removes conflicting earlier ones.
    (tmp_path / LEADER_EPOCH_FILE).write_text("0\n3\n1 10\n2 5\n4 20\n")
    assert LeaderEpochFileCache(str(tmp_path)).entries == [(2, 5), (4, 20)]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("1\n0\n", "version"),
        ("0\nx\n", "count"),
        ("0\n2\n0 0\n", "count says 2"),
        ("0\n1\n0 0 0\n", "fields"),
        ("0\n1\nzero 0\n", "line 3"),
        ("0\n2\n0 0\n-1 5\n", "line 4"),
        ("0\n", "missing"),
    ],
)
def test_malformed_file_raises(tmp_path: pathlib.Path, text: str, named: str) -> None:
    (tmp_path / LEADER_EPOCH_FILE).write_text(text)
    with pytest.raises(CorruptCheckpointError, match=named) as raised:
        LeaderEpochFileCache(str(tmp_path))
    assert LEADER_EPOCH_FILE in str(raised.value) and "replica" in str(raised.value)


# -- assign -----------------------------------------------------------------------------


def test_assign_same_epoch_changes_nothing(tmp_path: pathlib.Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 10))
    os.unlink(tmp_path / LEADER_EPOCH_FILE)
    cache.assign(1, 15)
    assert cache.entries == [(0, 0), (1, 10)] and not os.path.exists(tmp_path / LEADER_EPOCH_FILE)


def test_assign_same_epoch_earlier_start_moves_it(tmp_path: pathlib.Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (1, 10))
    cache.assign(1, 5)
    assert cache.entries == [(0, 0), (1, 5)] and file_text(tmp_path) == "0\n2\n0 0\n1 5\n"


def test_assign_removes_conflicting_later_entries(tmp_path: pathlib.Path) -> None:
    cache = cache_with(tmp_path, (0, 0), (2, 10), (4, 20))
    cache.assign(3, 15)  # a lower epoch: epoch 4 goes
    assert cache.entries == [(0, 0), (2, 10), (3, 15)]
    cache.assign(5, 10)  # a new epoch starting no later than others: they go
    assert cache.entries == [(0, 0), (5, 10)]
    assert LeaderEpochFileCache(str(tmp_path)).entries == [(0, 0), (5, 10)]


def test_assign_refuses_negative_entries(tmp_path: pathlib.Path) -> None:
    cache = LeaderEpochFileCache(str(tmp_path))
    for epoch, start in [(-1, 0), (0, -1)]:
        with pytest.raises(InvalidArgumentError):
            cache.assign(epoch, start)
    assert cache.entries == []


# -- end offsets, epochs of offsets -----------------------------------------------------


def test_end_offset_for_kip_279_cases(tmp_path: pathlib.Path) -> None:
    cache = cache_with(tmp_path, (2, 10), (4, 20), (7, 30))
    assert cache.end_offset_for(7, 99) == (7, 99)  # the latest: the log end
    assert cache.end_offset_for(4, 99) == (4, 30)
    assert cache.end_offset_for(5, 99) == (4, 30)  # an epoch without batches: the one before it
    assert cache.end_offset_for(0, 99) == (0, 10)  # below the first: Kafka keeps the request's epoch
    assert cache.end_offset_for(8, 99) == (-1, -1)  # above the latest
    assert cache.end_offset_for(-1, 99) == (-1, -1)  # undefined
    cache.clear()
    assert cache.end_offset_for(0, 99) == (-1, -1)  # an empty cache


def test_epoch_for_offset(tmp_path: pathlib.Path) -> None:
    cache = cache_with(tmp_path, (2, 10), (4, 20))
    assert [cache.epoch_for_offset(o) for o in (0, 9, 10, 19, 20, 1000)] == [-1, -1, 2, 2, 4, 4]


def end_offset_oracle(entries: list[tuple[int, int]], requested: int, leo: int) -> tuple[int, int]:
    """KIP-279 from its definition, by linear search."""
    if requested == -1 or not entries or requested > entries[-1][0]:
        return -1, -1
    if requested == entries[-1][0]:
        return requested, leo
    later = [start for epoch, start in entries if epoch > requested]
    earlier = [epoch for epoch, _ in entries if epoch <= requested]
    return (earlier[-1] if earlier else requested), later[0]


operation = st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
    st.tuples(st.just("end"), st.integers(-1, 70)),
    st.tuples(st.just("start"), st.integers(0, 70)),
    st.tuples(st.just("clear")),
)


def model_apply(entries: list[tuple[int, int]], op: tuple[Any, ...]) -> list[tuple[int, int]]:
    """Kafka's semantics, written plainly."""
    if op[0] == "assign":
        _, epoch, start = op
        if entries and entries[-1][0] == epoch and entries[-1][1] <= start:
            return entries
        kept = list(entries)
        while kept and (kept[-1][0] >= epoch or kept[-1][1] >= start):
            kept.pop()
        return [*kept, (epoch, start)]
    if op[0] == "end":
        return entries if op[1] < 0 else [e for e in entries if e[1] < op[1]]
    if op[0] == "start":
        below = [e for e in entries if e[1] <= op[1]]
        return [(below[-1][0], op[1]), *entries[len(below) :]] if below else entries
    return []


@SETTINGS
@given(ops=st.lists(operation, max_size=25), requested=st.integers(-1, 14), leo=st.integers(60, 80))
def test_cache_matches_model_and_reloads(tmp_path: pathlib.Path, ops: list[tuple[Any, ...]],
                                         requested: int, leo: int) -> None:  # fmt: skip
    directory = tmp_path / "p"
    shutil.rmtree(directory, ignore_errors=True)
    directory.mkdir()
    cache, model = LeaderEpochFileCache(str(directory)), []
    actions = {"assign": cache.assign, "end": cache.truncate_from_end, "start": cache.truncate_from_start}
    for op in ops:
        if op[0] == "clear":
            cache.clear()
        else:
            actions[op[0]](*op[1:])
        model = model_apply(model, op)
        assert cache.entries == model
        epochs, starts = [e for e, _ in model], [s for _, s in model]
        assert epochs == sorted(set(epochs)) and starts == sorted(set(starts))
    assert cache.end_offset_for(requested, leo) == end_offset_oracle(model, requested, leo)
    if os.path.exists(directory / LEADER_EPOCH_FILE):
        assert LeaderEpochFileCache(str(directory)).entries == model


def test_truncate_from_start_follows_kafka(tmp_path: pathlib.Path) -> None:
    cache = cache_with(tmp_path, (2, 6), (3, 8), (4, 11))
    cache.truncate_from_start(5)  # before the first entry: nothing
    assert cache.entries == [(2, 6), (3, 8), (4, 11)]
    cache.truncate_from_start(9)  # inside epoch 3: it now starts at 9
    assert cache.entries == [(3, 9), (4, 11)]
    cache.truncate_from_start(11)  # exactly at epoch 4's start: it stays
    assert cache.entries == [(4, 11)]
    cache.truncate_from_end(11)
    assert cache.entries == [] and file_text(tmp_path) == "0\n0\n"


# -- the Log ------------------------------------------------------------------------


def batch(count: int, tag: str = "v") -> bytes:
    return build_batch([f"{tag}{i}".encode() * 10 for i in range(count)], timestamp=1_000)


def all_batches(log: Log) -> list[RecordBatch]:
    out: list[RecordBatch] = []
    offset = log.log_start_offset
    for _ in range(10_000):
        if offset >= log.log_end_offset:
            break
        read = log.read(offset, 1 << 30, upto="log_end")
        out += read.batches
        offset = read.batches[-1].next_offset
    return out


def values(log: Log) -> list[bytes | None]:
    return [r.value for b in all_batches(log) for r in b.records if r.offset >= log.log_start_offset]


def leader_log(path: str, config: dict[str, Any] | None = None) -> Log:
    """A log whose batches carry epochs 0, 0, 2, 2, 5 (30 records), over several segments."""
    log = Log.open(path, {"segment.bytes": 700, "segment.ms": SEGMENT_MS, **(config or {})})
    for epoch in (0, 0, 2, 2, 5):
        log.append_batch(batch(6, f"e{epoch}-"), leader_epoch=epoch)
    return log


def test_append_batch_stamps_epochs_and_records_their_starts(tmp_path: pathlib.Path) -> None:
    with Log.open(str(tmp_path / "t-0")) as log:
        for epoch in (0, 0, 2):
            log.append_batch(batch(3), leader_epoch=epoch)
        assert log.epochs.entries == [(0, 0), (2, 6)] and log.latest_epoch == 2 and log.leader_epoch_max == 2
        assert [b.partition_leader_epoch for b in all_batches(log)] == [0, 0, 2]
        assert file_text(log.path) == "0\n2\n0 0\n2 6\n"
        assert log.end_offset_for_epoch(0) == (0, 6) and log.end_offset_for_epoch(2) == (2, 9)


def test_reopen_keeps_every_batch_with_an_epoch(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "t-0")
    with leader_log(path) as log:
        expected = values(log)
        assert len(log.segments) > 2
    with Log.open(path) as log:  # clean: the reads check epochs against the file's latest
        assert values(log) == expected and log.truncated_bytes == 0
    os.unlink(os.path.join(path, RECOVERY_POINT_FILE))  # an unclean shutdown rescans every segment
    os.unlink(os.path.join(path, CLEAN_SHUTDOWN_FILE))
    with Log.open(path) as log:
        assert values(log) == expected and log.truncated_bytes == 0
        assert log.epochs.entries == [(0, 0), (2, 12), (5, 24)]


def test_without_its_epoch_file_a_replicated_log_looks_damaged(tmp_path: pathlib.Path) -> None:
    """Why the file is written before the batches: the scan's epoch range is the file's latest."""
    path = str(tmp_path / "t-0")
    leader_log(path).close()
    os.unlink(os.path.join(path, LEADER_EPOCH_FILE))
    os.unlink(os.path.join(path, RECOVERY_POINT_FILE))
    os.unlink(os.path.join(path, CLEAN_SHUTDOWN_FILE))
    with Log.open(path) as log:
        assert log.truncated_bytes > 0  # epochs above -1 are refused: later segments cut, the first damaged
        with pytest.raises(CorruptRecordError):
            log.read(0)


def test_load_drops_an_epoch_whose_batch_never_landed(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "t-0")
    with leader_log(path) as log:
        log.assign_epoch(9)  # a new leader that crashes before its first batch
    with Log.open(path) as log:
        assert log.epochs.entries == [(0, 0), (2, 12), (5, 24)]
        log.append_batch(batch(1), leader_epoch=6)
        assert log.epochs.entries[-1] == (6, 30)


def test_stale_or_missing_epochs_are_refused_once_replicated(tmp_path: pathlib.Path) -> None:
    with leader_log(str(tmp_path / "t-0")) as log:
        for stale in (4, -1):
            with pytest.raises(InvalidArgumentError, match="follow epoch 5"):
                log.append_batch(batch(1), leader_epoch=stale)
        assert log.log_end_offset == 30
        log.append([b"embedded"])  # the record API joins the latest epoch
        assert all_batches(log)[-1].partition_leader_epoch == 5 and log.epochs.entries[-1] == (5, 24)


def test_assign_epoch_starts_an_epoch_at_the_log_end(tmp_path: pathlib.Path) -> None:
    with leader_log(str(tmp_path / "t-0")) as log:
        log.assign_epoch(8)
        log.assign_epoch(8)  # the latest again: nothing
        assert log.epochs.entries[-1] == (8, 30) and log.leader_epoch_max == 8
        assert log.end_offset_for_epoch(5) == (5, 30)  # epoch 5 ends where 8 begins, before any append
        with pytest.raises(InvalidArgumentError, match="follow epoch 8"):
            log.assign_epoch(7)
        log.append_batch(batch(2), leader_epoch=8)
        assert log.epochs.entries[-1] == (8, 30) and log.end_offset_for_epoch(8) == (8, 32)


def test_a_log_without_replication_is_unchanged(tmp_path: pathlib.Path) -> None:
    with Log.open(str(tmp_path / "t-0"), {"message.timestamp.type": "LogAppendTime"}) as log:
        log.append_batch(batch(2))
        log.append([b"x"])
        assert [b.partition_leader_epoch for b in all_batches(log)] == [-1, -1]
        assert LEADER_EPOCH_FILE not in os.listdir(log.path) and log.latest_epoch == -1


def segment_bytes(log: Log) -> dict[int, bytes]:
    return {base: bytes(segment.view()) for base, segment in log.segments.items()}


def replicate(leader: Log, follower: Log, max_bytes: int = 1 << 30) -> None:
    for _ in range(10_000):
        if follower.log_end_offset >= leader.log_end_offset:
            break
        follower.append_as_follower(leader.read(follower.log_end_offset, max_bytes, upto="log_end").view)


def test_follower_stores_the_leaders_bytes(tmp_path: pathlib.Path) -> None:
    config = {"segment.bytes": 700, "segment.ms": SEGMENT_MS}
    with leader_log(str(tmp_path / "l-0")) as leader, Log.open(str(tmp_path / "f-0"), config) as follower:
        replicate(leader, follower, max_bytes=1)  # one batch at a time: rolls as the leader did
        assert segment_bytes(follower) == segment_bytes(leader)
        assert follower.epochs.entries == leader.epochs.entries == [(0, 0), (2, 12), (5, 24)]
        assert follower.leader_epoch_max == 5
        assert file_text(follower.path) == file_text(leader.path)
    with Log.open(str(tmp_path / "f-0")) as follower:
        assert follower.log_end_offset == 30 and len(values(follower)) == 30


def test_follower_takes_many_batches_at_once(tmp_path: pathlib.Path) -> None:
    with leader_log(str(tmp_path / "l-0")) as leader, Log.open(str(tmp_path / "f-0")) as follower:
        replicate(leader, follower)
        assert values(follower) == values(leader)
        assert follower.epochs.entries == [(0, 0), (2, 12), (5, 24)]
        assert follower.append_as_follower(b"").first_offset == 30 and follower.log_end_offset == 30


def test_follower_refuses_batches_that_do_not_fit(tmp_path: pathlib.Path) -> None:
    with leader_log(str(tmp_path / "l-0")) as leader, Log.open(str(tmp_path / "f-0")) as follower:
        replicate(leader, follower)
        with pytest.raises(InvalidArgumentError, match="log end offset 30"):
            follower.append_as_follower(build_batch([b"x"], base_offset=29, partition_leader_epoch=5))
        with pytest.raises(InvalidArgumentError, match="log end offset 30"):  # a gap in a dense log
            follower.append_as_follower(build_batch([b"x"], base_offset=31, partition_leader_epoch=5))
        with pytest.raises(InvalidArgumentError, match="follow epoch 5"):
            follower.append_as_follower(build_batch([b"x"], base_offset=30, partition_leader_epoch=3))
        with pytest.raises(RecordTooLargeError):
            big = build_batch([b"x" * 2_000_000], base_offset=30, partition_leader_epoch=5)
            follower.append_as_follower(big)
        assert follower.log_end_offset == 30 and follower.epochs.entries[-1] == (5, 24)


def test_compacted_follower_takes_offset_gaps(tmp_path: pathlib.Path) -> None:
    with Log.open(str(tmp_path / "f-0"), {"cleanup.policy": "compact"}) as follower:
        follower.append_as_follower(build_batch([(b"k", b"a")], base_offset=3, partition_leader_epoch=1))
        follower.append_as_follower(build_batch([(b"k", b"b")], base_offset=9, partition_leader_epoch=4))
        assert follower.epochs.entries == [(1, 3), (4, 9)] and follower.log_end_offset == 10


def test_truncate_to_drops_later_epochs(tmp_path: pathlib.Path) -> None:
    with leader_log(str(tmp_path / "t-0")) as log:
        log.truncate_to(20)
        assert log.epochs.entries == [(0, 0), (2, 12)] and file_text(log.path) == "0\n2\n0 0\n2 12\n"
        log.truncate_to(12)
        assert log.epochs.entries == [(0, 0)]
        log.assign_epoch(3)  # a leader that appended nothing in its epoch
        assert log.epochs.entries == [(0, 0), (3, 12)]
        log.truncate_to(50)  # beyond the end: Kafka still drops the entry past the log
        assert log.epochs.entries == [(0, 0)]
        log.append_batch(batch(1), leader_epoch=3)
        assert log.end_offset_for_epoch(0) == (0, 12)


def test_truncating_below_the_log_start_clears_the_epochs(tmp_path: pathlib.Path) -> None:
    with leader_log(str(tmp_path / "t-0")) as log:
        log.delete_records(20)
        log.truncate_to(10)
        assert log.epochs.entries == [] and (log.log_start_offset, log.log_end_offset) == (10, 10)


def test_truncate_fully_and_start_at_restarts_an_empty_log(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "t-0")
    with leader_log(path) as log:
        log.high_watermark = 5
        assert log.truncate_fully_and_start_at(100) > 0
        assert log.epochs.entries == [] and file_text(path) == "0\n0\n"
        state = (log.log_start_offset, log.high_watermark, log.log_end_offset, log.recovery_point)
        assert state == (100, 100, 100, 100)
        log.append_as_follower(build_batch([b"x"], base_offset=100, partition_leader_epoch=7))
        assert log.epochs.entries == [(7, 100)]
        with pytest.raises(InvalidArgumentError):
            log.truncate_fully_and_start_at(-1)
    with Log.open(path) as log:
        assert (log.log_start_offset, log.log_end_offset, values(log)) == (100, 101, [b"x"])


def test_delete_records_moves_the_first_epochs_start(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "t-0")
    with leader_log(path) as log:
        log.delete_records(14)
        assert log.epochs.entries == [(2, 14), (5, 24)] and log.end_offset_for_epoch(1) == (1, 14)
    with Log.open(path) as log:
        assert log.log_start_offset == 14 and log.epochs.entries == [(2, 14), (5, 24)]


def test_compacted_replicated_log_stays_readable(tmp_path: pathlib.Path) -> None:
    path = str(tmp_path / "t-0")
    config = {"cleanup.policy": "compact", "segment.bytes": 300, "segment.ms": SEGMENT_MS}
    with Log.open(path, config) as log:
        for i, epoch in enumerate([0, 0, 1, 1, 3, 3, 3, 4]):
            log.append_batch(build_batch([(b"k%d" % (i % 2), b"v%d" % i)]), leader_epoch=epoch)
        assert Cleaner().clean(log).segments_replaced > 0
        kept = [(r.key, r.value) for b in all_batches(log) for r in b.records]
        assert len(kept) < 8 and all(s.leader_epoch_max == 4 for s in log.segments.values())
    os.unlink(os.path.join(path, RECOVERY_POINT_FILE))
    os.unlink(os.path.join(path, CLEAN_SHUTDOWN_FILE))
    with Log.open(path, config) as log:
        assert [(r.key, r.value) for b in all_batches(log) for r in b.records] == kept
        assert log.truncated_bytes == 0 and log.latest_epoch == 4
