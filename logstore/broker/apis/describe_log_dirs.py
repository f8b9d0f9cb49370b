"""DescribeLogDirs (key 35): the data directory and the size of each partition in it.

This broker has one log directory, the Store's data directory (absolute
path). Each partition reports its size on disk (the bytes of its
segments), offset lag 0 (a leader has no lag) and is never a "future"
replica. Null ``topics`` asks for every partition; otherwise only the
listed partitions that exist are reported (Kafka leaves out the others).
v3+ has a top-level error code (always NONE); v4+ gives the file system's
total and usable bytes (``os.statvfs``; usable is what an unprivileged
writer may use); v5 says whether the directory is cordoned: never, this
broker cannot cordon. If the directory cannot be read it is reported with
KAFKA_STORAGE_ERROR. kio starts at v1.

With an authorizer: DESCRIBE on the cluster, else no results and
CLUSTER_AUTHORIZATION_FAILED (v3+; security/operations.py).
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext, Services
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations


def _partitions(broker: Services, topics: Any) -> dict[str, list[tuple[int, int]]]:
    """topic -> [(partition, size)] of the partitions asked for (None: all)."""
    logs = broker.replica_manager.logs()
    wanted: set[tuple[str, int]] | None = None
    if topics is not None:
        wanted = {(topic.topic, partition) for topic in topics for partition in topic.partitions}
    result: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for (topic, partition), log in sorted(logs.items()):
        if (wanted is None or (topic, partition) in wanted) and not log.closed:
            result[topic].append((partition, log.size))
    return result


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    module = codec(35, ctx.version).response_module
    data_dir = broker.data_dir
    if not operations.allowed_cluster(ctx):
        return build(
            module.DescribeLogDirsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )  # fmt: skip
    try:
        stat = os.statvfs(data_dir)
        error = ErrorCode.none
        total, usable = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
        sizes = _partitions(broker, request.topics)
    except OSError:
        error, total, usable, sizes = ErrorCode.kafka_storage_error, -1, -1, {}
    topics = tuple(
        build(
            module.DescribeLogDirsTopic,
            name=topic,
            partitions=tuple(
                build(
                    module.DescribeLogDirsPartition,
                    partition_index=partition,
                    partition_size=size,
                    offset_lag=0,
                    is_future_key=False,
                )
                for partition, size in partitions
            ),
        )
        for topic, partitions in sizes.items()
    )
    result = build(
        module.DescribeLogDirsResult,
        error_code=error,
        log_dir=data_dir,
        topics=topics,
        total_bytes=total,
        usable_bytes=usable,
        is_cordoned=False,
    )
    return build(
        module.DescribeLogDirsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=(result,),
    )


API = Api(key=35, name="DescribeLogDirs", min_version=1, max_version=5, handle=handle)
