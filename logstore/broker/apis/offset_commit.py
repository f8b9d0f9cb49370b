"""OffsetCommit (key 8): store a group's consumed positions in ``__consumer_offsets``.

Partitions of topics that do not exist answer UNKNOWN_TOPIC_OR_PARTITION
(v10: UNKNOWN_TOPIC_ID) and are not stored, as in Kafka; the rest go to the
group coordinator, which checks the member and generation (generation -1
with member id "" commits for a group without members: admin tools, manual
assignment), appends one batch of records to the group's partition of
``__consumer_offsets`` and answers per partition. In a cluster the answer
waits until the ISR has the batch (``offsets.commit.timeout.ms``, Kafka's
acks=-1 for commits), so an acknowledged commit survives a failover.

Versions (kio starts at v2): v2-v4 carry ``retention_time``, which is
ignored: offsets expire per ``offsets.retention.minutes``, as Kafka does
from v5; v6 adds the leader epoch; v7 ``group_instance_id``; v8 is v7 made
flexible; from v9 a consumer-protocol (KIP-848) member commits with its member
epoch in ``generation_id_or_member_epoch`` (STALE_MEMBER_EPOCH if it is not
the current one; such a member's commit below v9 is UNSUPPORTED_VERSION), and a
commit with a generation to a group that does not exist is GROUP_ID_NOT_FOUND
(ILLEGAL_GENERATION before); v10 names topics by ID.

With an authorizer (security/operations.py): READ on the group (else every partition
GROUP_AUTHORIZATION_FAILED) and READ on each topic (TOPIC_AUTHORIZATION_FAILED).
"""

from __future__ import annotations

import asyncio
import struct
import uuid
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext, Services
from logstore.broker.groups.offsets_appender import Ticket
from logstore.broker.groups.offsets_topic import await_group_replicated, coordinator_of, offsets_appender_of
from logstore.coordinator.group.offsets import OffsetCommit, PreparedCommit
from logstore.protocol import EMPTY_TAGS, DeferredBody, RawBody, wire_count, wire_string
from logstore.security import operations
from logstore.security.acls import ResourceType


def topic_name(broker: Services, topic: Any, by_id: bool) -> tuple[str | None, int, ErrorCode]:
    """A request's topic (by ID from v10) as (name, partition count), or None, 0 and why not."""
    metadata = broker.metadata
    if by_id:
        topic_id = topic.topic_id
        name = None if topic_id is None or topic_id.int == 0 else metadata.topic_by_id(topic_id)
        if name is None:
            return None, 0, ErrorCode.unknown_topic_id
    else:
        name = topic.name
    count = metadata.partition_count(name)
    if count is None:
        return None, 0, ErrorCode.unknown_topic_id if by_id else ErrorCode.unknown_topic_or_partition
    return name, count, ErrorCode.none


