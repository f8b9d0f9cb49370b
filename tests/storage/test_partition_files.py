"""PartitionFiles / list_topics: a data directory read from its files, checked against the Store's Log.

The oracle is the Store itself: ``Log.read`` (the broker's read) returns the
same whole batches, ``Log.offset_for_timestamp`` the same offsets, and the
records written are what a walk of ``PartitionFiles.read`` decodes.
"""

from __future__ import annotations

import os
import random
import shutil
import struct
import time
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore import Store
from logstore.errors import (
    InvalidArgumentError,
    LogstoreError,
    OffsetGoneError,
    OffsetOutOfRangeError,
    UnknownTopicError,
)
from logstore.records import Record, RecordBatch, build_batch
from logstore.records.batch import batches_of
from logstore.storage.log import Log
from logstore.storage.partition_files import PartitionFiles, _Segment, list_topics

pytestmark = pytest.mark.unit

SMALL = {"segment.bytes": 2048, "index.interval.bytes": 256}
# An hour ago: recent enough that segment.ms (7 days) does not roll every batch.
EPOCH_MS = int(time.time() * 1000) - 3_600_000


def _records(count: int, seed: int, first: int = 0) -> list[Record]:
    rng = random.Random(seed)
    out = []
    for i in range(first, first + count):
        key = None if i % 5 == 0 else f"k{i}".encode()
        value = None if i % 17 == 3 else bytes(rng.randrange(256) for _ in range(rng.randrange(0, 120)))
        headers = [("h", f"{i}".encode()), ("n", None)] if i % 3 == 0 else []
        # Timestamps jump about (not monotonic), as producers' clocks do.
        out.append(
            Record(
                key=key, value=value, headers=headers, timestamp=EPOCH_MS + i * 10 + rng.randrange(-25, 25)
            )
        )
    return out


def _fill(log: Log, records: list[Record], seed: int, compression: str = "none") -> None:
    """Append in batches of 1 to 20 records (the given codec), as producers would."""
    rng = random.Random(seed)
    at = 0
    while at < len(records):
        n = rng.randrange(1, 21)
        log.append_batch(build_batch(records[at : at + n], compression=compression))
        at += n


def _key(r: Any) -> tuple[Any, ...]:
    return (r.offset, r.key, r.value, tuple(r.headers), r.timestamp)


def _walk(files: PartitionFiles, start: int, max_bytes: int, scratch: bool = False) -> Iterator[Any]:
    """Every record from ``start`` by reads of ``max_bytes``, checking each read's shape."""
    offset = start
    for _ in range(100_000):
        view = files.read(offset, max_bytes, scratch=scratch)
        if view is None:
            return
        batches = batches_of(view)
        assert sum(b.size for b in batches) == len(view)  # whole batches only
        assert len(batches) == 1 or len(view) <= max_bytes
        assert batches[0].last_offset >= offset  # starts with the batch holding offset (or the next)
        for batch in batches:
            yield from (r for r in batch.records if r.offset >= offset)
        offset = batches[-1].next_offset
    raise AssertionError("the walk did not end")


@pytest.fixture
def data(tmp_path: Any) -> Iterator[tuple[str, dict[tuple[str, int], list[Record]]]]:
    """A closed data directory: plain (3 partitions, small segments), zipped (gzip + zstd), one (1 batch)."""
    path = str(tmp_path / "data")
    written: dict[tuple[str, int], list[Record]] = {}
    with Store(path, scheduler=False) as store:
        store.create_topic("plain", partitions=3, config=SMALL)
        store.create_topic("zipped", partitions=1, config=SMALL)
        store.create_topic("one", partitions=1)
        for p in range(3):
            written[("plain", p)] = _records(150 + 40 * p, seed=p)
            _fill(store.log("plain", p), written[("plain", p)], seed=p)
        zipped = _records(300, seed=9)
        _fill(store.log("zipped", 0), zipped[:150], seed=9, compression="gzip")
        _fill(store.log("zipped", 0), zipped[150:], seed=10, compression="zstd")
        written[("zipped", 0)] = zipped
        written[("one", 0)] = _records(3, seed=5)
        store.log("one", 0).append_batch(build_batch(written[("one", 0)]))
    yield path, written


