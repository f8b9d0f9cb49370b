"""Flipped bits in sealed segments and their indexes: never served, always detected.

A log with many sealed segments is built once and closed cleanly; each trial
restores it, flips one bit (in a ``.log`` batch field, an ``.index`` or a
``.timeindex``), opens it cleanly, uncleanly (``.kafka_cleanshutdown``
deleted: the active segment is rescanned) or for a full recovery (the
recovery-point checkpoint deleted too: every segment is rescanned), and reads
every batch back.

A flipped ``.log`` bit must never be served: every read returns exactly the
bytes written, or raises CorruptRecordError (reads of the damaged segment at
or after the damaged batch), or the log ends right before the damaged batch
(a recovery truncated it there). Records may not vanish silently (a read
landing on a later batch), and no other error may surface. A flipped index
bit is detected and the index rebuilt: reads, index contents and timestamp
lookups match the undamaged log.

Each test runs all its trials and reports every failing one (file, byte, bit,
batch, open mode); the trials are a function of ``TRIAL_SEED``.
"""

from __future__ import annotations

import collections
import itertools
import os
import pathlib
import random
import struct
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from logstore import Log
from logstore.errors import CorruptRecordError, OffsetOutOfRangeError
from logstore.storage.log import RECOVERY_POINT_FILE
from tests.kit import crashkit as ck

pytestmark = [pytest.mark.crash, pytest.mark.slow]

TRIAL_SEED = 4242
BATCHES = 70  # in the prebuilt log; about 30 sealed segments
CONFIG = {"segment.bytes": 6000, "index.interval.bytes": 256, "segment.index.bytes": 65536}
RECORD_DATA_TRIALS = 60  # bits in the records section (CRC-covered)
HEADER_TRIALS = 60  # bits in CRC-covered or structural header fields (length, magic, CRC, counts...)
BASE_OFFSET_TRIALS = 40  # bits in the base offset (not CRC-covered)
LEADER_EPOCH_TRIALS = 20  # bits in the partition leader epoch (not CRC-covered)
OFFSET_INDEX_TRIALS = 40
TIME_INDEX_TRIALS = 40
MODES = ("clean", "unclean", "full recovery")
REPORT_AT_MOST = 12

# Byte ranges of a v2 batch header.
BASE_OFFSET = range(0, 8)
LEADER_EPOCH = range(12, 16)
HEADER_SIZE = 61


