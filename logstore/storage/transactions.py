"""A log's transactions (KIP-98): open transactions, the last stable offset, aborted transactions.

A transactional producer's batches carry the *transactional* attribute; its
transaction ends with a *control batch* (attribute bit 5) whose one record's
key is ``(version int16, type int16)``: type 0 ABORT, 1 COMMIT, written by
the transaction coordinator (WriteTxnMarkers) to every partition of the
transaction. From the batch headers this module keeps, per log:

- **open transactions**: producer id -> offset of its first batch in the
  open transaction;
- **unreplicated completions**: transactions whose marker is not yet below
  the high watermark. They still hold the LSO back (Kafka's
  ``unreplicatedTxns``): a read_committed consumer must not pass a
  transaction before every replica can tell how it ended;
- **aborted transactions**, in marker order: what a read_committed fetch
  lists so that the consumer leaves those batches out.

The **last stable offset** is the smallest of the open and unreplicated
transactions' first offsets and the high watermark: read_committed fetches
stop there (``log_start_offset <= LSO <= HW``).

On disk: ``<base>.txnindex`` per segment, Kafka's ``TransactionIndex``: one
34-byte big-endian entry per aborted transaction whose abort marker lies in
that segment, in marker order: version int16 (0), producer id int64, first
offset int64, last offset int64 (the marker's offset), last stable offset
int64 (the LSO once this transaction ended). Kafka's tools read it.

Crash policy: the log is the source of truth. The state is built from the
log's batch headers (one C walk per segment) on first use after the log is
opened, truncated or compacted, and each segment's ``.txnindex`` is then
rewritten if it differs from what the log says; so an entry lost with the
page cache, or one left past a truncation, is repaired before anything reads
it. Entries are appended (not fsynced) when an abort marker is appended.

Complexity: appending a batch is O(1) (O(open transactions) for a marker);
:meth:`LogTransactions.last_stable_offset` is O(open + unreplicated
transactions); :meth:`LogTransactions.aborted_between` is O(log n + entries
returned), n the aborted transactions kept.
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import os
import struct
from collections.abc import Iterable
from dataclasses import dataclass

from logstore.records.batch import (
    ATTR_CONTROL,
    ATTR_TRANSACTIONAL,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    ProducerBatches,
)

ENTRY = struct.Struct(">hqqqq")
"""One ``.txnindex`` entry: version, producer id, first offset, last offset, last stable offset."""
ENTRY_VERSION = 0
TXN_INDEX_SUFFIX = ".txnindex"


@dataclass(frozen=True, order=True)
class AbortedTxn:
    """One aborted transaction: Kafka's ``AbortedTxn``. Ordered by its marker's offset."""

    last_offset: int  # the abort marker's offset
    producer_id: int
    first_offset: int
    last_stable_offset: int

    def pack(self) -> bytes:
        return ENTRY.pack(ENTRY_VERSION, self.producer_id, self.first_offset, self.last_offset, self.last_stable_offset)


@dataclass(frozen=True)
class CompletedTxn:
    """A transaction a marker ended on this log: what the broker tells the group coordinator."""

    producer_id: int
    first_offset: int
    last_offset: int
    aborted: bool


def read_index(path: str) -> list[AbortedTxn]:
    """The entries of a ``.txnindex`` file (a torn last entry is ignored); [] if there is none."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        return []
    entries = []
    for at in range(0, len(data) - ENTRY.size + 1, ENTRY.size):
        version, pid, first, last, lso = ENTRY.unpack_from(data, at)
        if version != ENTRY_VERSION:
            break
        entries.append(AbortedTxn(last, pid, first, lso))
    return entries


def index_path(directory: str, base_offset: int) -> str:
    return os.path.join(directory, f"{base_offset:020d}{TXN_INDEX_SUFFIX}")