def _as_written(records: list[Record], start: int = 0) -> list[tuple[Any, ...]]:
    return [(i, r.key, r.value, tuple(r.headers), r.timestamp) for i, r in enumerate(records) if i >= start]


# -- the directory -------------------------------------------------------------------


def test_list_topics_and_errors(data: Any, tmp_path: Any) -> None:
    path, _ = data
    assert list_topics(path) == {"plain": 3, "zipped": 1, "one": 1}
    with pytest.raises(LogstoreError, match="not a logstore data directory"):
        list_topics(str(tmp_path))
    with pytest.raises(UnknownTopicError, match="partitions 0 to 2"):
        PartitionFiles(path, "plain", 3)
    with pytest.raises(UnknownTopicError, match="one, plain, zipped"):
        PartitionFiles(path, "nope", 0)


def test_no_lock_taken_and_nothing_written(data: Any) -> None:
    path, _ = data
    # The owner holds the directory lock meanwhile.
    with Store(path, scheduler=False) as store, PartitionFiles(path, "plain", 1) as files:
        assert sum(1 for _ in _walk(files, 0, 1 << 20)) == store.log("plain", 1).log_end_offset
    with PartitionFiles(path, "plain", 1) as files:

        def stamps() -> dict[str, tuple[int, int]]:
            return {f: (os.stat(os.path.join(path, d, f)).st_mtime_ns, os.stat(os.path.join(path, d, f)).st_size)
                    for d in ("", "plain-1") for f in os.listdir(os.path.join(path, d))
                    if os.path.isfile(os.path.join(path, d, f))}  # fmt: skip

        before = stamps()
        list(_walk(files, 0, 500))
        files.end_offset()
        files.offset_for_timestamp(0)
        files.refresh()
        assert stamps() == before


# -- reads against what was written ----------------------------------------------------


@pytest.mark.parametrize("max_bytes", [1, 300, 4096, 1 << 20])
@pytest.mark.parametrize("topic", ["plain", "zipped", "one"])
def test_every_record_read_back(data: Any, topic: str, max_bytes: int) -> None:
    path, written = data
    for partition in range(list_topics(path)[topic]):
        records = written[(topic, partition)]
        with PartitionFiles(path, topic, partition) as files:
            assert files.log_start_offset == 0
            assert files.end_offset() == len(records)
            assert len(files._segments) >= 3 or topic == "one"
            assert [_key(r) for r in _walk(files, 0, max_bytes)] == _as_written(records)
            assert [_key(r) for r in _walk(files, 0, max_bytes, scratch=True)] == _as_written(records)
            assert files.read(len(records), max_bytes) is None
            assert files.read(len(records) + 100, max_bytes) is None


def test_reads_equal_the_logs_reads_from_every_offset(data: Any) -> None:
    """From each offset, the bytes are the broker's read's (Log.read): same batches, same limit."""
    path, written = data
    with Store(path, scheduler=False) as store:
        for topic, partition in [("plain", 0), ("zipped", 0)]:
            log = store.log(topic, partition)
            with PartitionFiles(path, topic, partition) as files:
                for offset in range(len(written[(topic, partition)])):
                    for max_bytes in (1, 700):
                        assert bytes(files.read(offset, max_bytes) or b"") == bytes(
                            log.read(offset, max_bytes).view
                        )


def test_offsets_for_timestamps_equal_the_logs(data: Any) -> None:
    path, written = data
    with Store(path, scheduler=False) as store:
        for topic, partition in [("plain", 2), ("zipped", 0), ("one", 0)]:
            log = store.log(topic, partition)
            stamps = [r.timestamp for r in written[(topic, partition)]]
            probes = [0, min(stamps), max(stamps), max(stamps) + 1, *random.Random(1).sample(stamps, 3)]
            probes += [s + 1 for s in probes]
            with PartitionFiles(path, topic, partition) as files:
                for ts in probes:
                    expected = log.offset_for_timestamp(ts)
                    assert files.offset_for_timestamp(ts) == (None if expected is None else expected[1]), ts
                with pytest.raises(InvalidArgumentError, match="earliest or latest"):
                    files.offset_for_timestamp(-2)


