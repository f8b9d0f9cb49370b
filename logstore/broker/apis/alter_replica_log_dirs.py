"""AlterReplicaLogDirs (key 34, KIP-113): move partitions of this broker to another of its log
directories while they stay online.

Each named partition starts moving to the named directory (absolute path, one of ``log.dirs``)
in the background (storage/log_mover.py: a ``-future`` copy, then a short hold of appends and
the swap); the answer does not wait for the copy. DescribeLogDirs shows the future replica and
its offset lag meanwhile. Per partition: NONE (started, or there already),
LOG_DIR_NOT_FOUND (not one of this broker's log directories), KAFKA_STORAGE_ERROR (the target
directory, or the partition's own, is offline), REPLICA_NOT_AVAILABLE (no replica of it here;
Kafka remembers the wish for a replica made later, this broker does not),
REASSIGNMENT_IN_PROGRESS (it is moving to another directory already: wait for that move to end).
The copy runs at most ``replica.alter.log.dirs.io.max.bytes.per.second``.

With an authorizer: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED on every partition
(security/operations.py).
"""

from __future__ import annotations

import os
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.errors import LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec, group_by_topic
from logstore.security import operations
from logstore.storage.log_manager import LogManager


def move(manager: LogManager, topic: str, partition: int, path: str) -> ErrorCode:
    """Start one partition's move (see the module doc for the errors)."""
    target = os.path.abspath(path)
    if target not in manager.log_dirs:
        return ErrorCode.log_dir_not_found
    if manager.dir_failures.is_offline(target) or manager.offline_dir_of(topic, partition) is not None:
        return ErrorCode.kafka_storage_error
    if manager.dir_of(topic, partition) is None:
        return ErrorCode.replica_not_available
    moving = manager.future_logs().get((topic, partition))
    if moving is not None:
        return ErrorCode.none if moving[0] == target else ErrorCode.reassignment_in_progress
    try:
        manager.start_move(topic, partition, target)
    except LogstoreError:  # it changed meanwhile (deleted, its directory failed)
        return ErrorCode.kafka_storage_error if manager.dir_failures.offline() else ErrorCode.replica_not_available
    return ErrorCode.none


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(34, ctx.version).response_module
    manager = ctx.broker.replica_manager.logs_by_partition
    allowed = operations.allowed_cluster(ctx)
    results: list[tuple[str, Any]] = []
    for wanted in request.dirs:
        for topic in wanted.topics:
            for partition in topic.partitions:
                error = (
                    move(manager, topic.name, int(partition), wanted.path)
                    if allowed
                    else ErrorCode.cluster_authorization_failed
                )
                results.append(
                    (topic.name, build(module.AlterReplicaLogDirPartitionResult, partition_index=partition,
                                       error_code=error))
                )  # fmt: skip
    return build(
        module.AlterReplicaLogDirsResponse,
        throttle_time=NO_THROTTLE,
        results=tuple(
            build(module.AlterReplicaLogDirTopicResult, topic_name=topic, partitions=tuple(partitions))
            for topic, partitions in group_by_topic(results).items()
        ),
    )


API = Api(key=34, name="AlterReplicaLogDirs", min_version=1, max_version=2, handle=handle)
