"""Fetch (key 1): whole batches from each partition, long-polled, sent with sendfile.

For each partition the log is read from the batch that holds the fetch
offset (consumers up to the high watermark). The response holds at most
``max_bytes`` in all and ``partition_max_bytes`` per partition, except that
the first partition with data always returns at least its first whole batch
(KIP-74), so a batch larger than the limits never stalls a consumer. When
fewer than ``min_bytes`` are ready the fetch waits in the purgatory until an
append to one of its partitions or ``max_wait_ms``, then reads again.

Record bytes leave as :class:`FileRegion` holes in the encoded response,
filled by ``loop.sendfile`` from the segment file; batches shorter than
``SENDFILE_MIN_BYTES`` are copied from the segment's map instead, because
one ``sendfile`` costs more than copying a few kilobytes.

Fetch sessions (KIP-227) are not kept: a request for a new session gets
session id 0, which tells the client to send full fetches, as Kafka does
when its session cache is full.
"""

from __future__ import annotations

import time
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.apis import Api
from logstore.broker.replica_manager import PartitionRead
from logstore.broker.server import Broker, RequestContext
from logstore.errors import LogstoreError
from logstore.protocol import NO_THROTTLE, FileRegion, build, codec
from logstore.storage.log import ReadResult

SENDFILE_MIN_BYTES = 16 * 1024
_FETCH_SESSION_ID_NOT_FOUND = ErrorCode.fetch_session_id_not_found


def _read_all(
    broker: Broker, request: Any, upto: str
) -> tuple[list[tuple[str, list[PartitionRead]]], int, bool]:
    replicas = broker.replica_manager
    remaining = request.max_bytes
    total = 0
    errors = False
    topics = []
    for topic in request.topics:
        reads = []
        for partition in topic.partitions:
            limit = min(partition.partition_max_bytes, remaining)
            read = replicas.read(
                topic.topic, partition.partition, partition.fetch_offset, limit, total == 0, upto,
                request.replica_id, getattr(partition, "current_leader_epoch", -1),
            )  # fmt: skip
            size = read.read.size if read.read is not None else 0
            remaining -= size
            total += size
            errors = errors or read.error != ErrorCode.none
            reads.append(read)
        topics.append((topic.topic, reads))
    return topics, total, errors


def _records(read: ReadResult | None) -> Any:
    if read is None or read.segment_read is None:
        return b""
    segment_read = read.segment_read
    if segment_read.size < SENDFILE_MIN_BYTES:
        return bytes(segment_read.view)
    try:
        return FileRegion(segment_read.segment.fileno(), segment_read.position, segment_read.size)
    except LogstoreError:
        return b""  # retention closed the segment just now; the client fetches again


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    module = codec(1, ctx.version).response_module
    session_id = getattr(request, "session_id", 0)
    session_epoch = getattr(request, "session_epoch", -1)
    if session_id != 0 and session_epoch > 0:
        return build(
            module.FetchResponse,
            throttle_time=NO_THROTTLE,
            error_code=_FETCH_SESSION_ID_NOT_FOUND,
            session_id=0,
            responses=(),
        )
    upto = "log_end" if request.replica_id >= 0 else "high_watermark"
    max_wait = request.max_wait.total_seconds()
    deadline = time.monotonic() + max_wait
    keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    while True:
        topics, total, errors = _read_all(broker, request, upto)
        remaining = deadline - time.monotonic()
        if total >= request.min_bytes or errors or remaining <= 0 or not keys or ctx.connection.closed:
            break
        await broker.replica_manager.wait_for_data(keys, remaining)
    return build(
        module.FetchResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        session_id=0,
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
                        last_stable_offset=read.high_watermark,
                        log_start_offset=read.log_start,
                        aborted_transactions=None,
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
