"""OffsetFetch (key 9): a group's committed offsets.

Each asked-for partition gets its committed offset, leader epoch (v5+) and
metadata, or offset -1 when there is none; null topics (v2+) mean every
partition the group has committed, grouped by topic. Any group's offsets
can be read, whatever its state. v1 reports a group error on every
partition (it has no top-level error); v7's ``require_stable`` (KIP-447)
answers UNSTABLE_OFFSET_COMMIT, offset -1, for a partition with a
transactional commit still pending (the client retries); from v8 one request asks for
several groups; v9's member id and epoch are checked for consumer-protocol
(KIP-848) groups (UNKNOWN_MEMBER_ID, STALE_MEMBER_EPOCH; none and -1 is an
admin's fetch) and not for classic ones (as Kafka); v10 names topics by ID: an unknown ID
is UNKNOWN_TOPIC_ID, and fetching everything leaves out topics that no
longer exist.

With an authorizer (security/operations.py): DESCRIBE on the group (else
GROUP_AUTHORIZATION_FAILED) and on each topic (named: TOPIC_AUTHORIZATION_FAILED;
every topic asked: the others left out).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import coordinator_of, offsets_appender_of
from logstore.coordinator.group.offsets import FetchedOffset
from logstore.protocol import NO_THROTTLE, build, codec, group_by_topic
from logstore.security import operations
from logstore.security.acls import ResourceType

_NONE = FetchedOffset(-1, -1, "")


def _fetch_group(
    ctx: RequestContext,
    module: Any,
    group_id: str,
    topics: Any,
    classes: tuple[Any, Any],
    member: tuple[str | None, int] = (None, -1),
    require_stable: bool = False,
) -> tuple[ErrorCode, tuple[Any, ...]]:
    """(group error, response topics) for one group; ``member``: v9's member id and epoch."""
    topic_class, partition_class = classes
    metadata = ctx.broker.metadata
    auth = ctx.broker.authorizer
    denied: set[str] = set()  # named topics the principal may not describe
    if auth is not None and not operations.allowed(ctx, ResourceType.GROUP, group_id):
        if ctx.version >= 2 or topics is None:
            return ErrorCode.group_authorization_failed, ()
        return ErrorCode.group_authorization_failed, tuple(  # v0-1: the error on every partition
            build(
                topic_class,
                name=topic.name,
                partitions=tuple(
                    build(
                        partition_class, partition_index=p, committed_offset=-1, committed_leader_epoch=-1,
                        metadata="", error_code=ErrorCode.group_authorization_failed,
                    )
                    for p in topic.partition_indexes
                ),
            )
            for topic in topics
        )
    by_id = ctx.version >= 10
    coordinator = coordinator_of(ctx.broker)
    # [(response key: name or ID, name or None, [(partition, FetchedOffset or error)])]
    wanted: list[tuple[Any, str | None, list[int]]] = []
    if topics is None:
        result = coordinator.fetch_offsets(group_id, None, member_id=member[0], member_epoch=member[1])
        for topic_name, partitions in group_by_topic(sorted(result.offsets)).items():
            if auth is not None and not operations.allowed(ctx, ResourceType.TOPIC, topic_name):
                continue  # every topic asked: those the principal may not describe are left out
            if by_id:
                if not metadata.has_topic(topic_name):
                    continue
                wanted.append((metadata.topic_id(topic_name), topic_name, partitions))
            else:
                wanted.append((topic_name, topic_name, partitions))
    else:
        asked = []
        for topic in topics:
            if by_id:
                topic_id = topic.topic_id
                name = None if topic_id is None or topic_id.int == 0 else metadata.topic_by_id(topic_id)
                wanted.append((topic_id, name, list(topic.partition_indexes)))
            else:
                wanted.append((topic.name, topic.name, list(topic.partition_indexes)))
        if auth is not None:
            names = {name for _, name, _ in wanted if name is not None}
            denied = names - operations.filter_allowed(ctx, ResourceType.TOPIC, names, str)
        for _, name, partitions in wanted:
            if name is not None and name not in denied:
                asked += [(name, partition) for partition in partitions]
        result = coordinator.fetch_offsets(group_id, asked, member_id=member[0], member_epoch=member[1])
    group_error = result.error
    pending = offsets_appender_of(ctx.broker).pending_txn if require_stable else None
    response_topics = []
    for key, name, partitions in wanted:
        rows = []
        for partition in partitions:
            fetched = _NONE if name is None else result.offsets.get((name, partition), _NONE)
            error = fetched.error
            if name is None:
                error = ErrorCode.unknown_topic_id
            elif name in denied:
                error, fetched = ErrorCode.topic_authorization_failed, _NONE
            elif ctx.version < 2 and group_error != ErrorCode.none:
                error = group_error
            elif pending is not None and pending.is_pending(group_id, (name, partition)):
                error, fetched = ErrorCode.unstable_offset_commit, _NONE
            rows.append(
                build(
                    partition_class,
                    partition_index=partition,
                    committed_offset=fetched.offset,
                    committed_leader_epoch=fetched.leader_epoch,
                    metadata=fetched.metadata,
                    error_code=error,
                )
            )
        fields = {"topic_id": key} if by_id else {"name": key}
        response_topics.append(build(topic_class, partitions=tuple(rows), **fields))
    return group_error, tuple(response_topics)


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(9, ctx.version).response_module
    if ctx.version < 8:
        classes = (module.OffsetFetchResponseTopic, module.OffsetFetchResponsePartition)
        stable = bool(getattr(request, "require_stable", False))
        error, topics = _fetch_group(ctx, module, request.group_id, request.topics, classes, require_stable=stable)
        return build(module.OffsetFetchResponse, throttle_time=NO_THROTTLE, error_code=error, topics=topics)
    classes = (module.OffsetFetchResponseTopics, module.OffsetFetchResponsePartitions)
    groups = []
    for group in request.groups:
        member = (getattr(group, "member_id", None), getattr(group, "member_epoch", -1))
        stable = bool(getattr(request, "require_stable", False))
        error, topics = _fetch_group(ctx, module, group.group_id, group.topics, classes, member, stable)
        groups.append(
            build(module.OffsetFetchResponseGroup, group_id=group.group_id, topics=topics, error_code=error)
        )
    return build(module.OffsetFetchResponse, throttle_time=NO_THROTTLE, groups=tuple(groups))


API = Api(key=9, name="OffsetFetch", min_version=1, max_version=10, handle=handle)
