"""Kafka's consumer-group coordinator, without sockets: groups, rebalances, committed offsets.

- :mod:`~logstore.coordinator.group`: a group's members and state machine;
- :mod:`~logstore.coordinator.coordinator`: :class:`GroupCoordinator`, which
  drives JoinGroup/SyncGroup/Heartbeat/LeaveGroup and the offset APIs on a
  :class:`Clock`;
- :mod:`~logstore.coordinator.schemas`: the ``__consumer_offsets`` records in
  Kafka's byte layouts.

It depends on :mod:`logstore.storage` and :mod:`logstore.records` at most,
never on :mod:`logstore.broker`, which wires it to the Kafka APIs.
"""

from logstore.coordinator.coordinator import (
    Clock,
    CoordinatorConfig,
    DeleteOffsetsResult,
    FetchedOffset,
    FetchOffsetsResult,
    GroupCoordinator,
    GroupDescription,
    GroupOverview,
    LeaveMemberResult,
    LeaveResult,
    LoopClock,
    ManualClock,
    MemberDescription,
    PreparedCommit,
    TimerHandle,
    WriteError,
    Writer,
    partition_for,
)
from logstore.coordinator.group import (
    GroupMetadata,
    GroupState,
    InvalidTransitionError,
    JoinMember,
    JoinResult,
    MemberMetadata,
    SyncResult,
)

__all__ = [
    "Clock",
    "CoordinatorConfig",
    "DeleteOffsetsResult",
    "FetchOffsetsResult",
    "FetchedOffset",
    "GroupCoordinator",
    "GroupDescription",
    "GroupMetadata",
    "GroupOverview",
    "GroupState",
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