class LogTransactions:
    """The transactions of one log (see the module doc). The log's append lock serializes changes."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.open: dict[int, int] = {}  # producer id -> first offset of its open transaction
        self.unreplicated: collections.deque[tuple[int, int]] = collections.deque()  # (first, marker)
        self.aborted: list[AbortedTxn] = []  # by marker offset

    # -- building ------------------------------------------------------------

    @classmethod
    def build(cls, directory: str, segments: Iterable[tuple[int, ProducerBatches]]) -> LogTransactions:
        """The state from every segment's producer fields, in log order; repairs the ``.txnindex`` files."""
        state = cls(directory)
        bases = []
        for base, fields in segments:
            bases.append(base)
            state.observe(fields, segment_base=None)
        state._repair(bases)
        return state

    def _repair(self, bases: list[int]) -> None:
        """Rewrite each segment's ``.txnindex`` where it differs from the log's aborted transactions."""
        by_segment: dict[int, list[AbortedTxn]] = {base: [] for base in bases}
        for entry in self.aborted:
            at = bisect.bisect_right(bases, entry.last_offset) - 1
            if at >= 0:
                by_segment[bases[at]].append(entry)
        for base, entries in by_segment.items():
            path = index_path(self.directory, base)
            if read_index(path) == entries:
                continue
            if not entries:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(path)
                continue
            tmp = path + ".tmp"
            with open(tmp, "wb") as f:
                f.write(b"".join(e.pack() for e in entries))
            os.replace(tmp, path)

    # -- appends -------------------------------------------------------------

    def observe(self, fields: ProducerBatches, segment_base: int | None) -> list[CompletedTxn]:
        """Account for appended batches (their producer fields, in log order); returns the
        transactions their markers completed. With ``segment_base``, abort entries are also
        appended to that segment's ``.txnindex`` (the segment the batches went to)."""
        completed: list[CompletedTxn] = []
        attributes = fields.attributes
        if not len(attributes) or not (attributes & (ATTR_TRANSACTIONAL | ATTR_CONTROL)).any():
            return completed
        rows = zip(
            fields.producer_ids.tolist(),
            fields.base_offsets.tolist(),
            attributes.tolist(),
            fields.control_types.tolist(),
            strict=True,
        )
        for pid, offset, attrs, control in rows:
            if attrs & ATTR_CONTROL:
                if control in (CONTROL_ABORT, CONTROL_COMMIT):
                    completed.append(self._complete(pid, offset, control == CONTROL_ABORT, segment_base))
            elif attrs & ATTR_TRANSACTIONAL:
                self.open.setdefault(pid, offset)
        return completed

    def _complete(self, pid: int, marker: int, aborted: bool, segment_base: int | None) -> CompletedTxn:
        first = self.open.pop(pid, marker)  # a marker with no batch before it: an empty transaction here
        self.unreplicated.append((first, marker))
        if aborted:
            lso = min([marker + 1, *self.open.values()])
            entry = AbortedTxn(marker, pid, first, lso)
            self.aborted.append(entry)
            if segment_base is not None:
                with open(index_path(self.directory, segment_base), "ab") as f:
                    f.write(entry.pack())
        return CompletedTxn(pid, first, marker, aborted)

    # -- reads ---------------------------------------------------------------

    def first_unstable_offset(self, high_watermark: int) -> int | None:
        """The first offset of an open transaction or of one whose marker is not below the HW."""
        while self.unreplicated and self.unreplicated[0][1] < high_watermark:
            self.unreplicated.popleft()
        firsts = [first for first, _ in self.unreplicated]
        firsts.extend(self.open.values())
        return min(firsts) if firsts else None

    def last_stable_offset(self, high_watermark: int) -> int:
        """min(first unstable offset, HW): where read_committed reads stop."""
        first = self.first_unstable_offset(high_watermark)
        return high_watermark if first is None else min(first, high_watermark)

    def aborted_between(self, fetch_offset: int, upper_bound: int) -> list[AbortedTxn]:
        """Aborted transactions that may hold records in [fetch_offset, upper_bound): those whose
        marker is at or after ``fetch_offset`` and whose first offset is below ``upper_bound``
        (Kafka's ``collectAbortedTransactions``), in marker order."""
        start = bisect.bisect_left(self.aborted, fetch_offset, key=lambda e: e.last_offset)
        found = []
        for entry in self.aborted[start:]:
            if entry.first_offset < upper_bound:
                found.append(entry)
            if entry.last_stable_offset >= upper_bound:
                break  # every later transaction began at or after this LSO
        return found

    def forget_before(self, offset: int) -> None:
        """Drop aborted transactions wholly below ``offset`` (the log start moved)."""
        cut = bisect.bisect_left(self.aborted, offset, key=lambda e: e.last_offset)
        if cut:
            del self.aborted[:cut]
