"""Membership of consumer-protocol groups (KIP-848): ConsumerGroupHeartbeat, leaves, fencing, sessions.

:class:`ConsumerMembershipManager` is the heartbeat half of Kafka's
``GroupMetadataManager`` for consumer groups (its offsets, deletion and
description: :mod:`~logstore.coordinator.group.consumer_group_manager`). One
heartbeat does what JoinGroup, SyncGroup and Heartbeat do together in the
classic protocol:

1. the member is created or updated; when its subscription changes, or the
   subscribed topics change (a topic created, deleted or grown), the *group
   epoch* is bumped;
2. when the group epoch is ahead of the *assignment epoch*, a new target
   assignment is computed by the server-side assignor the members ask for
   ("uniform" or "range"; the first of ``group.consumer.assignors`` by default);
3. the member takes one step toward its target
   (:class:`~logstore.coordinator.group.consumer_group.Reconciliation`): revoke
   first, then receive the partitions no other member still holds.

Every change is a list of records (:mod:`~logstore.coordinator.group.consumer_records`)
written to the group's ``__consumer_offsets`` partition first and replayed
into the group after
(:meth:`~logstore.coordinator.group.consumer_group_store.ConsumerGroupStore.replay`); loading a
partition replays the same records, so a restarted coordinator holds the
groups, members and epochs the old one held, and members carry on.

Timers: a session timer per member (``consumer.session.timeout.ms`` of the
group, restarted by every heartbeat) and, while a member must revoke
partitions, a rebalance timer (its rebalance timeout); either one that fires
fences the member (it is removed and the group epoch bumped). A leave
(member epoch -1) fences at once; a static member's leave (-2) keeps its
partitions for its return under the same instance id within its session.

A group id names a classic group or a consumer group, never both: a heartbeat
that joins (epoch 0) an Empty classic group converts it (its offsets move
over); any other heartbeat to a classic group is GROUP_ID_NOT_FOUND, as in
Kafka with the online upgrade of a non-empty group unavailable.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Protocol

from kio.schema.errors import ErrorCode

from logstore.coordinator.clock import Clock, TimerHandle
from logstore.coordinator.group.classic_group import GroupMetadata, GroupState
from logstore.coordinator.group.classic_membership import MembershipManager
from logstore.coordinator.group.consumer_group import (
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroup,
    ConsumerGroupError,
    ConsumerGroupMember,
    MemberState,
    Reconciliation,
    is_subset,
)
from logstore.coordinator.group.consumer_group_store import (
    ConsumerGroupStore,
    group_not_found,
    not_consumer_group,
)
from logstore.coordinator.group.consumer_records import (
    ASSIGNMENT_EPOCH,
    CURRENT_ASSIGNMENT,
    EMPTY_ASSIGNMENT,
    GROUP_EPOCH,
    MEMBER_SUBSCRIPTION,
    SUBSCRIPTION_METADATA,
    TARGET_ASSIGNMENT,
    Assignment,
    AssignmentEpochValue,
    ConsumerGroupKey,
    ConsumerRecord,
    GroupEpochValue,
    SubscriptionMetadataValue,
    TargetAssignmentValue,
    TopicMetadata,
    assignment,
)
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.group_configs import GroupConfigs
from logstore.coordinator.group.offsets_schemas import group_metadata_record
from logstore.coordinator.group.persistence import GroupMetadataManager
from logstore.coordinator.group.server_assignors import AssignorError, MemberSpec, make_assignors
from logstore.coordinator.internal_topics import OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC
from logstore.coordinator.record_codec import Record

log = logging.getLogger(__name__)

INTERNAL_TOPICS = frozenset({OFFSETS_TOPIC, TRANSACTION_STATE_TOPIC, "__share_group_state"})
"""Topics a subscription regex never matches (Kafka's ``Topic.isInternal``)."""

CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1


class TopicCatalog(Protocol):
    """The topics the coordinator assigns from (the broker's metadata cache behind a narrow face)."""

    def describe_topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        """(topic id, partition count) of a topic, or None if it does not exist."""

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic of that id, or None."""

    def topic_names(self) -> Iterable[str]:
        """Every topic's name (for regex subscriptions)."""


class NoTopics:
    """A catalog without topics (a coordinator with no broker behind it)."""

    def describe_topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None

    def topic_names(self) -> Iterable[str]:
        return ()


# -- requests and results -------------------------------------------------------------


@dataclass(frozen=True)
class HeartbeatRequest:
    """A ConsumerGroupHeartbeat as the coordinator reads it.

    Optional fields are None (or -1 for the rebalance timeout) when the member
    did not send them: "unchanged since the last heartbeat". ``owned`` is the
    request's topic partitions as sent.
    """

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: tuple[tuple[uuid.UUID, tuple[int, ...]], ...] | None = None
    client_id: str = ""
    client_host: str = ""
    api_version: int = 1


@dataclass(frozen=True)
class HeartbeatResult:
    """The answer: an error (with Kafka's message), or the member's id, epoch and maybe assignment.

    ``assignment`` is None when the member's assignment did not change and it
    sent no full request; ``wrote`` says whether records were written (the
    broker then waits for their replication).
    """

    error: ErrorCode
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None
    wrote: bool = False


def _unwritten(error: ErrorCode) -> HeartbeatResult:
    """The answer when the group's records could not be written."""
    return HeartbeatResult(error, f"the group's records could not be written: {error.name}")


def _static_owner(group: ConsumerGroup, instance_id: str, member_id: str) -> ConsumerGroupMember:
    """The static member of ``instance_id``, which must be ``member_id`` (Kafka's
    ``throwIfStaticMemberIsUnknown`` and ``throwIfInstanceIdIsFenced``). O(1)."""
    existing = group.static_member(instance_id)
    if existing is None:
        raise ConsumerGroupError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")
    if existing.member_id != member_id:
        raise ConsumerGroupError(
            ErrorCode.fenced_instance_id,
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{existing.member_id}.",
        )
    return existing


def _blank(value: str | None) -> bool:
    """Kafka's ``throwIfEmptyString``: set, but empty once trimmed."""
    return value is not None and not value.strip()


class ConsumerMembershipManager:
    """ConsumerGroupHeartbeat on one coordinator: members join, reconcile, leave and are fenced.

    All calls run on the thread of the clock's event loop. Complexities are per
    call, in terms of the group's *members*, the *partitions* of its subscribed
    topics and the *topics* of the subscriptions; the assignor's own cost is on
    :mod:`~logstore.coordinator.group.server_assignors`.

    Invariants: the groups change only through the store (records written,
    then replayed); a member has a session timer from its first heartbeat
    until it is fenced or its group unloaded, and a rebalance timer only while
    it is in UNREVOKED_PARTITIONS.
    """

    def __init__(
        self,
        config: CoordinatorConfig,
        clock: Clock,
        store: ConsumerGroupStore,
        classic: GroupMetadataManager,
        membership: MembershipManager,
        catalog: TopicCatalog | None = None,
        group_configs: GroupConfigs | None = None,
    ) -> None:
        self.config = config
        self.clock = clock
        self.catalog: TopicCatalog = catalog or NoTopics()
        self.group_configs = group_configs or GroupConfigs(config)
        self._store = store
        self._classic = classic
        self._membership = membership
        self._assignors = make_assignors(config.group_consumer_assignors)
        self.default_assignor = next(iter(self._assignors))
        self._sessions: dict[tuple[str, str], TimerHandle] = {}
        self._rebalances: dict[tuple[str, str], TimerHandle] = {}
        self._patterns: dict[str, re.Pattern[str]] = {}

    # -- ConsumerGroupHeartbeat ---------------------------------------------------------

    def heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        """Serve a ConsumerGroupHeartbeat; never raises for bad input (an error code instead).

        O(members + partitions + topics), plus the assignor when the group epoch moved.
        """
        try:
            self._validate(request)
            if request.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH):
                return self._leave(request)
            return self._heartbeat(request)
        except ConsumerGroupError as e:
            return HeartbeatResult(e.error, e.message)

    def _validate(self, request: HeartbeatRequest) -> None:
        """Kafka's ``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
        epoch = request.member_epoch

        def invalid(message: str) -> ConsumerGroupError:
            return ConsumerGroupError(ErrorCode.invalid_request, message)

        if (
            request.api_version >= CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION
            or epoch > 0
            or epoch == LEAVE_GROUP_MEMBER_EPOCH
        ) and not request.member_id.strip():
            raise invalid("MemberId can't be empty.")
        if not request.group_id.strip():
            raise invalid("GroupId can't be empty.")
        if _blank(request.instance_id):
            raise invalid("InstanceId can't be empty.")
        if _blank(request.rack_id):
            raise invalid("RackId can't be empty.")
        if epoch == 0:
            if request.rebalance_timeout_ms == -1:
                raise invalid("RebalanceTimeoutMs must be provided in first request.")
            if request.owned is None or request.owned:
                raise invalid("TopicPartitions must be empty when (re-)joining.")
            if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
                raise invalid(
                    "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
                )
        elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            if request.instance_id is None:
                raise invalid("InstanceId can't be null.")
        elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
            raise invalid("MemberEpoch is invalid.")
        if request.server_assignor is not None and request.server_assignor not in self._assignors:
            raise ConsumerGroupError(
                ErrorCode.unsupported_assignor,
                f"ServerAssignor {request.server_assignor} is not supported. "
                f"Supported assignors: {', '.join(self._assignors)}.",
            )
        if request.subscribed_topic_regex:
            self._pattern(request.subscribed_topic_regex)

    def _pattern(self, regex: str) -> re.Pattern[str]:
        pattern = self._patterns.get(regex)
        if pattern is None:
            try:
                pattern = re.compile(regex)
            except re.error as e:
                raise ConsumerGroupError(
                    ErrorCode.invalid_regular_expression,
                    f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {e}.",
                ) from None
            if len(self._patterns) >= 1024:
                self._patterns.clear()
            self._patterns[regex] = pattern
        return pattern

    def _heartbeat(self, request: HeartbeatRequest) -> HeartbeatResult:
        group_id = request.group_id
        epoch = request.member_epoch
        owned = None if request.owned is None else assignment(request.owned)
        records: list[ConsumerRecord] = []
        raw: list[Record] = []
        after: list[Callable[[], None]] = []
        group = self._group_for_heartbeat(group_id, epoch == 0, raw, after)
        member_id = request.member_id or str(uuid.uuid4())  # v0 lets the coordinator choose
        if len(group.members) >= self.config.group_consumer_max_size and member_id not in group.members:
            raise ConsumerGroupError(
                ErrorCode.group_max_size_reached,
                "The consumer group has reached its maximum capacity of "
                f"{self.config.group_consumer_max_size} members.",
            )
        if request.instance_id is None:
            member = self._dynamic_member(group, member_id, epoch, owned)
        else:
            member = self._static_member(group, member_id, epoch, request.instance_id, owned, records)
        known = member.member_id in group.members
        updated = dataclasses.replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=request.server_assignor
            if request.server_assignor is not None
            else member.server_assignor,
            subscribed_topic_names=(
                tuple(sorted(set(request.subscribed_topic_names)))
                if request.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                (request.subscribed_topic_regex or None)
                if request.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=request.client_id,
            client_host=request.client_host,
        )
        # 1. The member, and the group epoch if the subscriptions or the subscribed topics changed.
        bump = group.group_epoch == 0
        if not known or updated.subscription() != member.subscription():
            records.append((ConsumerGroupKey(MEMBER_SUBSCRIPTION, group_id, member_id), updated.subscription()))
            bump = bump or (
                updated.subscribed_topic_names != member.subscribed_topic_names
                or updated.subscribed_topic_regex != member.subscribed_topic_regex
            )
        metadata, metadata_record = self._subscription_metadata(group, member if known else None, updated)
        if metadata_record:
            records += metadata_record
            bump = True
        group_epoch = group.group_epoch
        if bump:
            group_epoch += 1
            records.append((ConsumerGroupKey(GROUP_EPOCH, group_id), GroupEpochValue(group_epoch)))
            log.info("group %s: group epoch %d", group_id, group_epoch)
        # 2. The target assignment, if the group epoch moved past it.
        if group_epoch > group.assignment_epoch:
            target = self._update_target(
                group, group_epoch, member if known else None, updated, metadata, records
            )
            target_epoch = group_epoch
        else:
            target_epoch = group.assignment_epoch
            target = group.target_of(updated.member_id, updated.instance_id)
        # 3. One step of the member toward its target.
        reconciled = updated
        if not updated.is_reconciled_to(target_epoch):
            reconciled = Reconciliation(updated, target_epoch, target, group.partition_epoch, owned).next()
        if reconciled != updated:
            records.append((ConsumerGroupKey(CURRENT_ASSIGNMENT, group_id, member_id), reconciled.current_assignment()))
        error = self._store.write(group_id, records, raw)
        if error != ErrorCode.none:
            return _unwritten(error)
        for action in after:
            action()
        if reconciled != updated:
            if reconciled.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(group_id, member_id, reconciled.member_epoch,
                                                 reconciled.rebalance_timeout_ms)  # fmt: skip
            else:
                self._cancel(self._rebalances, (group_id, member_id))
        self._schedule_session_timeout(group_id, member_id)
        full = epoch == 0 or (
            request.rebalance_timeout_ms != -1
            and request.subscribed_topic_names is not None
            and request.owned is not None
        )
        changed = reconciled.assigned != member.assigned
        return HeartbeatResult(
            ErrorCode.none,
            member_id=member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=self.group_configs.heartbeat_interval_ms(group_id),
            assignment=reconciled.assigned if full or changed else None,
            wrote=bool(records or raw),
        )

    def _group_for_heartbeat(
        self, group_id: str, create: bool, raw: list[Record], after: list[Callable[[], None]]
    ) -> ConsumerGroup:
        """Kafka's ``getOrMaybeCreateConsumerGroup``: the group, a new one (not registered until its
        records are replayed), or an Empty classic group's replacement (its tombstone in ``raw``, the
        move of its offsets in ``after``)."""
        group = self._store.get(group_id)
        if group is not None:
            return group
        classic = self._classic.get(group_id)
        if classic is None or classic.is_in(GroupState.DEAD):
            if not create:
                raise group_not_found(group_id)
            return ConsumerGroup(group_id)
        if create and classic.is_in(GroupState.EMPTY):
            if classic.generation_id > 0:
                raw.append(group_metadata_record(group_id, None))
            after.append(lambda: self._adopt_classic(classic))
            return ConsumerGroup(group_id)
        raise not_consumer_group(group_id)

    def _adopt_classic(self, classic: GroupMetadata) -> None:
        """An Empty classic group became this consumer group: forget it, keep its offsets."""
        log.info("group %s: the empty classic group is now a consumer group", classic.group_id)
        classic.transition_to(GroupState.DEAD)
        self._membership.forget(classic)
        group = self._store.get(classic.group_id)
        assert group is not None, f"the consumer group {classic.group_id} was not created"
        for partition, value in classic.offsets.items():
            group.offsets.setdefault(partition, value)

    def _dynamic_member(
        self, group: ConsumerGroup, member_id: str, epoch: int, owned: Assignment | None
    ) -> ConsumerGroupMember:
        member = group.members.get(member_id)
        if member is None:
            if epoch != 0:
                raise ConsumerGroupError(
                    ErrorCode.unknown_member_id,
                    f"Member {member_id} is not a member of group {group.group_id}.",
                )
            log.info("group %s: member %s joins", group.group_id, member_id)
            return ConsumerGroupMember(member_id)
        self._check_epoch(member, epoch, owned)
        return member

    def _static_member(
        self,
        group: ConsumerGroup,
        member_id: str,
        epoch: int,
        instance_id: str,
        owned: Assignment | None,
        records: list[ConsumerRecord],
    ) -> ConsumerGroupMember:
        if epoch == 0:
            existing = group.static_member(instance_id)
            if existing is None:
                log.info("group %s: static member %s (%s) joins", group.group_id, member_id, instance_id)
                return group.members.get(member_id) or ConsumerGroupMember(member_id)
            if existing.member_epoch != LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                raise ConsumerGroupError(
                    ErrorCode.unreleased_instance_id,
                    f"Static member {member_id} with instance id {instance_id} cannot join the group because "
                    f"the instance id is owned by {existing.member_id} member.",
                )
            replacement = dataclasses.replace(
                existing, member_id=member_id, member_epoch=0, previous_member_epoch=0
            )
            records.extend(self._store.member_tombstones(group.group_id, existing.member_id))
            records.append((ConsumerGroupKey(MEMBER_SUBSCRIPTION, group.group_id, member_id), replacement.subscription()))
            records.append(
                (ConsumerGroupKey(TARGET_ASSIGNMENT, group.group_id, member_id),
                 TargetAssignmentValue(group.target_of(existing.member_id)))
            )  # fmt: skip
            records.append(
                (ConsumerGroupKey(CURRENT_ASSIGNMENT, group.group_id, member_id), replacement.current_assignment())
            )
            log.info("group %s: static member %s (%s) replaces %s", group.group_id, member_id, instance_id,
                     existing.member_id)  # fmt: skip
            return replacement
        existing = _static_owner(group, instance_id, member_id)
        self._check_epoch(existing, epoch, owned)
        return existing

    @staticmethod
    def _check_epoch(member: ConsumerGroupMember, epoch: int, owned: Assignment | None) -> None:
        """Kafka's ``throwIfConsumerGroupMemberEpochIsInvalid``: the member's epoch, or its previous
        one with nothing owned beyond its assignment (the answer that moved it may have been lost)."""
        if epoch > member.member_epoch:
            raise ConsumerGroupError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a greater member epoch ({epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )
        if epoch < member.member_epoch and (
            epoch != member.previous_member_epoch or not is_subset(owned, member.assigned)
        ):
            raise ConsumerGroupError(
                ErrorCode.fenced_member_epoch,
                f"The consumer group member has a smaller member epoch ({epoch}) than the one known by the "
                f"group coordinator ({member.member_epoch}). The member must abandon all its partitions and rejoin.",
            )

    # -- subscriptions and the target assignment ----------------------------------------

    def _member_topics(self, member: ConsumerGroupMember) -> set[str]:
        """The topic names a member subscribes to: its names and its regex's matches. O(topics)."""
        topics = set(member.subscribed_topic_names)
        if member.subscribed_topic_regex:
            topics |= self._regex_topics(member.subscribed_topic_regex)
        return topics

    def _regex_topics(self, regex: str) -> set[str]:
        try:
            pattern = self._pattern(regex)
        except ConsumerGroupError:
            return set()
        return {
            name
            for name in self.catalog.topic_names()
            if name not in INTERNAL_TOPICS and pattern.fullmatch(name)
        }

    def group_topics(self, group: ConsumerGroup, replacing: ConsumerGroupMember | None = None,
                     by: ConsumerGroupMember | None = None) -> set[str]:  # fmt: skip
        """The topic names the group subscribes to, by name or regex, with ``by`` in place of
        ``replacing`` (a member of the group, or None). O(distinct names + regexes × topics)."""
        names = set(group.topic_names())
        regexes = set(group.regexes())
        stored = group.members.get(replacing.member_id) if replacing is not None else None
        if stored is not None:
            for name in stored.subscribed_topic_names:
                if group.subscribers(name) <= 1:
                    names.discard(name)
            regex = stored.subscribed_topic_regex
            if regex and group.regex_subscribers(regex) <= 1:
                regexes.discard(regex)
        if by is not None:
            names.update(by.subscribed_topic_names)
            if by.subscribed_topic_regex:
                regexes.add(by.subscribed_topic_regex)
        for regex in regexes:
            names |= self._regex_topics(regex)
        return names

    def _subscription_metadata(
        self, group: ConsumerGroup, replacing: ConsumerGroupMember | None, by: ConsumerGroupMember | None
    ) -> tuple[dict[str, TopicMetadata], list[ConsumerRecord]]:
        """The subscribed topics that exist, with their ids and partition counts, and the record of
        them if they are not the group's (none if they are). O(topics)."""
        metadata = {}
        for name in sorted(self.group_topics(group, replacing, by)):
            described = self.catalog.describe_topic(name)
            if described is not None:
                metadata[name] = TopicMetadata(name, described[0], described[1])
        if metadata == group.subscription_metadata:
            return metadata, []
        value = SubscriptionMetadataValue(tuple(sorted(metadata.values())))
        return metadata, [(ConsumerGroupKey(SUBSCRIPTION_METADATA, group.group_id), value)]

    def _update_target(
        self,
        group: ConsumerGroup,
        group_epoch: int,
        old: ConsumerGroupMember | None,
        updated: ConsumerGroupMember,
        metadata: Mapping[str, TopicMetadata],
        records: list[ConsumerRecord],
    ) -> Assignment:
        """Kafka's ``updateTargetAssignment``: run the assignor; records for the targets that changed
        and the new assignment epoch; ``updated``'s new target. O(members × topics) + the assignor."""
        name = group.preferred_assignor(old, updated) or self.default_assignor
        ids = {topic.name: topic.topic_id for topic in metadata.values()}

        def spec(member: ConsumerGroupMember, current: Assignment) -> MemberSpec:
            topic_ids = frozenset(ids[t] for t in self._member_topics(member) if t in ids)
            return MemberSpec(member.instance_id, topic_ids, current)

        specs = {m.member_id: spec(m, group.target_assignment.get(m.member_id, EMPTY_ASSIGNMENT))
                 for m in group.members.values()}  # fmt: skip
        specs[updated.member_id] = spec(updated, group.target_of(updated.member_id, updated.instance_id))
        predecessor = (
            group.static_members.get(updated.instance_id) if updated.instance_id is not None else None
        )
        if predecessor is not None and predecessor != updated.member_id:
            specs.pop(predecessor, None)
        try:
            targets = self._assignors[name].assign(
                specs, {t.topic_id: t.partitions for t in metadata.values()}
            )
        except AssignorError as e:
            raise ConsumerGroupError(
                ErrorCode.unknown_server_error,
                f"Failed to compute a new target assignment for epoch {group_epoch}: {e}",
            ) from None
        for member_id in sorted(specs):
            if targets[member_id] != group.target_assignment.get(member_id):
                records.append((ConsumerGroupKey(TARGET_ASSIGNMENT, group.group_id, member_id),
                                TargetAssignmentValue(targets[member_id])))  # fmt: skip
        records.append((ConsumerGroupKey(ASSIGNMENT_EPOCH, group.group_id), AssignmentEpochValue(group_epoch)))
        log.info("group %s: target assignment of epoch %d computed by %r", group.group_id, group_epoch, name)
        return targets[updated.member_id]

    # -- leaving and fencing --------------------------------------------------------------

    def _leave(self, request: HeartbeatRequest) -> HeartbeatResult:
        group = self._store.consumer_group(request.group_id)
        member_id = request.member_id
        if request.instance_id is None:
            member = group.member(member_id)
            log.info("group %s: member %s leaves", group.group_id, member_id)
        else:
            member = _static_owner(group, request.instance_id, member_id)
            if request.member_epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
                log.info("group %s: static member %s leaves for now", group.group_id, member_id)
                left = dataclasses.replace(
                    member, member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH, pending_revocation=EMPTY_ASSIGNMENT
                )
                record = (
                    ConsumerGroupKey(CURRENT_ASSIGNMENT, group.group_id, member.member_id),
                    left.current_assignment(),
                )
                error = self._store.write(group.group_id, [record])
                if error != ErrorCode.none:
                    return _unwritten(error)
                self._cancel(self._rebalances, (group.group_id, member.member_id))
                return HeartbeatResult(
                    ErrorCode.none,
                    member_id=member.member_id,
                    member_epoch=LEAVE_GROUP_STATIC_MEMBER_EPOCH,
                    wrote=True,
                )
        error = self._fence(group, member)
        if error != ErrorCode.none:
            return _unwritten(error)
        return HeartbeatResult(
            ErrorCode.none, member_id=member_id, member_epoch=request.member_epoch, wrote=True
        )

    def _fence(self, group: ConsumerGroup, member: ConsumerGroupMember) -> ErrorCode:
        """Remove a member and bump the group epoch (Kafka's ``consumerGroupFenceMember``). O(topics)."""
        group_id = group.group_id
        records = self._store.member_tombstones(group_id, member.member_id)
        records += self._subscription_metadata(group, member, None)[1]
        records.append((ConsumerGroupKey(GROUP_EPOCH, group_id), GroupEpochValue(group.group_epoch + 1)))
        error = self._store.write(group_id, records)
        if error == ErrorCode.none:
            self._cancel_timers(group_id, member.member_id)
        return error

    # -- timers -----------------------------------------------------------------------

    @staticmethod
    def _cancel(timers: dict[tuple[str, str], TimerHandle], key: tuple[str, str]) -> None:
        handle = timers.pop(key, None)
        if handle is not None:
            handle.cancel()

    def _cancel_timers(self, group_id: str, member_id: str) -> None:
        self._cancel(self._sessions, (group_id, member_id))
        self._cancel(self._rebalances, (group_id, member_id))

    def _schedule_session_timeout(self, group_id: str, member_id: str) -> None:
        key = (group_id, member_id)
        self._cancel(self._sessions, key)
        timeout = self.group_configs.session_timeout_ms(group_id)
        self._sessions[key] = self.clock.call_later(timeout, lambda: self._on_session_expired(key))

    def _on_session_expired(self, key: tuple[str, str]) -> None:
        self._sessions.pop(key, None)
        self._fence_expired(key, None, "its session expired")

    def _schedule_rebalance_timeout(self, group_id: str, member_id: str, epoch: int, timeout_ms: int) -> None:
        key = (group_id, member_id)
        self._cancel(self._rebalances, key)
        self._rebalances[key] = self.clock.call_later(
            max(timeout_ms, 0), lambda: self._on_rebalance_expired(key, epoch, timeout_ms)
        )

    def _on_rebalance_expired(self, key: tuple[str, str], epoch: int, timeout_ms: int) -> None:
        self._rebalances.pop(key, None)
        self._fence_expired(key, epoch, f"it did not leave epoch {epoch} within {timeout_ms} ms")

    def _fence_expired(self, key: tuple[str, str], epoch: int | None, why: str) -> None:
        """A member's timer fired: fence the member if it is still there (at ``epoch``, if given)."""
        group = self._store.get(key[0])
        member = group.members.get(key[1]) if group is not None else None
        if group is None or member is None or (epoch is not None and member.member_epoch != epoch):
            return
        log.info("group %s: member %s fenced: %s", key[0], key[1], why)
        error = self._fence(group, member)
        if error != ErrorCode.none:
            log.warning("group %s: could not fence %s: %s", key[0], key[1], error.name)

    def start_member_timers(self, group: ConsumerGroup) -> None:
        """Kafka's ``onLoaded``: sessions for every member, rebalance timers where revoking. O(members)."""
        for member in group.members.values():
            self._schedule_session_timeout(group.group_id, member.member_id)
            if member.state is MemberState.UNREVOKED_PARTITIONS:
                self._schedule_rebalance_timeout(
                    group.group_id, member.member_id, member.member_epoch, member.rebalance_timeout_ms
                )

    def cancel_member_timers(self, group: ConsumerGroup) -> None:
        """Cancel the timers of a group's members (it is unloaded). O(its members)."""
        for member_id in group.members:
            self._cancel_timers(group.group_id, member_id)

    def close(self) -> None:
        """Stop every member timer. O(members of all groups)."""
        for timers in (self._sessions, self._rebalances):
            for handle in timers.values():
                handle.cancel()
            timers.clear()
