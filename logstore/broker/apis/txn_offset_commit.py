"""TxnOffsetCommit (key 28, v0-v3): a consumer group's offsets, committed inside a transaction.

The group's coordinator writes the offsets to the group's
``__consumer_offsets`` partition as a transactional batch of the producer
(its id and epoch), and holds them pending until the transaction's marker
reaches that partition (see :mod:`logstore.coordinator.txn_offsets`): the
producer's AddOffsetsToTxn put the partition in the transaction. From v3 the
group's generation and member are checked when given (KIP-447: a zombie
consumer's producer cannot commit): ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID,
FENCED_INSTANCE_ID; for a KIP-848 consumer group the generation is the
member's epoch (ILLEGAL_GENERATION when it is not the current one, as Kafka). A producer epoch below the partition's is
PRODUCER_FENCED (v0-v2: INVALID_PRODUCER_EPOCH). In a cluster the answer
waits for the ISR, as OffsetCommit's does.

With an authorizer (security/operations.py): WRITE on the transactional id and READ
on the group (else every partition TRANSACTIONAL_ID_ or GROUP_AUTHORIZATION_FAILED),
READ on each topic (else TOPIC_AUTHORIZATION_FAILED; the other topics are committed).
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.groups.offsets_topic import await_group_replicated, coordinator_of, offsets_appender_of
from logstore.broker.replication.partition import Partition
from logstore.broker.transactions.state_topic import for_version
from logstore.coordinator.group.offsets_schemas import OffsetCommitValue
from logstore.coordinator.group.persistence import offset_records
from logstore.coordinator.internal_topics import OFFSETS_TOPIC, partition_for
from logstore.errors import LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.protocol.errors import error_for
from logstore.records import build_batch
from logstore.security import operations
from logstore.security.acls import ResourceType


async def _commit(ctx: RequestContext, request: Any) -> tuple[ErrorCode, dict[tuple[str, int], OffsetCommitValue]]:
    """One error for the whole request (or NONE) and the offsets it commits."""
    broker = ctx.broker
    coordinator = coordinator_of(broker)
    group_id = request.group_id
    if not coordinator.owns(group_id):
        return ErrorCode.not_coordinator, {}
    generation = int(getattr(request, "generation_id", -1))
    member_id = getattr(request, "member_id", "") or ""
    consumer_group = coordinator.consumer_group(group_id)  # KIP-848: the generation is the member's epoch
    group = coordinator.group(group_id)
    if consumer_group is not None and (member_id or generation >= 0):
        member = consumer_group.members.get(member_id)
        if member is None:
            return ErrorCode.unknown_member_id, {}
        if generation != member.member_epoch:
            return ErrorCode.illegal_generation, {}
    elif group is not None and (member_id or generation >= 0):
        problem = group.validate_generation(member_id, getattr(request, "group_instance_id", None), generation)
        if problem is not None:
            return problem, {}
    now = int(time.time() * 1000)
    values = {
        (topic.name, int(p.partition_index)): OffsetCommitValue(
            int(p.committed_offset), int(getattr(p, "committed_leader_epoch", -1)), p.committed_metadata or "", now
        )
        for topic in request.topics
        for p in topic.partitions
    }
    if not values:
        return ErrorCode.none, {}
    appender = offsets_appender_of(broker)
    index = partition_for(group_id, appender.partitions)
    partition = broker.replica_manager.leader_partition(OFFSETS_TOPIC, index)
    if not isinstance(partition, Partition):
        return ErrorCode.not_coordinator, {}
    error = partition.producers.check_epoch(request.producer_id, request.producer_epoch)
    if error != ErrorCode.none:
        return ErrorCode.producer_fenced, {}
    batch = bytearray(
        build_batch(
            offset_records(group_id, values),
            producer_id=request.producer_id,
            producer_epoch=request.producer_epoch,
            transactional=True,
        )
    )
    appender.flush()  # the group's earlier records first
    try:
        partition.log.append_batch(batch, partition.leader_epoch if broker.replica_manager.replicated else -1)
    except (LogstoreError, OSError) as e:
        code = error_for(e)
        return (ErrorCode.coordinator_not_available if code != ErrorCode.message_too_large else code), {}
    broker.replica_manager.appended(OFFSETS_TOPIC, index)
    appender.pending_txn.add(request.producer_id, group_id, values)
    return await await_group_replicated(broker, group_id), values


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(28, ctx.version).response_module
    original = request
    denied: set[str] = set()
    if not operations.allowed(ctx, ResourceType.TRANSACTIONAL_ID, request.transactional_id):
        error = ErrorCode.transactional_id_authorization_failed
    elif not operations.allowed(ctx, ResourceType.GROUP, request.group_id):
        error = ErrorCode.group_authorization_failed
    else:
        if ctx.broker.authorizer is not None:
            names = {topic.name for topic in request.topics}
            denied = names - operations.filter_allowed(ctx, ResourceType.TOPIC, names, str)
        if denied:  # the other topics are committed, as Kafka
            request = dataclasses.replace(request, topics=tuple(t for t in request.topics if t.name not in denied))
        error, _ = await _commit(ctx, request)
        error = for_version(error, ctx.version, 3)
        if denied:
            request = original
    return build(
        module.TxnOffsetCommitResponse,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            build(
                module.TxnOffsetCommitResponseTopic,
                name=topic.name,
                partitions=tuple(
                    build(
                        module.TxnOffsetCommitResponsePartition, partition_index=p.partition_index,
                        error_code=ErrorCode.topic_authorization_failed if topic.name in denied else error,
                    )
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )


API = Api(key=28, name="TxnOffsetCommit", min_version=0, max_version=3, handle=handle)
