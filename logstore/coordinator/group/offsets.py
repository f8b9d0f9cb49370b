"""Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and expiry.

:class:`OffsetsManager` checks commits against the group's membership and
generation, makes their records (:mod:`~logstore.coordinator.group.persistence`)
and makes the offsets visible once they are written; deletes and expires
offsets, writing tombstones, and lets a group with nothing left die
(Kafka's ``cleanupGroupMetadata``).

A commit can be made in two steps (:meth:`OffsetsManager.prepare_commit`,
then the caller writes the records and applies the
:class:`PreparedCommit`): the broker batches the records of many commits in
one append and applies each commit before its batch is written, reverting
it if the append fails.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from kio.schema.errors import ErrorCode

from logstore.coordinator.clock import Clock, Repeating
from logstore.coordinator.group.classic_group import GroupMetadata, GroupState, TopicPartition
from logstore.coordinator.group.classic_membership import MembershipManager
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.offsets_schemas import OffsetCommitValue
from logstore.coordinator.group.persistence import GroupMetadataManager, offset_records, tombstones
from logstore.coordinator.java_strings import java_string_length
from logstore.coordinator.record_codec import Record

log = logging.getLogger(__name__)

OffsetCommit = tuple[int, int | None, str | None]
"""What a member commits for a partition: (offset, leader epoch or None/-1, metadata or None)."""


# -- results ------------------------------------------------------------------


@dataclass(frozen=True)
class FetchedOffset:
    """A committed offset; -1 offset and leader epoch when there is none."""

    offset: int
    leader_epoch: int
    metadata: str
    error: ErrorCode = ErrorCode.none

    @classmethod
    def of(cls, value: OffsetCommitValue | None) -> FetchedOffset:
        """The committed ``value`` as OffsetFetch answers it (:data:`NO_OFFSET` for None). O(1)."""
        return NO_OFFSET if value is None else cls(value.offset, value.leader_epoch, value.metadata)


NO_OFFSET = FetchedOffset(-1, -1, "")


@dataclass(frozen=True)
class FetchOffsetsResult:
    error: ErrorCode
    offsets: dict[TopicPartition, FetchedOffset] = field(default_factory=dict)


@dataclass(frozen=True)
class DeleteOffsetsResult:
    """A group error (then ``partitions`` is empty) or one error per partition."""

    error: ErrorCode
    partitions: dict[TopicPartition, ErrorCode] = field(default_factory=dict)


class PreparedCommit:
    """A checked offset commit: its records, and the change it makes once they are written.

    ``errors`` holds the partitions that are not written (with why); every
    other partition of the request is in ``records`` and takes the write's
    outcome. ``apply`` makes the offsets visible; ``revert`` undoes an
    ``apply`` whose write then failed, where the offset is still this
    commit's (reverts of one partition's batch run in reverse order, so the
    offsets before the batch come back).

    Invariant (asserted): no partition both has an error and is written.
    """

    def __init__(
        self,
        errors: dict[TopicPartition, ErrorCode],
        records: list[Record] | None = None,
        group: GroupMetadata | None = None,
        values: dict[TopicPartition, OffsetCommitValue] | None = None,
    ) -> None:
        self.errors = errors
        self.records = records or []
        self._group = group
        self._values = values or {}
        self._previous: dict[TopicPartition, OffsetCommitValue | None] = {}
        assert self.errors.keys().isdisjoint(self._values.keys()), "a partition both failed and committed"

    def _offsets(self, applying: bool) -> dict[TopicPartition, OffsetCommitValue] | None:
        """The offsets this commit changes: its group's; None without a group, or (``applying``)
        when the group died. A subclass names another group kind's (KIP-848's)."""
        group = self._group
        if group is None or (applying and group.is_in(GroupState.DEAD)):
            return None
        return group.offsets

    def apply(self) -> None:
        """Make the commit's offsets the group's (not if the group died). O(partitions)."""
        offsets = self._offsets(applying=True)
        if offsets is None:
            return
        self._previous = {partition: offsets.get(partition) for partition in self._values}
        offsets.update(self._values)

    def revert(self) -> None:
        """Undo :meth:`apply` where the offset is still this commit's. O(partitions).

        An offset changed since (deleted by OffsetDelete or expiry, or
        committed again) keeps its newer state.
        """
        offsets = self._offsets(applying=False)
        if offsets is None:
            return
        for partition, value in self._previous.items():
            if offsets.get(partition) is not self._values[partition]:
                continue
            if value is None:
                del offsets[partition]
            else:
                offsets[partition] = value
        self._previous = {}

    def answers(self, write_error: ErrorCode) -> dict[TopicPartition, ErrorCode]:
        """Each partition's error: its own, or the write's. O(partitions)."""
        answers = dict.fromkeys(self._values, write_error)
        answers.update(self.errors)
        return answers

    def write_through(self, write: Callable[[list[Record]], ErrorCode]) -> dict[TopicPartition, ErrorCode]:
        """Write the records with ``write`` (when there are any), apply the commit once written,
        and answer each partition. O(partitions) plus the write."""
        if not self.records:
            return self.answers(ErrorCode.none)
        error = write(self.records)
        if error == ErrorCode.none:
            self.apply()
        return self.answers(error)


# -- the manager -----------------------------------------------------------------


def commit_values(
    offsets: Mapping[TopicPartition, OffsetCommit], now_ms: int, metadata_limit: int
) -> tuple[dict[TopicPartition, OffsetCommitValue], dict[TopicPartition, ErrorCode]]:
    """The values a commit writes, committed at ``now_ms``, and OFFSET_METADATA_TOO_LARGE for the
    partitions whose metadata is longer than ``metadata_limit`` (a Java string's length). O(partitions)."""
    values = {}
    errors = {}
    for partition, (offset, leader_epoch, metadata) in offsets.items():
        text = metadata or ""
        if not text or java_string_length(text) <= metadata_limit:
            epoch = -1 if leader_epoch is None else leader_epoch
            values[partition] = OffsetCommitValue(offset, epoch, text, now_ms)
        else:
            errors[partition] = ErrorCode.offset_metadata_too_large
    return values, errors


class OffsetsManager:
    """The groups' committed offsets: commits, fetches, deletes and expiry on a :class:`Clock`.

    Invariants: an offset is visible to fetches only once its record is
    written, or while the write of a batch it was applied ahead of is
    pending (and it is reverted if that write fails); an offset that is
    removed gets a tombstone; an Empty group left with no offsets dies and
    is unregistered in the same call.
    """

    def __init__(
        self,
        config: CoordinatorConfig,
        clock: Clock,
        groups: GroupMetadataManager,
        membership: MembershipManager,
    ) -> None:
        self.config = config
        self.clock = clock
        self._groups = groups
        self._membership = membership
        self._expiry = Repeating(clock, config.offsets_retention_check_interval_ms, self._expire_and_log)

    # -- expiry timer ------------------------------------------------------

    def start(self) -> None:
        """Expire offsets every ``offsets.retention.check.interval.ms`` from now on. O(1)."""
        self._expiry.start()

    def close(self) -> None:
        """Stop expiring offsets. O(1)."""
        self._expiry.stop()

    def _expire_and_log(self) -> None:
        removed = self.expire_offsets()
        if removed:
            log.info("expired %d offsets", removed)

    # -- OffsetCommit ------------------------------------------------------

    def commit_offsets(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        group_instance_id: str | None = None,
    ) -> dict[TopicPartition, ErrorCode]:
        """Commit offsets; one error per partition. O(partitions in the request).

        A member of the current generation commits in Stable or
        PreparingRebalance (REBALANCE_IN_PROGRESS while awaiting sync).
        Generation -1 with member id "" commits for a group with no members
        (creating it if need be: simple consumers, admin tools); a group with
        members answers UNKNOWN_MEMBER_ID. Metadata longer than
        ``offset.metadata.max.bytes`` (Java string length) answers
        OFFSET_METADATA_TOO_LARGE for its partition; the others commit.
        The records are written (the writer returns once they are durable)
        before the offsets are visible to :meth:`fetch_offsets`.
        """
        prepared = self.prepare_commit(group_id, generation_id, member_id, offsets, group_instance_id)
        return prepared.write_through(lambda records: self._groups.write(group_id, records))

    def prepare_commit(
        self,
        group_id: str,
        generation_id: int,
        member_id: str,
        offsets: Mapping[TopicPartition, OffsetCommit],
        group_instance_id: str | None = None,
    ) -> PreparedCommit:
        """Check a commit as :meth:`commit_offsets` does and make its records, without writing them.

        O(partitions in the request). The caller writes ``records`` to the
        group's partition of ``__consumer_offsets``, then calls
        :meth:`PreparedCommit.apply` (or applies first and
        :meth:`PreparedCommit.revert` if the write fails: the broker's
        batched appends), and answers with :meth:`PreparedCommit.answers`.
        Renews a committing member's session.
        """
        group = self._groups.get(group_id)
        if group is None:
            if generation_id >= 0:
                return PreparedCommit(dict.fromkeys(offsets, ErrorCode.illegal_generation))
            group = self._groups.create(group_id)
        state = group.state  # (read once: a commit is the hot path)
        error = self._validate_offset_commit(group, state, generation_id, member_id, group_instance_id)
        if error is None and state is GroupState.COMPLETING_REBALANCE:
            error = ErrorCode.rebalance_in_progress
        if error is not None:
            return PreparedCommit(dict.fromkeys(offsets, error))
        if state is GroupState.STABLE or state is GroupState.PREPARING_REBALANCE:
            self._membership.renew_session(group, group.member(member_id))
        values, errors = commit_values(offsets, self.clock.now_ms(), self.config.offset_metadata_max_bytes)
        return PreparedCommit(errors, offset_records(group_id, values), group, values)

    @staticmethod
    def _validate_offset_commit(
        group: GroupMetadata,
        state: GroupState,
        generation_id: int,
        member_id: str,
        group_instance_id: str | None,
    ) -> ErrorCode | None:
        if state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        if generation_id < 0 and state is GroupState.EMPTY:
            return None
        if generation_id >= 0 or member_id != "" or group_instance_id is not None:
            return group.validate_generation(member_id, group_instance_id, generation_id)
        return None if state is GroupState.EMPTY else ErrorCode.unknown_member_id

    # -- OffsetFetch -------------------------------------------------------

    def fetch_offsets(
        self, group_id: str, partitions: Iterable[TopicPartition] | None = None
    ) -> FetchOffsetsResult:
        """The committed offsets of ``partitions`` (offset -1 where none), or all of the group's.

        O(partitions in the request), or O(the group's offsets) for all.
        Answers whatever the group's state: a group may use Kafka only to
        store offsets.
        """
        group = self._groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return FetchOffsetsResult(ErrorCode.none, dict.fromkeys(partitions or (), NO_OFFSET))
        if partitions is None:
            return FetchOffsetsResult(
                ErrorCode.none,
                {partition: FetchedOffset.of(value) for partition, value in group.offsets.items()},
            )
        offsets = group.offsets
        return FetchOffsetsResult(
            ErrorCode.none, {partition: FetchedOffset.of(offsets.get(partition)) for partition in partitions}
        )

    # -- OffsetDelete and expiry -------------------------------------------

    def delete_offsets(self, group_id: str, partitions: Iterable[TopicPartition]) -> DeleteOffsetsResult:
        """OffsetDelete: forget committed offsets the group no longer consumes.

        O(partitions in the request). An Empty group may delete any; a
        consumer group with members may delete those of topics no member
        subscribes to (the others answer GROUP_SUBSCRIBED_TO_TOPIC); any
        other group answers NON_EMPTY_GROUP.
        """
        if not group_id:
            return DeleteOffsetsResult(ErrorCode.invalid_group_id)
        group = self._groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return DeleteOffsetsResult(ErrorCode.group_id_not_found)
        wanted = list(partitions)
        errors: dict[TopicPartition, ErrorCode] = {}
        if group.is_in(GroupState.EMPTY):
            eligible = wanted
        elif group.is_consumer_group:
            eligible = [tp for tp in wanted if not group.is_subscribed_to_topic(tp[0])]
            errors = {tp: ErrorCode.group_subscribed_to_topic for tp in wanted if tp not in eligible}
        else:
            return DeleteOffsetsResult(ErrorCode.non_empty_group)
        if eligible:
            self.cleanup_group(group, group.remove_offsets(eligible))
            errors.update(dict.fromkeys(eligible, ErrorCode.none))
        return DeleteOffsetsResult(ErrorCode.none, errors)

    def expire_offsets(self, now_ms: int | None = None) -> int:
        """Remove offsets past ``offsets.retention.minutes`` (Kafka's rules; see
        :meth:`GroupMetadata.remove_expired_offsets`), writing their tombstones.

        O(groups + offsets of all groups). An Empty group left with no
        offsets dies and is forgotten (with a tombstone of its metadata if it
        ever had a generation). Returns how many offsets were removed.
        """
        now = self.clock.now_ms() if now_ms is None else now_ms
        retention = self.config.offsets_retention_ms
        removed = 0
        for group in list(self._groups):
            removed += self.cleanup_group(group, group.remove_expired_offsets(now, retention))
        return removed

    def cleanup_group(self, group: GroupMetadata, removed: Collection[TopicPartition]) -> int:
        """Tombstone ``removed``; an Empty group with no offsets left becomes Dead and is dropped.

        Kafka's ``cleanupGroupMetadata``; returns how many offsets were
        removed. O(removed), plus O(the group's timers) if it is dropped.
        """
        if group.is_in(GroupState.EMPTY) and not group.has_offsets():
            group.transition_to(GroupState.DEAD)
        dropped = group.is_in(GroupState.DEAD) and self._groups.is_registered(group)
        if dropped:
            self._membership.forget(group)
        # Offsets-only groups never wrote metadata: no tombstone for it.
        records = tombstones(group.group_id, removed, group_too=dropped and group.generation_id > 0)
        if records:
            error = self._groups.write(group.group_id, records)
            if error != ErrorCode.none:
                log.warning("could not write tombstones of group %s: %s", group.group_id, error.name)
        return len(removed)