@dataclass(frozen=True)
class Pristine:
    """The prebuilt log: its files, batch positions, and answers of the undamaged log."""

    seq: ck.Sequence
    files: dict[str, bytes]
    batches: dict[str, list[tuple[int, int, int]]]  # .log name -> (position, size, batch number)
    time_answers: dict[int, tuple[int, int] | None]
    index_entries: dict[str, list[tuple[int, int]]]  # .index name -> entries

    @property
    def segment_of(self) -> dict[int, str]:
        """Batch number -> the .log holding it."""
        return {number: name for name, found in self.batches.items() for _, _, number in found}

    @property
    def active(self) -> str:
        return max(name for name in self.files if name.endswith(".log"))

    def sealed(self, suffix: str) -> list[str]:
        return sorted(
            name
            for name in self.files
            if name.endswith(suffix) and name[:20] != self.active[:20] and self.files[name]
        )


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Pristine:
    path = str(tmp_path_factory.mktemp("pristine") / "log-0")
    seq = ck.Sequence(TRIAL_SEED)
    with Log.open(path, CONFIG) as log:
        for n in range(BATCHES):
            spec = seq.spec(n)
            log.append(spec.records, timestamp=spec.timestamp)
        assert len(log.segments) > 20
        index_entries = {
            os.path.basename(s.offset_index.path): [
                s.offset_index.entry(i) for i in range(s.offset_index.entries)
            ]
            for s in log.segments.values()
        }
        time_answers = {t: log.offset_for_timestamp(t) for t in timestamp_probes(seq)}
    files = {name: data for name, (_, data) in ck.DirState.capture(path).files.items()}
    number_at = {seq.first_offset(n): n for n in range(BATCHES)}
    batches: dict[str, list[tuple[int, int, int]]] = {}
    for name, data in files.items():
        if name.endswith(".log"):
            at, found = 0, []
            for _ in range(len(data) // HEADER_SIZE + 1):
                if at >= len(data):
                    break
                base, length = struct.unpack_from(">qi", data, at)
                found.append((at, 12 + length, number_at[base]))
                at += 12 + length
            batches[name] = found
    return Pristine(seq, files, batches, time_answers, index_entries)


def timestamp_probes(seq: ck.Sequence) -> list[int]:
    stamps = sorted({r[4] for n in range(BATCHES) for r in ck.expected_records(seq, n)})
    return [*stamps[::5], *(s + 1 for s in stamps[::9]), stamps[0] - 1, stamps[-1] + 1]


def restore(pristine: Pristine, path: str, mode: str) -> None:
    os.makedirs(path, exist_ok=True)
    for name in os.listdir(path):
        os.unlink(os.path.join(path, name))
    for name, data in pristine.files.items():
        with open(os.path.join(path, name), "wb") as f:
            f.write(data)
    if mode != "clean":
        os.unlink(ck.marker_path(path))
    if mode == "full recovery":
        os.unlink(os.path.join(path, RECOVERY_POINT_FILE))


def flip(path: str, name: str, position: int, bit: int) -> None:
    with open(os.path.join(path, name), "r+b") as f:
        f.seek(position)
        byte = f.read(1)[0]
        f.seek(position)
        f.write(bytes([byte ^ (1 << bit)]))


@dataclass(frozen=True)
class Flip:
    name: str
    position: int
    bit: int
    mode: str
    batch: int | None = None  # the damaged batch (.log flips)

    def __str__(self) -> str:
        batch = f" (batch {self.batch})" if self.batch is not None else ""
        return f"{self.name} byte {self.position} bit {self.bit}{batch}, {self.mode} open"


def log_flip(pristine: Pristine, rng: random.Random, offsets: Callable[[int], int], names: list[str]) -> Flip:
    """A flip at a random batch of a random file, at ``offsets(batch size)`` inside the batch."""
    name = rng.choice(names)
    position, size, number = rng.choice(pristine.batches[name])
    return Flip(name, position + offsets(size), rng.randrange(8), rng.choice(MODES), number)


Problem = tuple[str, str]  # (category, detail)


def check_log_flip(pristine: Pristine, path: str, damage: Flip) -> list[Problem]:
    """Problems after a flipped .log bit (none when the damage is never served)."""
    seq = pristine.seq
    assert damage.batch is not None
    truncated_end = seq.first_offset(damage.batch)
    number_at = {seq.first_offset(n): n for n in range(BATCHES)}
    problems: list[Problem] = []
    try:
        log = Log.open(path, CONFIG)
    except Exception as exc:
        return [("open failed", f"open raised {type(exc).__name__}: {exc}")]
    try:
        end = log.log_end_offset
        if end not in (seq.end_offset(BATCHES), truncated_end):
            problems.append(
                ("log end moved", f"log end {end}: neither {seq.end_offset(BATCHES)} nor {truncated_end}")
            )
        for n in range(BATCHES):
            offset = seq.first_offset(n)
            try:
                batches = log.read(offset, max_bytes=1, upto="log_end").batches
                if not batches:
                    if not (end == truncated_end and offset >= end):
                        problems.append(
                            ("nothing served", f"read({offset}) returned nothing below the log end {end}")
                        )
                    continue
                served = batches[0]
                raw = bytes(served.raw)
                if served.base_offset != offset:
                    intact = served.base_offset in number_at and raw == seq.raw(number_at[served.base_offset])
                    if intact:
                        problems.append(
                            (
                                "records skipped",
                                f"read({offset}) served the batch at {served.base_offset}, no error",
                            )
                        )
                    else:
                        problems.append(
                            (
                                "damaged batch served",
                                f"read({offset}) served a damaged batch claiming offsets "
                                f"{served.base_offset}..{served.last_offset}",
                            )
                        )
                elif raw != seq.raw(n):
                    records = [ck._record_tuple(r) for r in served.records]
                    if records == ck.expected_records(seq, n):
                        problems.append(
                            (
                                "altered bytes served",
                                f"read({offset}) served batch {n} with altered header bytes",
                            )
                        )
                    else:
                        problems.append(("damaged batch served", f"read({offset}) served batch {n} altered"))
                elif [ck._record_tuple(r) for r in served.records] != ck.expected_records(seq, n):
                    problems.append(("wrong records", f"read({offset}): right bytes, different records"))
            except CorruptRecordError:
                # A read walks batch headers forward from an index entry: only the damaged
                # segment's reads at or after the damaged batch may meet the damage.
                if pristine.segment_of[n] != damage.name or n < damage.batch:
                    problems.append(
                        ("error away from the damage", f"read({offset}) raised CorruptRecordError")
                    )
            except OffsetOutOfRangeError:
                if not (end == truncated_end and offset >= end):
                    problems.append(
                        ("out of range", f"read({offset}) is out of range below the log end {end}")
                    )
            except Exception as exc:
                problems.append((f"read raised {type(exc).__name__}", f"read({offset}): {exc}"))
        if not problems:
            try:
                ck.check_structure(log, "structure")
            except AssertionError as exc:
                problems.append(("structure", str(exc)))
    finally:
        log.close()
    return problems


def run_trials(
    pristine: Pristine,
    tmp_path: pathlib.Path,
    label: str,
    trials: int,
    make: Callable[[random.Random], Flip],
    check: Callable[[Pristine, str, Flip], list[Problem]],
) -> None:
    rng = random.Random(f"{TRIAL_SEED}/{label}")
    path = str(tmp_path / "log-0")
    failures = []
    categories: collections.Counter[str] = collections.Counter()
    for trial in range(trials):
        damage = make(rng)
        restore(pristine, path, damage.mode)
        flip(path, damage.name, damage.position, damage.bit)
        problems = check(pristine, path, damage)
        if problems:
            categories.update({category for category, _ in problems})
            more = f" (+{len(problems) - 1} more)" if len(problems) > 1 else ""
            failures.append(f"trial {trial}: {damage}: {problems[0][1]}{more}")
    if failures:
        summary = ", ".join(f"{category}: {count}" for category, count in categories.most_common())
        raise AssertionError(
            f"{label}: {len(failures)} of {trials} trials failed (seed {TRIAL_SEED}; trials per problem: "
            f"{summary}):\n  " + "\n  ".join(failures[:REPORT_AT_MOST])
        )


def test_flip_in_record_data(pristine: Pristine, tmp_path: pathlib.Path) -> None:
    """Bits in the records section: the CRC on the read path (or a recovery) catches them."""
    names = [*pristine.sealed(".log"), pristine.active]  # the active segment too, now and then

    def make(rng: random.Random) -> Flip:
        return log_flip(pristine, rng, lambda size: rng.randrange(HEADER_SIZE, size), names)

    run_trials(pristine, tmp_path, "record data", RECORD_DATA_TRIALS, make, check_log_flip)


def test_flip_in_batch_header(pristine: Pristine, tmp_path: pathlib.Path) -> None:
    """Bits in the length, magic, CRC and CRC-covered header fields of a sealed segment's batch."""
    header = [i for i in range(8, HEADER_SIZE) if i not in LEADER_EPOCH]

    def make(rng: random.Random) -> Flip:
        return log_flip(pristine, rng, lambda size: rng.choice(header), pristine.sealed(".log"))

    run_trials(pristine, tmp_path, "batch header", HEADER_TRIALS, make, check_log_flip)


def test_flip_in_base_offset(pristine: Pristine, tmp_path: pathlib.Path) -> None:
    """Bits in a batch's base offset (not CRC-covered): structural and offset checks must catch them."""

    def make(rng: random.Random) -> Flip:
        return log_flip(pristine, rng, lambda size: rng.choice(BASE_OFFSET), pristine.sealed(".log"))

    run_trials(pristine, tmp_path, "base offset", BASE_OFFSET_TRIALS, make, check_log_flip)


def test_flip_in_partition_leader_epoch(pristine: Pristine, tmp_path: pathlib.Path) -> None:
    """Bits in the partition leader epoch (not CRC-covered): never served as if written so."""

    def make(rng: random.Random) -> Flip:
        return log_flip(pristine, rng, lambda size: rng.choice(LEADER_EPOCH), pristine.sealed(".log"))

    run_trials(pristine, tmp_path, "partition leader epoch", LEADER_EPOCH_TRIALS, make, check_log_flip)


def check_index_flip(pristine: Pristine, path: str, damage: Flip) -> list[Problem]:
    """Problems after a flipped index bit (none when the index is detected and rebuilt)."""
    rng = random.Random(0)
    try:
        with Log.open(path, CONFIG) as log:
            ck.verify_log(log, pristine.seq, BATCHES, most=BATCHES, ctx="reads", rng=rng, resume=False)
            problems: list[Problem] = []
            for segment in log.segments.values():
                name = os.path.basename(segment.offset_index.path)
                index = segment.offset_index
                entries = [index.entry(i) for i in range(index.entries)]
                if entries != pristine.index_entries[name] and not segment.active:
                    problems.append(("offset index not rebuilt", f"{name} holds {entries}"))
            for stamp, expected in pristine.time_answers.items():
                got = log.offset_for_timestamp(stamp)
                if got != expected:
                    problems.append(
                        (
                            "wrong offset_for_timestamp",
                            f"offset_for_timestamp({stamp}) is {got}, not {expected}",
                        )
                    )
            return problems
    except AssertionError as exc:
        return [("reads wrong", str(exc))]
    except Exception as exc:
        return [(f"{type(exc).__name__}", f"{type(exc).__name__}: {exc}")]


def index_flip(pristine: Pristine, rng: random.Random, suffix: str) -> Flip:
    name = rng.choice(pristine.sealed(suffix))
    return Flip(name, rng.randrange(len(pristine.files[name])), rng.randrange(8), rng.choice(MODES))


def test_flip_in_offset_index(pristine: Pristine, tmp_path: pathlib.Path) -> None:
    run_trials(
        pristine,
        tmp_path,
        "offset index",
        OFFSET_INDEX_TRIALS,
        lambda rng: index_flip(pristine, rng, ".index"),
        check_index_flip,
    )


def test_flip_in_time_index(pristine: Pristine, tmp_path: pathlib.Path) -> None:
    run_trials(
        pristine,
        tmp_path,
        "time index",
        TIME_INDEX_TRIALS,
        lambda rng: index_flip(pristine, rng, ".timeindex"),
        check_index_flip,
    )


# -- deterministic reproductions of what the randomized trials above find -------------------------

TWO_RECORD_BATCHES = 10  # batch i holds offsets 2i (b"a<i>") and 2i+1 (b"b<i>"); 79 bytes each


def two_record_log(path: str, config: dict[str, int]) -> list[tuple[int, int]]:
    """Ten two-record batches; returns (base, next) of each segment."""
    with Log.open(path, config) as log:
        for i in range(TWO_RECORD_BATCHES):
            log.append([b"a%d" % i, b"b%d" % i], timestamp=ck.TS_BASE + i)
        return [(s.base_offset, s.next_offset) for s in log.segments.values()]


def read_or_error(log: Log, offset: int) -> list[tuple[int, bytes | None]] | str:
    try:
        return [(r.offset, r.value) for r in log.read(offset, max_bytes=1).records]
    except Exception as exc:
        return type(exc).__name__


def test_clean_open_keeps_a_damaged_sealed_batch_unserved(tmp_path: pathlib.Path) -> None:
    """One bit of a sealed segment's magic byte, then a clean open: offsets 6-7 must not vanish.

    Fails today: ``LogSegment._load_or_recover`` sees the damaged header while
    walking the tail of the sealed segment and calls ``recover()``, which
    truncates the sealed segment on disk at that batch (even on a clean open)
    while later segments stay: ``read(6)`` then returns offset 10 without an
    error. Nor does the loader learn of the cut (``recover`` reports it only
    the first time), so a full recovery leaves the hole too.
    """
    path = str(tmp_path / "log-0")
    segments = two_record_log(path, {"segment.bytes": 400})
    assert segments[0] == (0, 10)
    flip(path, f"{0:020d}.log", 3 * 79 + 16, 0)  # magic byte of the batch at offsets 6-7
    with Log.open(path, {"segment.bytes": 400}) as log:
        for offset in range(6, 10):
            got = read_or_error(log, offset)
            expected = [
                (o, b"%s%d" % (k, o // 2)) for o, k in ((offset // 2 * 2, b"a"), (offset // 2 * 2 + 1, b"b"))
            ]
            expected = [(o, v) for o, v in expected if o >= offset]
            assert got in (expected, "CorruptRecordError"), f"read({offset}) after a clean open gave {got}"


@pytest.mark.parametrize("full_recovery", [False, True])
def test_base_offset_flip_in_a_sealed_batch_is_not_served(
    tmp_path: pathlib.Path, full_recovery: bool
) -> None:
    """The last batch of a sealed segment gets base offset 9 instead of 8 (one bit).

    Fails today: no check catches it (the CRC does not cover the base offset;
    recovery only wants offsets to increase; nothing compares a segment's
    offsets with the next segment's base), so ``read(8)`` serves b"a4" as
    offset 9 and b"b4" as offset 10, and segment 0 now ends at 11 while
    segment 10 starts at 10.
    """
    path = str(tmp_path / "log-0")
    segments = two_record_log(path, {"segment.bytes": 400})
    assert segments[:2] == [(0, 10), (10, 20)]
    flip(path, f"{0:020d}.log", 4 * 79 + 7, 0)  # base offset 8 -> 9
    if full_recovery:
        os.unlink(ck.marker_path(path))
        os.unlink(os.path.join(path, RECOVERY_POINT_FILE))
    with Log.open(path, {"segment.bytes": 400}) as log:
        got = read_or_error(log, 8)
        layout = [(s.base_offset, s.next_offset) for s in log.segments.values()]
        assert got in ([(8, b"a4"), (9, b"b4")], "CorruptRecordError") or log.log_end_offset == 8, (
            f"read(8) gave {got}; segments {layout}"
        )


def test_unclean_open_never_drops_the_active_segment_behind_a_hole(tmp_path: pathlib.Path) -> None:
    """A huge base offset (bit 56) in an old one-batch segment, then an unclean open.

    Fails today: the damaged segment reports next_offset 2**56 + 4, so the
    loader counts it among the segments past the recovery point; recovering
    it cuts it to nothing, and ``LogLoader._recover`` then deletes only the
    later segments in that list (the active one), not every later segment:
    the log end moves back from 20 to 18 (acknowledged records gone) while
    segments 4..17 stay behind an empty segment whose reads raise
    InvalidArgumentError.
    """
    path = str(tmp_path / "log-0")
    config = {"segment.bytes": 100}  # one batch per segment, no index entries
    segments = two_record_log(path, config)
    assert len(segments) == TWO_RECORD_BATCHES
    flip(path, f"{2:020d}.log", 0, 0)  # the second segment's base offset += 2**56
    os.unlink(ck.marker_path(path))  # unclean; the recovery point (20) stays
    with Log.open(path, config) as log:
        layout = [(s.base_offset, s.next_offset) for s in log.segments.values()]
        end = log.log_end_offset
        assert end in (20, 2), f"log end {end} after recovery; segments {layout}"
        assert all(a[1] == b[0] for a, b in itertools.pairwise(layout)), f"a hole: segments {layout}"
