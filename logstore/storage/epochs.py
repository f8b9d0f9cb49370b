"""Kafka's leader-epoch cache (KIP-101, KIP-279): the first offset of every leader epoch.

A replica keeps, per partition, the start offset of each leader epoch whose
batches are in its log. A follower asks the leader for the end offset of its
latest epoch (OffsetsForLeaderEpoch) and truncates its log there before it
fetches, so a log never keeps records a new leader did not have.

File: ``<partition dir>/leader-epoch-checkpoint``, Kafka's text format::

    0            <- version
    2            <- number of entries
    0 0          <- "<epoch> <start offset>", epochs increasing
    3 120

Crash policy: every change is written to ``leader-epoch-checkpoint.tmp``,
fsynced, renamed over the file and the directory fsynced
(:func:`~logstore.storage.checkpoints.write_atomically`), so a crash leaves
the old or the new file whole; a torn ``.tmp`` is never read (the log's
loader removes it). An epoch is written before any batch carrying it, so
after a crash the file may name an epoch (or offsets) the log lost, never
the reverse; the :class:`~logstore.storage.log.Log` truncates such entries
against the recovered log on load, as Kafka's LogLoader does. A missing
file is an empty cache; a file that does not parse raises
:class:`~logstore.storage.checkpoints.CorruptCheckpointError`.

Invariants (asserted after every change): epochs strictly increase, and so
do start offsets (Kafka's ``assign`` removes every entry that would break
that). Not thread-safe for writers: the Log changes its cache under its
lock. Readers need no lock: a change replaces the entry list, never edits it.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from itertools import pairwise
from operator import itemgetter

from logstore.errors import InvalidArgumentError
from logstore.storage.checkpoints import CorruptCheckpointError, read_checkpoint, write_checkpoint

LEADER_EPOCH_FILE = "leader-epoch-checkpoint"
UNDEFINED_EPOCH = -1
UNDEFINED_EPOCH_OFFSET = -1

Entry = tuple[int, int]  # (epoch, start offset)
_EPOCH = itemgetter(0)
_START = itemgetter(1)


def _check_invariants(entries: list[Entry]) -> None:
    """Epochs and start offsets strictly increase, none negative. O(entries)."""
    assert all(a[0] < b[0] and a[1] < b[1] for a, b in pairwise(entries)), entries
    assert not entries or min(entries[0]) >= 0, entries


def _assigned(entries: list[Entry], epoch: int, start_offset: int) -> list[Entry]:
    """Kafka's ``assign``: ``entries`` with (epoch, start_offset) added. O(entries).

    A new entry is needed unless ``epoch`` is the latest and starts no
    earlier; every later entry that would conflict (an epoch at or above
    ``epoch``, or a start at or above ``start_offset``) is removed first.
    """
    if epoch < 0 or start_offset < 0:
        raise InvalidArgumentError(f"invalid leader epoch entry (epoch {epoch}, start offset {start_offset})")
    if entries and entries[-1][0] == epoch and entries[-1][1] <= start_offset:
        return entries
    keep = len(entries)
    while keep and (entries[keep - 1][0] >= epoch or entries[keep - 1][1] >= start_offset):
        keep -= 1
    return [*entries[:keep], (epoch, start_offset)]


class LeaderEpochFileCache:
    """The leader epochs of one partition and the file that keeps them (see the module doc).

    Reads are O(log entries); changes are O(entries) plus one atomic file
    write (two fsyncs), made only when the entries change.
    """

    def __init__(self, directory: str) -> None:
        self.path = os.path.join(directory, LEADER_EPOCH_FILE)
        self._entries: list[Entry] = self._read()
        _check_invariants(self._entries)

    def _read(self) -> list[Entry]:
        """The file's entries, folded through ``assign`` as Kafka loads them."""
        hint = "restore it from a replica or fix it by hand (format: see logstore.storage.epochs)"
        try:
            rows = read_checkpoint(self.path, 2)
        except CorruptCheckpointError as e:
            raise CorruptCheckpointError(f"{e}; {hint}") from None
        entries: list[Entry] = []
        for number, (epoch, start) in enumerate(rows, start=3):
            try:
                entries = _assigned(entries, int(epoch), int(start))
            except ValueError:  # int() or a negative entry (InvalidArgumentError is a ValueError)
                raise CorruptCheckpointError(
                    f"{self.path}: line {number} ({epoch} {start}) is not a leader epoch entry; {hint}"
                ) from None
        return entries

    def _commit(self, entries: list[Entry]) -> None:
        """Make ``entries`` durable, then current; nothing happens when they are unchanged."""
        if entries == self._entries:
            return
        _check_invariants(entries)
        write_checkpoint(self.path, entries)
        self._entries = entries

    # -- reading -----------------------------------------------------------

    @property
    def entries(self) -> list[Entry]:
        """(epoch, start offset) pairs, oldest first. O(entries): a copy."""
        return list(self._entries)

    @property
    def latest_epoch(self) -> int:
        """The latest epoch, -1 when there is none. O(1)."""
        entries = self._entries
        return entries[-1][0] if entries else UNDEFINED_EPOCH

    def end_offset_for(self, requested_epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's ``endOffsetFor`` (KIP-279): (epoch, end offset) for an OffsetsForLeaderEpoch request.

        The epoch is the largest one at or below ``requested_epoch``; its end
        is the start of the first later epoch, or ``log_end_offset`` when the
        latest epoch is asked for. As in Kafka: an undefined request, an
        empty cache or an epoch above the latest answer (-1, -1); an epoch
        below the first answers (requested_epoch, the first epoch's start),
        the offset the follower may keep up to. O(log entries).
        """
        entries = self._entries
        if requested_epoch == UNDEFINED_EPOCH:
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        if entries and entries[-1][0] == requested_epoch:
            return requested_epoch, log_end_offset
        higher = bisect_right(entries, requested_epoch, key=_EPOCH)
        if higher == len(entries):
            return UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
        floor_epoch = entries[higher - 1][0] if higher else requested_epoch
        return floor_epoch, entries[higher][1]

    def epoch_for_offset(self, offset: int) -> int:
        """The epoch of the entry covering ``offset`` (the last starting at or below it), else -1. O(log entries)."""
        entries = self._entries
        at = bisect_right(entries, offset, key=_START)
        return entries[at - 1][0] if at else UNDEFINED_EPOCH

    # -- changing ----------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> None:
        """Kafka's ``assign``: ``epoch`` starts at ``start_offset``; durable when this returns.

        Nothing changes when ``epoch`` is the latest and starts no earlier.
        Otherwise every conflicting later entry (an epoch >= ``epoch`` or a
        start >= ``start_offset``) goes first, so a stale entry never
        survives a new leader's. Negative arguments raise InvalidArgumentError.
        """
        self._commit(_assigned(self._entries, epoch, start_offset))

    def truncate_from_end(self, end_offset: int) -> None:
        """Kafka's ``truncateFromEnd``: drop the entries starting at or after ``end_offset``.

        A follower calls it when it truncates its log; a negative offset
        changes nothing. O(entries).
        """
        if end_offset < 0:
            return
        self._commit([entry for entry in self._entries if entry[1] < end_offset])

    def truncate_from_start(self, start_offset: int) -> None:
        """Kafka's ``truncateFromStart``: the log now starts at ``start_offset``.

        Entries starting at or below it go, except the last of them, which now
        starts at ``start_offset`` (its epoch still covers the new first
        record). O(entries).
        """
        entries = self._entries
        below = bisect_right(entries, start_offset, key=_START)
        if below:
            self._commit([(entries[below - 1][0], start_offset), *entries[below:]])

    def clear(self) -> None:
        """Remove every entry (a log truncated wholly). O(1) plus the write."""
        self._commit([])

    def __repr__(self) -> str:
        return f"LeaderEpochFileCache({self.path!r}, {self._entries})"
