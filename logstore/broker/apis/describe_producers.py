"""DescribeProducers (key 61, KIP-664): the active producers of partitions this broker leads.

Per producer: id, epoch, last sequence, last append time, the coordinator
epoch (-1: not kept) and the first offset of its open transaction (-1: none).
NOT_LEADER_OR_FOLLOWER or UNKNOWN_TOPIC_OR_PARTITION elsewhere.

With an authorizer: READ on each topic, else TOPIC_AUTHORIZATION_FAILED for its
partitions (security/operations.py).
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


def _partition(module: Any, partition: Partition | ErrorCode, index: int) -> Any:
    if not isinstance(partition, Partition):
        return build(module.PartitionResponse, partition_index=index, error_code=partition, active_producers=())
    open_txns = partition.log.transactions.open
    producers = tuple(
        build(
            module.ProducerState,
            producer_id=pid,
            producer_epoch=entry.epoch,
            last_sequence=entry.batches[-1].last_sequence if entry.batches else -1,
            last_timestamp=int(entry.last_ms),
            coordinator_epoch=-1,
            current_txn_start_offset=open_txns.get(pid, -1),
        )
        for pid, entry in sorted(partition.producers.entries.items())
    )
    return build(module.PartitionResponse, partition_index=index, error_code=ErrorCode.none, active_producers=producers)


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(61, ctx.version).response_module
    manager = ctx.broker.replica_manager
    topics = tuple(
        build(
            module.TopicResponse,
            name=topic.name,
            partitions=tuple(
                _partition(
                    module,
                    manager.leader_partition(topic.name, int(index))
                    if operations.allowed(ctx, ResourceType.TOPIC, topic.name)
                    else ErrorCode.topic_authorization_failed,
                    int(index),
                )
                for index in topic.partition_indexes
            ),
        )
        for topic in request.topics
    )
    return build(module.DescribeProducersResponse, throttle_time=NO_THROTTLE, topics=topics)


API = Api(key=61, name="DescribeProducers", min_version=0, max_version=0, handle=handle)
