"""Kafka's coordinators, without sockets: consumer groups and transactions.

- :mod:`logstore.coordinator.group`: the consumer-group coordinator, classic
  groups and consumer groups (KIP-848), their committed offsets and their
  records on ``__consumer_offsets``
  (:class:`~logstore.coordinator.group.group_coordinator.GroupCoordinator` is
  what the broker calls);
- :mod:`logstore.coordinator.txn`: the transaction coordinator
  (:class:`~logstore.coordinator.txn.transaction_coordinator.TransactionCoordinator`)
  and its records on ``__transaction_state``;
- shared by both: :mod:`~logstore.coordinator.internal_topics` (the topics,
  and the partition of a group or transactional id),
  :mod:`~logstore.coordinator.record_codec` (Kafka's primitive types in those
  records), :mod:`~logstore.coordinator.java_strings` (Java's
  ``String.hashCode`` and kin) and :mod:`~logstore.coordinator.clock` (time
  and timers).

Layering: this package sits above :mod:`logstore.records`,
:mod:`logstore.storage`, :mod:`logstore.protocol` and :mod:`logstore.security`
and below :mod:`logstore.broker`, which wires it to the Kafka APIs: it never
imports the broker, the cluster, the client, the CLI or the embedded engine
(what it needs from the broker is a Protocol it owns, e.g.
:class:`~logstore.coordinator.txn.transaction_coordinator.TransactionIO`,
:class:`~logstore.coordinator.group.consumer_membership.TopicCatalog`). ``txn``
does not import ``group``; the shared modules import neither.

The names below are re-exported for code written against the flat package of
before; new code imports them from the modules that define them.
"""

from logstore.coordinator.clock import Clock, LoopClock, ManualClock, TimerHandle
from logstore.coordinator.group.classic_group import (
    GroupMetadata,
    GroupState,
    InvalidTransitionError,
    JoinMember,
    JoinResult,
    MemberMetadata,
    SyncResult,
)
from logstore.coordinator.group.classic_membership import LeaveMemberResult, LeaveResult
from logstore.coordinator.group.consumer_group import ConsumerGroup, ConsumerGroupMember, ConsumerGroupState
from logstore.coordinator.group.consumer_membership import HeartbeatRequest, HeartbeatResult
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.group_coordinator import (
    GroupCoordinator,
    GroupDescription,
    GroupOverview,
    MemberDescription,
)
from logstore.coordinator.group.offsets import (
    DeleteOffsetsResult,
    FetchedOffset,
    FetchOffsetsResult,
    PreparedCommit,
)
from logstore.coordinator.group.persistence import WriteError, Writer
from logstore.coordinator.internal_topics import partition_for

__all__ = [
    "Clock",
    "ConsumerGroup",
    "ConsumerGroupMember",
    "ConsumerGroupState",
    "CoordinatorConfig",
    "DeleteOffsetsResult",
    "FetchOffsetsResult",
    "FetchedOffset",
    "GroupCoordinator",
    "GroupDescription",
    "GroupMetadata",
    "GroupOverview",
    "GroupState",
    "HeartbeatRequest",
    "HeartbeatResult",
    "InvalidTransitionError",
    "JoinMember",
    "JoinResult",
    "LeaveMemberResult",
    "LeaveResult",
    "LoopClock",
    "ManualClock",
    "MemberDescription",
    "MemberMetadata",
    "PreparedCommit",
    "SyncResult",
    "TimerHandle",
    "WriteError",
    "Writer",
    "partition_for",
]
