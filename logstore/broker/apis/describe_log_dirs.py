"""DescribeLogDirs (key 35): each log directory, its space and the partitions in it.

One result per log directory (``log.dirs``; absolute paths), in ``log.dirs``
order. Each reports its partitions with their size on disk (the bytes of their
segments), offset lag 0 (a current replica) and is_future_key false; a
partition being moved to another directory (AlterReplicaLogDirs) is reported
there too, as a future replica with its offset lag behind the current one. A
failed directory (storage/log_dir_failure.py) answers KAFKA_STORAGE_ERROR with
no partitions, as does one that cannot be read. Null ``topics`` asks for every
partition; otherwise only the listed partitions that exist are reported (Kafka
leaves out the others). v3+ has a top-level error code (always NONE); v4+ gives
each file system's total and usable bytes (``os.statvfs``; usable is what an
unprivileged writer may use, -1 for a failed directory); v5 says whether the
directory is cordoned: never, this broker cannot cordon. kio starts at v1.

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

# (partition, size, offset lag, is future) by topic
_Entries = dict[str, list[tuple[int, int, int, bool]]]


def _partitions(broker: Services, topics: Any) -> dict[str, _Entries]:
    """log dir -> topic -> entries of the partitions asked for (None: all)."""
    manager = broker.replica_manager.logs_by_partition
    wanted: set[tuple[str, int]] | None = None
    if topics is not None:
        wanted = {(topic.topic, partition) for topic in topics for partition in topic.partitions}
    result: dict[str, _Entries] = defaultdict(lambda: defaultdict(list))
    for (topic, partition), log in sorted(manager.logs().items()):
        log_dir = manager.dir_of(topic, partition)
        if (wanted is None or (topic, partition) in wanted) and not log.closed and log_dir is not None:
            result[log_dir][topic].append((partition, log.size, 0, False))
    for (topic, partition), (log_dir, size, lag) in sorted(manager.future_logs().items()):
        if wanted is None or (topic, partition) in wanted:
            result[log_dir][topic].append((partition, size, lag, True))
    return result


def _result(module: Any, log_dir: str, offline: bool, entries: _Entries) -> Any:
    error, total, usable = ErrorCode.kafka_storage_error, -1, -1
    if not offline:
        try:
            stat = os.statvfs(log_dir)
            error = ErrorCode.none
            total, usable = stat.f_blocks * stat.f_frsize, stat.f_bavail * stat.f_frsize
        except OSError:
            pass
    topics = tuple(
        build(
            module.DescribeLogDirsTopic,
            name=topic,
            partitions=tuple(
                build(
                    module.DescribeLogDirsPartition,
                    partition_index=partition,
                    partition_size=size,
                    offset_lag=lag,
                    is_future_key=future,
                )
                for partition, size, lag, future in partitions
            ),
        )
        for topic, partitions in sorted(entries.items())
        if error == ErrorCode.none
    )
    return build(
        module.DescribeLogDirsResult,
        error_code=error,
        log_dir=log_dir,
        topics=topics,
        total_bytes=total,
        usable_bytes=usable,
        is_cordoned=False,
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    module = codec(35, ctx.version).response_module
    if not operations.allowed_cluster(ctx):
        return build(
            module.DescribeLogDirsResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.cluster_authorization_failed,
            results=(),
        )  # fmt: skip
    manager = broker.replica_manager.logs_by_partition
    found = _partitions(broker, request.topics)
    offline = manager.dir_failures.offline()
    results = tuple(
        _result(module, log_dir, log_dir in offline, found.get(log_dir, {})) for log_dir in manager.log_dirs
    )
    return build(
        module.DescribeLogDirsResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        results=results,
    )


API = Api(key=35, name="DescribeLogDirs", min_version=1, max_version=5, handle=handle)