# -- the log start ---------------------------------------------------------------------


def test_log_start_moved_by_delete_records(data: Any) -> None:
    path, written = data
    with Store(path, scheduler=False) as store:
        store.log("plain", 0).delete_records(97)
        store.checkpoint()
        first_base = store.log("plain", 0).segments.keys()[0]
        with PartitionFiles(path, "plain", 0) as files:
            assert first_base > 0 and files.log_start_offset == 97
            with pytest.raises(OffsetGoneError, match="log starts at offset 97") as raised:
                files.read(96, 100)
            assert isinstance(raised.value, OffsetOutOfRangeError)
            assert (raised.value.offset, raised.value.log_start_offset) == (96, 97)
            assert [_key(r) for r in _walk(files, 97, 500)] == _as_written(written[("plain", 0)], 97)
            assert files.offset_for_timestamp(0) == 97


def test_retention_under_an_open_reader(data: Any) -> None:
    """Segments removed while the reader has them listed: what it holds stays readable, what it
    had not opened is reported gone."""
    path, written = data
    with Store(path, scheduler=False) as store:
        log = store.log("plain", 1)
        with PartitionFiles(path, "plain", 1) as files:
            assert files.read(0, 100) is not None  # the first segment is open now
            bases = list(log.segments.keys())
            log.delete_records(bases[3])  # segments 0..2 go; the checkpoint is not written yet
            first = files.read(0, 100)
            assert first is not None and batches_of(first)[0].base_offset == 0  # still open: still readable
            with pytest.raises(OffsetGoneError) as raised:
                files.read(bases[1] + 1, 100)  # never opened, now gone
            assert raised.value.log_start_offset == bases[3]
            assert files.log_start_offset == bases[3]
            assert [_key(r) for r in _walk(files, bases[3], 4096)] == _as_written(
                written[("plain", 1)], bases[3]
            )


def test_compaction_under_an_open_reader(tmp_path: Any) -> None:
    """The cleaner swaps segments while the reader holds some: every record read is the one
    written at its offset, offsets increase, and every record the cleaner kept is read."""
    path = str(tmp_path)
    rng = random.Random(11)
    written = [
        Record(key=b"k%d" % rng.randrange(30), value=b"v%d" % i, timestamp=EPOCH_MS + i) for i in range(900)
    ]
    with Store(path, scheduler=False) as store:
        store.create_topic("c", config={**SMALL, "cleanup.policy": "compact"})
        log = store.log("c")
        _fill(log, written, seed=11)
        with PartitionFiles(path, "c", 0) as files:
            assert files.read(0, 1) is not None  # the first segment is held open and mapped
            results = store.compact_now("c")
            assert results[("c", 0)].segments_replaced > 1
            kept = {r.offset for r in log.read(0, 1 << 30).records} | {
                r.offset for base in log.segments.keys()[1:] for r in log.read(base, 1 << 30).records
            }
            read = list(_walk(files, 0, 700))
    offsets = [r.offset for r in read]
    assert offsets == sorted(set(offsets))
    assert all((r.key, r.value) == (written[r.offset].key, written[r.offset].value) for r in read)
    assert kept <= set(offsets) and len(kept) < len(written)


