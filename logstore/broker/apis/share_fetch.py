"""ShareFetch (key 78): records acquired for a share group's member, acknowledgements piggybacked.

One request, in a share session (the share coordinator's
:meth:`~logstore.coordinator.share.share_coordinator.ShareCoordinator.fetch_session`:
epoch 0 opens it, each later request names its next epoch, -1 closes it):

1. the acknowledgements it carries are applied per partition (an error,
   INVALID_RECORD_STATE for a record the member does not hold, goes in that
   partition's ``acknowledge_error_code`` and changes nothing there);
2. unless the epoch is final, each partition of the session is read from its
   share-partition's first AVAILABLE offset up to the high watermark, and the
   records of the batches read are acquired for the member (up to
   ``max_records``, locked for ``share.record.lock.duration.ms``); the
   response carries the batches that hold acquired records and the acquired
   ranges with their delivery counts (the client skips the rest);
3. when nothing was acquired it waits (``max_wait``) for an append to one of
   the session's partitions or for records released in one of its
   share-partitions (:func:`~logstore.broker.groups.share_groups.share_key`),
   answering the requests behind it meanwhile (a ``Deferred``).

Control batches (transaction markers) are never acquired: their offsets are
gaps the share-partition archives. Records are copied from the segment's map
(a share fetch sends only batches holding acquired records).

With an authorizer: READ on the group (else GROUP_AUTHORIZATION_FAILED for the
request) and on each topic (else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

import datetime
import time
import uuid
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import Deferred, RequestContext
from logstore.broker.groups.share_groups import now_ms, share_coordinator_of, share_key
from logstore.coordinator.share.share_coordinator import ShareCoordinator, ShareSession
from logstore.coordinator.share.share_partition import AcquiredRecords
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.records.batch import batches_of
from logstore.security import operations
from logstore.security.acls import ResourceType

PARTITION_MAX_BYTES = 1 << 20  # a partition's share of max_bytes when several have data
TopicPartition = tuple[str, int]


@dataclass
class PartitionAnswer:
    """What the response says of one partition."""

    error: ErrorCode = ErrorCode.none
    ack_error: ErrorCode = ErrorCode.none
    ack_message: str | None = None
    records: bytes = b""
    acquired: list[AcquiredRecords] = field(default_factory=list)
    acknowledged: bool = False


def resolve_topics(ctx: RequestContext, topics: Any) -> tuple[dict[uuid.UUID, str | None], set[str]]:
    """Topic id -> name (None: unknown) of the request's topics, and the names the principal may not READ."""
    names = {t.topic_id: ctx.broker.metadata.topic_by_id(t.topic_id) for t in topics if t.topic_id is not None}
    known = {name for name in names.values() if name is not None}
    denied = set() if ctx.broker.authorizer is None else known - operations.filter_allowed(
        ctx, ResourceType.TOPIC, known, str
    )
    return names, denied


def acknowledge_all(
    coordinator: ShareCoordinator, group_id: str, member_id: str, topics: Any,
    names: dict[uuid.UUID, str | None], denied: set[str], answers: dict[TopicPartition, PartitionAnswer],
    unknown: dict[tuple[uuid.UUID, int], ErrorCode],
) -> None:  # fmt: skip
    """Apply the request's acknowledgement batches partition by partition into ``answers``."""
    now = now_ms()
    for topic in topics:
        name = names.get(topic.topic_id)
        for partition in topic.partitions:
            batches = [
                (b.first_offset, b.last_offset, tuple(b.acknowledge_types))
                for b in partition.acknowledgement_batches
            ]
            if not batches:
                continue
            if name is None:
                unknown[(topic.topic_id, partition.partition_index)] = ErrorCode.unknown_topic_id
                continue
            answer = answers.setdefault((name, partition.partition_index), PartitionAnswer())
            answer.acknowledged = True
            if name in denied:
                answer.ack_error = ErrorCode.topic_authorization_failed
                continue
            answer.ack_error, answer.ack_message = coordinator.acknowledge(
                now, group_id, member_id, name, partition.partition_index, batches
            )


