"""Kafka's consumer-group coordinator, without sockets: groups, rebalances, committed offsets.

- :mod:`~logstore.coordinator.group.group_coordinator`: :class:`GroupCoordinator`, the
  facade the broker calls for JoinGroup/SyncGroup/Heartbeat/LeaveGroup, the
  offset APIs and the group admin APIs;
- :mod:`~logstore.coordinator.group.classic_membership`: joins, syncs, heartbeats, leaves,
  rebalances and sessions (the group state machine as the APIs drive it);
- :mod:`~logstore.coordinator.group.offsets`: commits, fetches, deletes and expiry
  of committed offsets;
- :mod:`~logstore.coordinator.group.persistence`: the groups by id and their
  ``__consumer_offsets`` records: what is written, and loading it back;
- :mod:`~logstore.coordinator.group.classic_group`: a group's members and state machine;
- :mod:`~logstore.coordinator.group.consumer_membership`,
  :mod:`~logstore.coordinator.group.consumer_group`,
  :mod:`~logstore.coordinator.group.consumer_records`,
  :mod:`~logstore.coordinator.group.server_assignors`: the consumer group protocol (KIP-848):
  heartbeats, the group/assignment/member epochs and reconciliation, its
  ``__consumer_offsets`` records, the server-side assignors;
- :mod:`~logstore.coordinator.group.group_configs`: the groups' dynamic configs
  (the GROUP config resource);
- :mod:`~logstore.coordinator.group.offsets_schemas`: the ``__consumer_offsets`` records in
  Kafka's byte layouts;
- :mod:`~logstore.coordinator.clock` and :mod:`~logstore.coordinator.group.coordinator_config`:
  time (:class:`LoopClock`, :class:`ManualClock`) and the broker settings.

It depends on :mod:`logstore.storage` and :mod:`logstore.records` at most,
never on :mod:`logstore.broker`, which wires it to the Kafka APIs.
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