def test_a_segment_swapped_between_open_and_map_is_read_without_the_new_indexes(tmp_path: Any) -> None:
    """The race the public calls cannot stage: the log opened, then the cleaner swaps the segment,
    then the indexes are mapped (they are the new segment's). The held log is read by a walk."""
    path = str(tmp_path)
    # Every other record is superseded: the cleaned segment's batches sit at other positions.
    written = [
        Record(key=b"u%d" % i if i % 2 else b"dup", value=b"v%d" % i, timestamp=EPOCH_MS + i)
        for i in range(600)
    ]
    with Store(path, scheduler=False) as store:
        store.create_topic("c", config={**SMALL, "cleanup.policy": "compact", "index.interval.bytes": 50})
        _fill(store.log("c"), written, seed=12)
        segment = _Segment(os.path.join(path, "c-0"), 0)
        segment.seal()
        segment.open()
        first_end = store.log("c").segments.keys()[1]
        store.compact_now("c")
        swapped = os.path.join(path, "c-0", f"{0:020d}.index")
        assert os.path.getsize(swapped) >= 8 * 3  # the new segment has index entries to mislead
        for offset in range(first_end):
            view = segment.read(offset, 1)
            assert view is not None
            (record,) = [r for r in RecordBatch(view).records if r.offset == offset]
            assert (record.key, record.value) == (written[offset].key, written[offset].value)
        assert segment._index_count == 0  # the swapped-in indexes were left alone
        assert (segment._map is not None) and len(segment._map) == segment.size
        segment.close()


# -- a live writer ---------------------------------------------------------------------


def test_follows_a_live_writer_across_rolls(tmp_path: Any) -> None:
    path = str(tmp_path)
    records = _records(600, seed=3)
    with Store(path, scheduler=False) as store:
        store.create_topic("live", config=SMALL)
        log = store.log("live")
        with PartitionFiles(path, "live", 0) as files:
            assert files.end_offset() == 0 and files.read(0, 100) is None
            seen: list[Any] = []
            offset = 0
            rng = random.Random(4)
            at = 0
            while at < len(records):
                n = min(rng.randrange(1, 30), len(records) - at)
                log.append_batch(build_batch(records[at : at + n]))
                at += n
                assert files.end_offset() == at
                for r in _walk(files, offset, rng.choice([1, 200, 5000])):
                    seen.append(_key(r))
                offset = at
            assert len(log.segments) > 5
            assert seen == _as_written(records)


def _copy(data: str, tmp_path: Any) -> str:
    """A copy of one data directory, to damage on purpose."""
    copy = str(tmp_path / "copy")
    shutil.copytree(data, copy)
    return copy


def _last_log(path: str) -> str:
    return os.path.join(path, sorted(n for n in os.listdir(path) if n.endswith(".log"))[-1])


def test_a_batch_being_written_is_not_served(data: Any, tmp_path: Any) -> None:
    path, written = data
    copy = _copy(path, tmp_path)
    end = len(written[("plain", 0)])
    batch = build_batch([b"x" * 500, b"y" * 500], base_offset=end)
    with PartitionFiles(copy, "plain", 0) as files:
        log_path = _last_log(files.path)
        for cut in (5, 12, 61, len(batch) - 1):
            with open(log_path, "r+b") as f:
                f.seek(0, os.SEEK_END)
                size = f.tell()
                f.write(batch[:cut])
            assert files.end_offset() == end
            assert files.read(end, 1 << 20) is None
            assert [_key(r) for r in _walk(files, end - 3, 1 << 20)] == _as_written(
                written[("plain", 0)], end - 3
            )
            os.truncate(log_path, size)
        with open(log_path, "ab") as f:
            f.write(batch)
        assert files.end_offset() == end + 2
        view = files.read(end, 1)
        assert view is not None and [r.value for r in RecordBatch(view).records] == [b"x" * 500, b"y" * 500]


def test_torn_and_stale_index_entries_cost_a_walk_not_a_wrong_answer(tmp_path: Any) -> None:
    """The active segment's preallocated index, its newest entries damaged (a torn write, or one
    rebuilt by a broker restart): reads and the end stay right."""
    path = str(tmp_path)
    records = _records(400, seed=8)
    with Store(path, scheduler=False) as store:
        store.create_topic("t", config={"index.interval.bytes": 100})
        _fill(store.log("t"), records, seed=8)
        with PartitionFiles(path, "t", 0) as files:
            index = os.path.join(files.path, f"{0:020d}.index")
            assert os.path.getsize(index) > 1 << 20  # preallocated: the segment is active
            assert files.read(200, 1) is not None  # entries read and cached by the reader
            entries = store.log("t").active_segment.offset_index.entries
            assert entries > 10
            with open(index, "r+b") as f:
                for slot in range(entries - 5, entries):
                    f.seek(slot * 8 + 4)
                    f.write(struct.pack(">I", 7 + slot))
                f.seek(entries * 8)
                f.write(struct.pack(">II", 10_000, 12))  # an entry past the end, pointing nowhere
            for offset in [*range(len(records) - 60, len(records)), 0, 1, 150]:
                view = files.read(offset, 1)
                assert view is not None
                assert RecordBatch(view).base_offset <= offset <= RecordBatch(view).last_offset
            assert files.end_offset() == len(records)
            assert [_key(r) for r in _walk(files, 0, 333)] == _as_written(records)