def _acquire(ctx: RequestContext, request: Any, session: ShareSession, denied: set[str],
             answers: dict[TopicPartition, PartitionAnswer]) -> int:  # fmt: skip
    """Read and acquire from each partition of the session; returns how many records."""
    coordinator = share_coordinator_of(ctx.broker)
    replicas = ctx.broker.replica_manager
    left_records = max(request.max_records, 1)
    left_bytes = request.max_bytes
    now = now_ms()
    total = 0
    for topic, index in session.partitions:
        answer = answers.setdefault((topic, index), PartitionAnswer())
        if topic in denied:
            answer.error = ErrorCode.topic_authorization_failed
            continue
        if left_records <= 0 or left_bytes <= 0:
            continue
        share_partition = coordinator.share_partition(session.group_id, topic, index)
        if share_partition is None:
            found = replicas.leader_partition(topic, index)
            answer.error = found if isinstance(found, ErrorCode) else ErrorCode.unknown_topic_or_partition
            continue
        share_partition.expire(now)
        if not share_partition.can_acquire():
            continue
        offset = share_partition.next_fetch_offset()
        read = replicas.read(topic, index, offset, min(left_bytes, PARTITION_MAX_BYTES), True, "high_watermark")
        if read.error != ErrorCode.none:
            answer.error = read.error
            continue
        if read.read is None or not read.read.size:
            continue
        view = read.read.view
        spans = []  # (first offset, last offset, start byte, end byte) of each data batch
        at = 0
        for batch in batches_of(view):
            if not batch.is_control:
                spans.append((batch.base_offset, batch.last_offset, at, at + batch.size))
            at += batch.size
        if not spans:
            continue
        acquired = coordinator.acquire(
            now, session.group_id, session.member_id, topic, index, [(s[0], s[1]) for s in spans], left_records
        )
        if not acquired:
            continue
        count = sum(a.last - a.first + 1 for a in acquired)
        first, last = acquired[0].first, acquired[-1].last
        used = [s for s in spans if s[1] >= first and s[0] <= last]
        answer.records = bytes(view[used[0][2]:used[-1][3]])
        answer.acquired = acquired
        left_records -= count
        left_bytes -= len(answer.records)
        total += count
    return total


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(78, ctx.version).response_module
    broker = ctx.broker

    def failed(error: ErrorCode, message: str | None) -> Any:
        return build(
            module.ShareFetchResponse, throttle_time=NO_THROTTLE, error_code=error, error_message=message,
            acquisition_lock_timeout=datetime.timedelta(0), responses=(), node_endpoints=(),
        )  # fmt: skip

    group_id, member_id = request.group_id, request.member_id
    if not group_id or not member_id:
        return failed(ErrorCode.invalid_request, "a ShareFetch names its group and member")
    if broker.authorizer is not None and not operations.allowed(ctx, ResourceType.GROUP, group_id):
        return failed(ErrorCode.group_authorization_failed, None)
    coordinator = share_coordinator_of(broker)
    names, denied = resolve_topics(ctx, request.topics)
    unknown: dict[tuple[uuid.UUID, int], ErrorCode] = {}
    wanted = []
    for topic in request.topics:
        name = names.get(topic.topic_id)
        for partition in topic.partitions:
            if name is None:
                unknown[(topic.topic_id, partition.partition_index)] = ErrorCode.unknown_topic_id
            else:
                wanted.append((name, partition.partition_index))
    forget = [
        (name, index)
        for topic in request.forgotten_topics_data
        if (name := names.get(topic.topic_id) or broker.metadata.topic_by_id(topic.topic_id)) is not None
        for index in topic.partitions
    ]
    acknowledging = any(p.acknowledgement_batches for t in request.topics for p in t.partitions)
    opened = coordinator.fetch_session(
        group_id, member_id, request.share_session_epoch, wanted, forget, acknowledging
    )
    if opened.error != ErrorCode.none or opened.session is None:
        return failed(opened.error, opened.message)
    session = opened.session
    answers: dict[TopicPartition, PartitionAnswer] = {}
    acknowledge_all(coordinator, group_id, member_id, request.topics, names, denied, answers, unknown)
    if opened.final:
        coordinator.close_session(group_id, member_id)
        return _response(ctx, module, answers, unknown, full=False, lock_ms=coordinator.lock_duration_ms(group_id))
    full = request.share_session_epoch == 0
    acquired = _acquire(ctx, request, session, denied, answers)
    max_wait = request.max_wait.total_seconds()
    if acquired or max_wait <= 0 or not session.partitions:
        return _response(ctx, module, answers, unknown, full, coordinator.lock_duration_ms(group_id))
    return Deferred(_long_poll(ctx, module, request, session, denied, answers, unknown, full,
                               time.monotonic() + max_wait))  # fmt: skip


