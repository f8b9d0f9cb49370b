"""One share-partition: which records of a topic-partition a share group has delivered,
to whom, how often, and which are done (KIP-932; Kafka's ``SharePartition``).

State: the share-partition start offset (SPSO) and end offset (SPEO); every
offset in ``[SPSO, SPEO)`` is *in flight* with a state, a delivery count and,
while acquired, its member and lock deadline::

    AVAILABLE --acquire--> ACQUIRED --ACCEPT--> ACKNOWLEDGED
        ^                     |  \\--REJECT--> ARCHIVED
        |    RELEASE, lock    |
        +---- expiry, member -+--(delivery count at the limit)--> ARCHIVED
              leaving

Offsets below the SPSO are done (acknowledged or archived); offsets at or
above the SPEO were never delivered. The SPSO moves up over every leading
offset that is ACKNOWLEDGED or ARCHIVED, so the in-flight window starts with
an undone record. Gaps (offsets with no record: transaction markers,
compaction) become ARCHIVED as the fetched ranges pass them. At most
``max_in_flight`` offsets (``group.share.partition.max.record.locks``) are in
flight: past it nothing new is acquired until the SPSO moves.

Each acquisition counts one delivery; a record released, or whose lock ran
out, with ``delivery_count_limit`` deliveries behind it is archived instead of
made available again (``group.share.delivery.count.limit``).

Persistence (:meth:`snapshot`, :meth:`restore`): the SPSO and the in-flight
offsets as runs of (first, last, state, delivery count), the shape of
Kafka's ``ShareSnapshot`` state batches. ACQUIRED is written as AVAILABLE
(with its delivery count): after a restart its lock is gone and the record is
delivered again, as in Kafka.

Invariants (asserted by :meth:`check`): SPSO <= SPEO; SPEO - SPSO <= the
in-flight limit plus one fetch's overshoot; every in-flight offset has a
state; the first in-flight offset is not done; an ACQUIRED offset has a
member and a deadline, no other state has; delivery counts are >= 0.

Not thread-safe: its owner (the share coordinator) serializes calls. Times
are milliseconds given by the caller (tests use a manual clock).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from logstore.errors import InvalidArgumentError


class RecordState(enum.IntEnum):
    """A record's delivery state, with Kafka's ids (``RecordState``)."""

    AVAILABLE = 0
    ACQUIRED = 1
    ACKNOWLEDGED = 2
    ARCHIVED = 4


class AcknowledgeType(enum.IntEnum):
    """What a consumer says of a record, with the protocol's ids (``AcknowledgeType``; 0 is GAP:
    an offset without a record)."""

    GAP = 0
    ACCEPT = 1
    RELEASE = 2
    REJECT = 3


DONE = (RecordState.ACKNOWLEDGED, RecordState.ARCHIVED)


class InvalidRecordStateError(InvalidArgumentError):
    """An acknowledgement of a record that the member does not hold (INVALID_RECORD_STATE)."""


@dataclass(frozen=True, slots=True)
class AcquiredRecords:
    """Offsets ``first..last`` handed to a member, each delivered ``delivery_count`` times
    (ShareFetch's ``AcquiredRecords``)."""

    first: int
    last: int
    delivery_count: int


@dataclass(frozen=True, slots=True)
class StateBatch:
    """A run of in-flight offsets with one state and delivery count (``ShareSnapshot``'s
    ``StateBatch``: AVAILABLE, ACKNOWLEDGED or ARCHIVED)."""

    first: int
    last: int
    state: RecordState
    delivery_count: int


@dataclass(frozen=True, slots=True)
class Snapshot:
    """What a share-partition persists: its start offset and its in-flight runs."""

    start_offset: int
    batches: tuple[StateBatch, ...]


class _InFlight:
    __slots__ = ("deadline", "delivery_count", "member", "state")

    def __init__(self, state: RecordState, delivery_count: int) -> None:
        self.state = state
        self.delivery_count = delivery_count
        self.member: str | None = None
        self.deadline = 0


class SharePartition:
    """The delivery state of one topic-partition for one share group (see the module doc)."""

    def __init__(
        self,
        start_offset: int,
        *,
        delivery_count_limit: int = 5,
        lock_duration_ms: int = 30_000,
        max_in_flight: int = 2000,
    ) -> None:
        if start_offset < 0 or delivery_count_limit < 1 or lock_duration_ms < 1 or max_in_flight < 1:
            raise InvalidArgumentError(
                f"a share-partition needs a start offset >= 0 ({start_offset}), a delivery count limit >= 1 "
                f"({delivery_count_limit}), a lock duration >= 1 ms ({lock_duration_ms}) and an in-flight "
                f"limit >= 1 ({max_in_flight})"
            )
        self.delivery_count_limit = delivery_count_limit
        self.lock_duration_ms = lock_duration_ms
        self.max_in_flight = max_in_flight
        self._start = start_offset
        self._records: dict[int, _InFlight] = {}  # offset -> its state, for SPSO <= offset < SPEO

    # -- reading ---------------------------------------------------------------

    @property
    def start_offset(self) -> int:
        """The SPSO: every offset below it is done."""
        return self._start

    @property
    def end_offset(self) -> int:
        """The SPEO: no offset at or above it was delivered yet."""
        return self._start + len(self._records)

    def state_of(self, offset: int) -> tuple[RecordState, int] | None:
        """(state, delivery count) of an in-flight offset; None outside the window. O(1)."""
        found = self._records.get(offset)
        return None if found is None else (found.state, found.delivery_count)

    def holder(self, offset: int) -> str | None:
        """The member that holds an ACQUIRED offset, else None. O(1)."""
        found = self._records.get(offset)
        return None if found is None else found.member

    def counts(self) -> dict[RecordState, int]:
        """How many in-flight offsets are in each state (metrics). O(in flight)."""
        counted = dict.fromkeys(RecordState, 0)
        for record in self._records.values():
            counted[record.state] += 1
        return counted

    def next_fetch_offset(self) -> int:
        """Where a fetch for this partition should start: the first AVAILABLE in-flight offset,
        else the SPEO. O(in flight)."""
        for offset in range(self._start, self.end_offset):
            if self._records[offset].state == RecordState.AVAILABLE:
                return offset
        return self.end_offset

    def can_acquire(self) -> bool:
        """Whether an acquisition could hand out anything (an AVAILABLE offset in flight, or room
        for new ones). O(in flight) at worst."""
        return len(self._records) < self.max_in_flight or self.next_fetch_offset() < self.end_offset

    # -- acquiring ---------------------------------------------------------------

    def acquire(
        self, member: str, fetched: Sequence[tuple[int, int]], max_records: int, now_ms: int
    ) -> list[AcquiredRecords]:
        """Hand ``member`` up to ``max_records`` of the offsets in ``fetched`` (the ascending,
        non-overlapping (first, last) ranges of the records a log read returned) that are
        AVAILABLE in flight or new (at or above the SPEO, room permitting), each locked until
        ``now_ms`` + the lock duration. Offsets between the SPEO and a new range's first offset
        hold no record: they enter the window ARCHIVED. O(offsets in ``fetched``)."""
        if max_records < 1:
            return []
        taken: list[AcquiredRecords] = []
        left = max_records
        deadline = now_ms + self.lock_duration_ms
        previous = -1
        for first, last in fetched:
            if first > last or first <= previous:
                raise InvalidArgumentError(f"fetched ranges must ascend without overlap: {list(fetched)}")
            previous = last
            for offset in range(max(first, self._start), last + 1):
                if left == 0:
                    break
                record = self._records.get(offset)
                if record is None:  # new: at or past the SPEO
                    if len(self._records) >= self.max_in_flight:
                        break
                    for gap in range(self.end_offset, offset):
                        self._records[gap] = _InFlight(RecordState.ARCHIVED, 0)
                    record = self._records[offset] = _InFlight(RecordState.AVAILABLE, 0)
                if record.state != RecordState.AVAILABLE:
                    continue
                record.state = RecordState.ACQUIRED
                record.delivery_count += 1
                record.member = member
                record.deadline = deadline
                left -= 1
                if taken and taken[-1].last == offset - 1 and taken[-1].delivery_count == record.delivery_count:
                    taken[-1] = AcquiredRecords(taken[-1].first, offset, record.delivery_count)
                else:
                    taken.append(AcquiredRecords(offset, offset, record.delivery_count))
        self._advance()
        return taken

    # -- acknowledging -------------------------------------------------------------

    def acknowledge(self, member: str, batches: Iterable[tuple[int, int, Sequence[int]]]) -> None:
        """Apply ``member``'s acknowledgements: (first, last, types), ``types`` one
        AcknowledgeType for the whole range or one per offset (ShareAcknowledge's
        ``AcknowledgementBatch``). All or nothing: InvalidRecordStateError if any offset is not
        ACQUIRED by ``member`` (a GAP may also name an offset that holds no record). O(offsets)."""
        planned: list[tuple[int, AcknowledgeType]] = []
        for first, last, types in batches:
            if first > last or not types or (len(types) != 1 and len(types) != last - first + 1):
                raise InvalidArgumentError(
                    f"acknowledgement batch {first}-{last}: give one type, or one per offset ({last - first + 1})"
                )
            for index, offset in enumerate(range(first, last + 1)):
                kind = AcknowledgeType(types[0] if len(types) == 1 else types[index])
                record = self._records.get(offset)
                gap_done = kind == AcknowledgeType.GAP and (offset < self._start or record is not None)
                if not gap_done and (record is None or record.state != RecordState.ACQUIRED or record.member != member):
                    held = "not in flight" if record is None else f"{record.state.name} ({record.member})"
                    raise InvalidRecordStateError(
                        f"offset {offset} is not acquired by member {member}: {held}; acknowledge only "
                        "records delivered to this member and not yet acknowledged, before their lock ends"
                    )
                planned.append((offset, kind))
        for offset, kind in planned:
            record = self._records.get(offset)
            if record is None:
                continue  # a GAP below the SPSO
            if kind == AcknowledgeType.ACCEPT:
                self._settle(record, RecordState.ACKNOWLEDGED)
            elif kind in (AcknowledgeType.REJECT, AcknowledgeType.GAP):
                self._settle(record, RecordState.ARCHIVED)
            else:
                self._release(record)
        self._advance()

    def release_member(self, member: str) -> int:
        """Every record ``member`` holds goes back (it left the group, or its session ended):
        AVAILABLE, or ARCHIVED at the delivery limit. Returns how many. O(in flight)."""
        released = 0
        for record in self._records.values():
            if record.state == RecordState.ACQUIRED and record.member == member:
                self._release(record)
                released += 1
        self._advance()
        return released

    def expire(self, now_ms: int) -> int:
        """Records whose acquisition lock ended by ``now_ms`` go back as if released. Returns how
        many. O(in flight)."""
        expired = 0
        for record in self._records.values():
            if record.state == RecordState.ACQUIRED and record.deadline <= now_ms:
                self._release(record)
                expired += 1
        self._advance()
        return expired

    def next_deadline(self) -> int | None:
        """The earliest lock deadline of an acquired record, or None. O(in flight)."""
        deadlines = [r.deadline for r in self._records.values() if r.state == RecordState.ACQUIRED]
        return min(deadlines, default=None)

    def move_start(self, offset: int) -> None:
        """Start at ``offset`` (AlterShareGroupOffsets, or the log's start moved past the SPSO):
        offsets below it are done, whatever their state; ``offset`` past the SPEO empties the
        window. O(in flight)."""
        if offset < 0:
            raise InvalidArgumentError(f"a share-partition cannot start at offset {offset}")
        if offset <= self._start:
            if offset < self._start and self._records:
                raise InvalidArgumentError(
                    f"offset {offset} is below the start {self._start} with records in flight; the group must be "
                    "empty to move its start back"
                )
            if offset < self._start:
                self._start = offset
            return
        end = self.end_offset
        for done in range(self._start, min(offset, end)):
            del self._records[done]
        if offset >= end:
            self._records.clear()
        self._start = offset
        self._advance()

    # -- persistence ---------------------------------------------------------------

    def snapshot(self) -> Snapshot:
        """The SPSO and the in-flight runs (ACQUIRED written as AVAILABLE). O(in flight)."""
        runs: list[StateBatch] = []
        for offset in range(self._start, self.end_offset):
            record = self._records[offset]
            state = RecordState.AVAILABLE if record.state == RecordState.ACQUIRED else record.state
            if runs and runs[-1].last == offset - 1 and (runs[-1].state, runs[-1].delivery_count) == (
                state, record.delivery_count
            ):  # fmt: skip
                runs[-1] = StateBatch(runs[-1].first, offset, state, record.delivery_count)
            else:
                runs.append(StateBatch(offset, offset, state, record.delivery_count))
        return Snapshot(self._start, tuple(runs))

    @classmethod
    def restore(
        cls,
        snapshot: Snapshot,
        *,
        delivery_count_limit: int = 5,
        lock_duration_ms: int = 30_000,
        max_in_flight: int = 2000,
    ) -> SharePartition:
        """A share-partition as a snapshot left it. Runs must ascend from the start offset
        without gaps or overlaps (a gap would be an offset of unknown state). O(offsets)."""
        made = cls(snapshot.start_offset, delivery_count_limit=delivery_count_limit,
                   lock_duration_ms=lock_duration_ms, max_in_flight=max_in_flight)  # fmt: skip
        expected = snapshot.start_offset
        for run in snapshot.batches:
            if run.first != expected or run.last < run.first or run.state == RecordState.ACQUIRED:
                raise InvalidArgumentError(
                    f"snapshot run {run} does not continue at offset {expected} (runs ascend from the start offset "
                    "without gaps, and hold no ACQUIRED state)"
                )
            for offset in range(run.first, run.last + 1):
                made._records[offset] = _InFlight(RecordState(run.state), run.delivery_count)
            expected = run.last + 1
        made._advance()
        made.check()
        return made

    def check(self) -> None:
        """Assert the invariants of the module doc. O(in flight)."""
        assert 0 <= self._start <= self.end_offset
        assert set(self._records) == set(range(self._start, self.end_offset))
        if self._records:
            assert self._records[self._start].state not in DONE
        for record in self._records.values():
            assert record.delivery_count >= 0
            assert (record.state == RecordState.ACQUIRED) == (record.member is not None)

    # -- inside ------------------------------------------------------------------

    def _settle(self, record: _InFlight, state: RecordState) -> None:
        record.state = state
        record.member = None
        record.deadline = 0

    def _release(self, record: _InFlight) -> None:
        spent = record.delivery_count >= self.delivery_count_limit
        self._settle(record, RecordState.ARCHIVED if spent else RecordState.AVAILABLE)

    def _advance(self) -> None:
        """Move the SPSO over the leading done offsets (they leave the window)."""
        records = self._records
        while records:
            first = records.get(self._start)
            if first is None or first.state not in DONE:
                break
            del records[self._start]
            self._start += 1