def test_bytes_from_bounds_what_reads_return(data: Any) -> None:
    path, written = data
    with PartitionFiles(path, "plain", 1) as files:
        sizes = [os.path.getsize(os.path.join(files.path, n)) for n in sorted(os.listdir(files.path))
                 if n.endswith(".log")]  # fmt: skip
        assert len(sizes) > 3 and files.bytes_from(0) == sum(sizes)
        end = len(written[("plain", 1)])
        for start in (0, 1, 77, end - 1, end, end + 50):
            read = 0
            offset = start
            for _ in range(end + 1):
                view = files.read(offset, 300)
                if view is None:
                    break
                read += len(view)
                offset = batches_of(view)[-1].next_offset
            assert read <= files.bytes_from(start) <= sum(sizes)
        assert files.bytes_from(end) == sizes[-1]  # the active segment, whatever it holds


def test_sequential_reads_of_the_active_segment_skip_the_index(tmp_path: Any, monkeypatch: Any) -> None:
    path = str(tmp_path)
    records = _records(500, seed=6)
    with Store(path, scheduler=False) as store:
        store.create_topic("t", config={"index.interval.bytes": 100})
        _fill(store.log("t"), records, seed=6)
        with PartitionFiles(path, "t", 0) as files:
            lookups: list[int] = []
            hint = _Segment._offset_hint

            def counted(segment: _Segment, offset: int) -> int:
                lookups.append(offset)
                return hint(segment, offset)

            monkeypatch.setattr(_Segment, "_offset_hint", counted)
            assert [_key(r) for r in _walk(files, 0, 700, scratch=True)] == _as_written(records)
            assert len(lookups) == 1  # the first read only: the others start where the last ended
            assert [_key(r) for r in _walk(files, 250, 700)] == _as_written(records, 250)
            assert len(lookups) == 2


def test_closed_reader_refuses_and_views_outlive_it(data: Any) -> None:
    path, written = data
    files = PartitionFiles(path, "plain", 0)
    view = files.read(0, 1 << 20)
    files.close()
    files.close()
    assert view is not None and RecordBatch(view).records[0].value == written[("plain", 0)][0].value
    with pytest.raises(LogstoreError, match="closed"):
        files.read(0, 1)
    with pytest.raises(InvalidArgumentError):
        PartitionFiles(path, "plain", 0).read(0, 0)


# -- properties ------------------------------------------------------------------------


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 10_000),
    segment_bytes=st.sampled_from([200, 1000, 5000, 1 << 20]),
    interval=st.sampled_from([0, 100, 4096]),
    reads=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 6000)), min_size=1, max_size=20),
)
def test_any_read_equals_the_logs(tmp_path_factory: Any, seed: int, segment_bytes: int, interval: int,
                                  reads: list[tuple[int, int]]) -> None:  # fmt: skip
    path = str(tmp_path_factory.mktemp("prop"))
    records = _records(random.Random(seed).randrange(1, 300), seed=seed)
    with Store(path, scheduler=False) as store:
        store.create_topic("t", config={"segment.bytes": segment_bytes, "index.interval.bytes": interval})
        log = store.log("t")
        _fill(log, records, seed, compression=random.Random(seed).choice(["none", "none", "lz4"]))
        with PartitionFiles(path, "t", 0) as files:
            assert files.end_offset() == len(records)
            for offset, max_bytes in reads:
                got = files.read(offset, max_bytes)
                expected = log.read(offset, max_bytes).view if offset <= len(records) else b""
                assert bytes(got or b"") == bytes(expected)