async def handle(ctx: RequestContext, request: Any) -> Any:
    broker = ctx.broker
    version = ctx.version
    offsets: dict[tuple[str, int], OffsetCommit] = {}
    errors: dict[tuple[int, int], ErrorCode] = {}  # (topic index, partition) -> error before committing
    names: list[str | None] = []
    with_epoch = version >= 6
    by_id = version >= 10
    auth = broker.authorizer
    if auth is not None and not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        for index, topic in enumerate(request.topics):  # every partition, as Kafka's error response
            names.append(None)
            for partition in topic.partitions:
                errors[(index, partition.partition_index)] = ErrorCode.group_authorization_failed
        return _encode(version, request, names, errors, {})
    for index, topic in enumerate(request.topics):
        name, count, error = topic_name(broker, topic, by_id)
        if auth is not None and name is not None and not operations.allowed(ctx, ResourceType.TOPIC, name):
            name, error = None, ErrorCode.topic_authorization_failed
        names.append(name)
        for partition in topic.partitions:
            if name is None:
                errors[(index, partition.partition_index)] = error
            elif not 0 <= partition.partition_index < count:
                errors[(index, partition.partition_index)] = ErrorCode.unknown_topic_or_partition
            else:
                offsets[(name, partition.partition_index)] = (
                    partition.committed_offset,
                    partition.committed_leader_epoch if with_epoch else -1,
                    partition.committed_metadata,
                )
    if not offsets:
        return _encode(version, request, names, errors, {})
    coordinator = coordinator_of(broker)
    prepared = coordinator.prepare_commit(
        request.group_id,
        request.generation_id_or_member_epoch,
        request.member_id,
        offsets,
        request.group_instance_id if version >= 7 else None,
        api_version=version,
    )
    if not prepared.records:  # nothing to write: every partition has its own error
        return _encode(version, request, names, errors, prepared.answers(ErrorCode.none))
    ticket = offsets_appender_of(broker).stage(request.group_id, prepared.records)
    if ticket.error is not None:  # appended on its own, already settled
        if ticket.error == ErrorCode.none:
            prepared.apply()
        return _encode(version, request, names, errors, prepared.answers(ticket.error))
    prepared.apply()  # visible to the requests after this one; reverted if the batch fails
    ticket.on_failure(prepared.revert)
    if broker.replica_manager.replicated:  # in a cluster the answer waits for the ISR, as Kafka's
        error = await _replicated(broker, request.group_id, ticket)
        return _encode(version, request, names, errors, _answers(prepared, error))
    return DeferredBody(lambda: _encode(version, request, names, errors, _answers(prepared, ticket.result())))


async def _replicated(broker: Services, group_id: str, ticket: Ticket) -> ErrorCode:
    """The commit's batch appended (at the end of this loop pass, with the pass's other commits),
    then replicated to the ISR (:func:`await_group_replicated`). A commit acknowledged so survives
    its coordinator's failover; one that failed may still be read back (it is in the leader's
    log), as in Kafka."""
    await asyncio.sleep(0)  # the pass's staged batch is appended by a callback queued before this
    error = ticket.result()
    return error if error != ErrorCode.none else await await_group_replicated(broker, group_id)


def _answers(prepared: PreparedCommit, error: ErrorCode) -> dict[tuple[str, int], ErrorCode]:
    """The commit's errors by partition; none (read as "no error") when all went well."""
    return prepared.answers(error) if error or prepared.errors else {}


def _encode(
    version: int,
    request: Any,
    names: list[str | None],
    errors: dict[tuple[int, int], ErrorCode],
    committed: dict[tuple[str, int], ErrorCode],
) -> RawBody:
    """The OffsetCommitResponse body (v2-v10), written directly: kio's writer cost a third
    of a commit. Each partition answers its error from before the commit (``errors``, by
    topic index), else the commit's (``committed``, by name). Byte-equal to kio's
    encoding (tests/broker/apis/test_produce_codec.py).
    """
    flexible = version >= _FLEXIBLE_FROM
    by_id = version >= 10
    out = bytearray(NO_THROTTLE_BYTES if version >= 3 else b"")
    topics = request.topics
    out += wire_count(len(topics), flexible)
    for index, topic in enumerate(topics):
        if by_id:
            out += (topic.topic_id or _NULL_UUID).bytes
        else:
            out += wire_string(topic.name, flexible, False)
        partitions = topic.partitions
        out += wire_count(len(partitions), flexible)
        name = names[index] or ""
        for partition in partitions:
            index_ = partition.partition_index
            error = errors.get((index, index_)) if errors else None
            if error is None:
                error = committed.get((name, index_), ErrorCode.none)
            out += _PARTITION_TAGGED.pack(index_, error, 0) if flexible else _PARTITION.pack(index_, error)
        if flexible:
            out += EMPTY_TAGS
    if flexible:
        out += EMPTY_TAGS
    return RawBody(out)


_PARTITION = struct.Struct(">ih")  # partition_index, error_code
_PARTITION_TAGGED = struct.Struct(">ihB")  # ... and an empty tagged-field section
_FLEXIBLE_FROM = 8


_NULL_UUID = uuid.UUID(int=0)
NO_THROTTLE_BYTES = struct.pack(">i", 0)


API = Api(key=8, name="OffsetCommit", min_version=2, max_version=10, handle=handle)
