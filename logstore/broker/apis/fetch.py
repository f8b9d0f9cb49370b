"""Fetch (key 1): whole batches from each partition, long-polled, sent with sendfile.

For each partition the log is read from the batch that holds the fetch
offset (consumers up to the high watermark; read_committed consumers up to
the last stable offset, with the aborted transactions of what they read). The response holds at most
``max_bytes`` in all and ``partition_max_bytes`` per partition, except that
the first partition with data always returns at least its first whole batch
(KIP-74), so a batch larger than the limits never stalls a consumer. When
fewer than ``min_bytes`` are ready the fetch waits in the purgatory until an
append to one of its partitions or ``max_wait_ms``, then reads again.

Record bytes leave as :class:`FileRegion` holes in the encoded response,
filled by ``loop.sendfile`` from the segment file; batches shorter than
``SENDFILE_MIN_BYTES`` are copied from the segment's map instead, because
one ``sendfile`` costs more than copying a few kilobytes.

Fetch sessions (KIP-227, v7+): see :mod:`logstore.broker.replication.fetch_session`;
an incremental fetch reads every partition of its session and answers only
those with something new.

With an authorizer, a consumer needs READ on each topic and a follower CLUSTER_ACTION
on the cluster; a partition refused answers TOPIC_AUTHORIZATION_FAILED and is not read
(security/operations.py).
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from logstore._native import copy_mapped
from logstore.broker.api_definition import Api
from logstore.broker.context import Deferred, RequestContext, Services
from logstore.broker.replication.fetch_session import FetchContext, FetchItem, answer
from logstore.broker.replication.replica_manager import PartitionRead
from logstore.errors import LogstoreError, MappedReadError
from logstore.protocol import NO_THROTTLE, FileRegion, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType
from logstore.storage.log import ReadResult
from logstore.storage.segment import COPIED_READ_BYTES

SENDFILE_MIN_BYTES = COPIED_READ_BYTES  # Segment.read reads such spans in under the SIGBUS guard


def _read_all(
    broker: Services, request: Any, items: list[FetchItem], upto: str, denied: set[str] | None = None
) -> tuple[list[tuple[FetchItem, PartitionRead]], int, bool]:
    replicas = broker.replica_manager
    remaining = request.max_bytes
    total = 0
    errors = False
    reads = []
    for item in items:
        if denied and item.topic in denied:
            reads.append((item, PartitionRead(item.partition, ErrorCode.topic_authorization_failed)))
            continue
        limit = min(item.max_bytes, remaining)
        read = replicas.read(
            item.topic, item.partition, item.fetch_offset, limit, total == 0, upto, request.replica_id,
            item.current_leader_epoch,
        )  # fmt: skip
        size = read.read.size if read.read is not None else 0
        remaining -= size
        total += size
        errors = errors or read.error != ErrorCode.none
        reads.append((item, read))
    return reads, total, errors


def _answered(
    reads: list[tuple[FetchItem, PartitionRead]], context: FetchContext
) -> list[tuple[str, list[PartitionRead]]]:
    """The reads the response carries (an incremental session's: only what changed), by topic."""
    topics: dict[str, list[PartitionRead]] = {}
    served = []
    for item, read in reads:
        size = read.read.size if read.read is not None else 0
        marks = (read.high_watermark, read.last_stable, read.log_start)
        if answer(item, read.error, size, marks, context.incremental):
            topics.setdefault(item.topic, []).append(read)
        if size:
            served.append(item)
    context.rotate(served)
    return list(topics.items())


def _records(read: ReadResult | None) -> Any:
    if read is None or read.segment_read is None:
        return b""
    segment_read = read.segment_read
    if segment_read.size < SENDFILE_MIN_BYTES:
        try:
            return copy_mapped(segment_read.view)  # its pages were read in by Segment.read
        except MappedReadError:
            return b""  # evicted and unreadable since: the next read fails the log's directory
    try:
        return FileRegion(segment_read.segment.fileno(), segment_read.position, segment_read.size)
    except LogstoreError:
        return b""  # retention closed the segment just now; the client fetches again


def _aborted(module: Any, read: PartitionRead) -> Any:
    """read_committed: the aborted transactions in the data (null for read_uncommitted, as Kafka)."""
    if read.aborted is None:
        return None
    return tuple(
        build(module.AbortedTransaction, producer_id=t.producer_id, first_offset=t.first_offset)
        for t in read.aborted
    )


def _denied(ctx: RequestContext, request: Any, items: list[FetchItem]) -> set[str]:
    """The topics the fetch may not read (answered TOPIC_AUTHORIZATION_FAILED): for a follower
    every topic unless CLUSTER_ACTION on the cluster, for a consumer those without READ."""
    topics = {item.topic for item in items}
    if request.replica_id >= 0:
        return set() if operations.allowed_cluster(ctx, "replica") else topics
    return topics - operations.filter_allowed(ctx, ResourceType.TOPIC, topics, str)


def _count(
    broker: Services, topics: list[tuple[str, list[PartitionRead]]], replica: bool, errors: bool
) -> None:
    """Metrics: the bytes (and records) sent per topic, and the partitions' error codes."""
    metrics = broker.metrics
    traffic = metrics.traffic
    for name, reads in topics:
        for read in reads:
            found = read.read
            if found is not None and found.segment_read is not None:
                traffic.fetched(name, found.segment_read.size, found.record_count, replica)
            if errors and read.error:
                metrics.error(API, read.error)


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    module = codec(1, ctx.version).response_module
    context = broker.fetch_sessions.resolve(request)
    if context.error != ErrorCode.none:
        return build(
            module.FetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=context.error,
            session_id=0,
            responses=(),
        )
    if request.replica_id >= 0:
        upto = "log_end"
    else:
        upto = "last_stable" if getattr(request, "isolation_level", 0) == 1 else "high_watermark"
    max_wait = request.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait
    denied = None if broker.authorizer is None else _denied(ctx, request, context.items)
    keys = [(item.topic, item.partition) for item in context.items if not denied or item.topic not in denied]
    notified = broker.replica_manager.purgatory.notified
    reads, total, errors = _read_all(broker, request, context.items, upto, denied)
    if total >= request.min_bytes or errors or max_wait <= 0 or not keys:
        return _answer(ctx, request, context, reads, errors)
    # A long poll: the requests behind this one go on while it waits (context.py).
    return Deferred(_long_poll(ctx, request, context, upto, denied, keys, deadline, notified))


async def _long_poll(
    ctx: RequestContext,
    request: Any,
    context: FetchContext,
    upto: str,
    denied: set[str] | None,
    keys: list[tuple[str, int]],
    deadline: float,
    notified: int,
) -> Any:
    """Wait in the purgatory for data (or the deadline), reading again after each append
    (and at once if an append came between the first read and this task's start)."""
    broker = ctx.broker
    replicas = broker.replica_manager
    moved = replicas.purgatory.notified != notified
    while True:
        if not moved:  # after a read the wait registers with no pause between: nothing missed
            await replicas.wait_for_data(keys, deadline - time.monotonic())
        moved = False
        reads, total, errors = _read_all(broker, request, context.items, upto, denied)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or errors or remaining <= 0 or ctx.connection.closed:
            return _answer(ctx, request, context, reads, errors)


def _answer(
    ctx: RequestContext,
    request: Any,
    context: FetchContext,
    reads: list[tuple[FetchItem, PartitionRead]],
    errors: bool,
) -> Any:
    module = codec(1, ctx.version).response_module
    topics = _answered(reads, context)
    _count(ctx.broker, topics, request.replica_id >= 0, errors)
    return build(
        module.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=context.session_id,
        responses=tuple(
            build(
                module.FetchableTopicResponse,
                topic=name,
                partitions=tuple(
                    build(
                        module.PartitionData,
                        partition_index=read.index,
                        error_code=read.error,
                        high_watermark=read.high_watermark,
                        last_stable_offset=read.last_stable,
                        log_start_offset=read.log_start,
                        aborted_transactions=_aborted(module, read),
                        preferred_read_replica=-1,
                        records=_records(read.read),
                    )
                    for read in reads
                ),
            )
            for name, reads in topics
        ),
    )


API = Api(key=1, name="Fetch", min_version=4, max_version=12, handle=handle)
