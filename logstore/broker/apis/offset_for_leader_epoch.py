"""OffsetForLeaderEpoch (key 23): where a leader epoch ends in the leader's log (KIP-101, KIP-279).

For each partition this broker leads: the largest epoch in its leader-epoch
cache at or below the one asked for, and the offset where that epoch ends
(the start of the next epoch, or the log end for the current one); epoch and
offset -1 when the log holds nothing that old. Followers truncate by it before
fetching; consumers (KIP-320) check their position after a leader change.
The ``current_leader_epoch`` a request carries is checked first:
FENCED_LEADER_EPOCH if older than the leader's, UNKNOWN_LEADER_EPOCH if newer.

With an authorizer (security/operations.py): CLUSTER_ACTION on the cluster
(followers) allows every topic; otherwise DESCRIBE on each topic, else
TOPIC_AUTHORIZATION_FAILED for its partitions.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.replication.partition import Partition
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType


def _end_offset(
    ctx: RequestContext, topic: str, index: int, current: int, epoch: int
) -> tuple[ErrorCode, int, int]:
    partition = ctx.broker.replica_manager.leader_partition(topic, index)
    if not isinstance(partition, Partition):
        return partition, -1, -1
    error = partition.check_leader_epoch(current)
    if error != ErrorCode.none:
        return error, -1, -1
    found_epoch, end = partition.log.end_offset_for_epoch(epoch)
    return ErrorCode.none, found_epoch, end


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(23, ctx.version).response_module
    denied: set[str] = set()
    if ctx.broker.authorizer is not None and not operations.allowed_cluster(ctx, "replica"):
        names = {topic.topic for topic in request.topics}
        denied = names - operations.filter_allowed(ctx, ResourceType.TOPIC, names, str)
    return build(
        module.OffsetForLeaderEpochResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                module.OffsetForLeaderTopicResult,
                topic=topic.topic,
                partitions=tuple(
                    build(
                        module.EpochEndOffset,
                        partition=p.partition,
                        error_code=error,
                        leader_epoch=epoch,
                        end_offset=end,
                    )
                    for p in topic.partitions
                    for error, epoch, end in (
                        (ErrorCode.topic_authorization_failed, -1, -1)
                        if topic.topic in denied
                        else _end_offset(ctx, topic.topic, p.partition, p.current_leader_epoch, p.leader_epoch),
                    )
                ),
            )
            for topic in request.topics
        ),
    )


API = Api(key=23, name="OffsetForLeaderEpoch", min_version=2, max_version=4, handle=handle)