async def _long_poll(
    ctx: RequestContext, module: Any, request: Any, session: ShareSession, denied: set[str],
    answers: dict[TopicPartition, PartitionAnswer], unknown: dict[tuple[uuid.UUID, int], ErrorCode],
    full: bool, deadline: float,
) -> Any:  # fmt: skip
    """Wait for an append or a release in one of the session's partitions, then acquire again."""
    coordinator = share_coordinator_of(ctx.broker)
    replicas = ctx.broker.replica_manager
    while True:
        keys: list[Hashable] = []
        for topic, index in session.partitions:
            keys += [(topic, index), share_key(session.group_id, topic, index)]
        remaining = deadline - time.monotonic()
        if remaining <= 0 or ctx.connection.closed:
            break
        await replicas.wait_for_data(keys, remaining)
        current = coordinator.sessions.get((session.group_id, session.member_id))
        if current is not session:  # closed or replaced meanwhile: answer with what there is
            break
        if _acquire(ctx, request, session, denied, answers):
            break
    return _response(ctx, module, answers, unknown, full, coordinator.lock_duration_ms(session.group_id))


def _response(
    ctx: RequestContext, module: Any, answers: dict[TopicPartition, PartitionAnswer],
    unknown: dict[tuple[uuid.UUID, int], ErrorCode], full: bool, lock_ms: int,
) -> Any:  # fmt: skip
    """The ShareFetchResponse: every partition of a new session, else those with records, an
    error or acknowledgements."""
    broker = ctx.broker
    by_topic: dict[uuid.UUID, list[Any]] = {}
    leader = build(module.LeaderIdAndEpoch, leader_id=broker.node_id, leader_epoch=0)
    for (topic, index), answer in answers.items():
        if not (full or answer.acquired or answer.error or answer.acknowledged):
            continue
        topic_id = broker.metadata.topic_id(topic)
        partition = broker.replica_manager.partition(topic, index)
        epoch_leader = leader if partition is None else build(
            module.LeaderIdAndEpoch, leader_id=broker.node_id, leader_epoch=partition.leader_epoch
        )
        by_topic.setdefault(topic_id, []).append(build(
            module.PartitionData, partition_index=index, error_code=answer.error, error_message=None,
            acknowledge_error_code=answer.ack_error, acknowledge_error_message=answer.ack_message,
            current_leader=epoch_leader, records=answer.records,
            acquired_records=tuple(
                build(module.AcquiredRecords, first_offset=a.first, last_offset=a.last, delivery_count=a.delivery_count)
                for a in answer.acquired
            ),
        ))  # fmt: skip
    for (topic_id, index), error in unknown.items():
        by_topic.setdefault(topic_id, []).append(build(
            module.PartitionData, partition_index=index, error_code=error, error_message=None,
            acknowledge_error_code=error, acknowledge_error_message=None, current_leader=leader,
            records=b"", acquired_records=(),
        ))  # fmt: skip
    return build(
        module.ShareFetchResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none, error_message=None,
        acquisition_lock_timeout=datetime.timedelta(milliseconds=lock_ms),
        responses=tuple(
            build(module.ShareFetchableTopicResponse, topic_id=topic_id, partitions=tuple(partitions))
            for topic_id, partitions in by_topic.items()
        ),
        node_endpoints=(),
    )  # fmt: skip


API = Api(key=78, name="ShareFetch", min_version=1, max_version=1, handle=handle)
