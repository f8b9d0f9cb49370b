"""The share coordinator on the broker (KIP-932): built at start, ticked on the loop.

:func:`start_share_coordinator` builds a
:class:`~logstore.coordinator.share.share_coordinator.ShareCoordinator` over
the broker's metadata (topics and ids) and replica manager (each partition's
log start and high watermark), with the ``group.share.*`` broker settings,
and runs its :meth:`tick` every :data:`TICK_MS` (member session timeouts,
acquisition locks). Records that become available again wake the
ShareFetches waiting on :func:`share_key` in the fetch purgatory.

State is in memory on this broker; in a cluster the share coordinator of a
group is this broker's only while it coordinates the group (remaining work:
``__share_group_state`` and the state APIs between brokers).
"""

from __future__ import annotations

import time
from collections.abc import Hashable

from logstore.broker.context import Services
from logstore.broker.groups.consumer_protocol import MetadataTopics
from logstore.coordinator.clock import LoopClock, Repeating
from logstore.coordinator.share.share_config import ShareConfig
from logstore.coordinator.share.share_coordinator import ShareCoordinator

TICK_MS = 100


def share_key(group_id: str, topic: str, partition: int) -> Hashable:
    """The purgatory key a ShareFetch waits on for records released in its share-partition."""
    return ("share", group_id, topic, partition)


def now_ms() -> int:
    return int(time.monotonic() * 1000)


def start_share_coordinator(broker: Services) -> tuple[ShareCoordinator, Repeating]:
    """The broker's share coordinator and its running ticker (stop it at close)."""
    replicas = broker.replica_manager

    def log_offsets(topic: str, partition: int) -> tuple[int, int] | None:
        found = replicas.leader_partition(topic, partition)
        if isinstance(found, int):  # an ErrorCode: not led here
            return None
        return found.log.log_start_offset, found.log.high_watermark

    def available(group_id: str, topic: str, partition: int) -> None:
        replicas.purgatory.notify(share_key(group_id, topic, partition))

    config = ShareConfig.from_properties(broker.config.values)
    coordinator = ShareCoordinator(
        config,
        MetadataTopics(broker.metadata),
        log_offsets,
        available,
    )
    ticker = Repeating(LoopClock(), TICK_MS, lambda: coordinator.tick(now_ms()))
    ticker.start()
    return coordinator, ticker


def share_coordinator_of(broker: Services) -> ShareCoordinator:
    coordinator = broker.share_coordinator
    if coordinator is None:  # start() builds it before listening
        raise RuntimeError("the share coordinator is not running")
    return coordinator
