"""ListOffsets (key 2): offsets by timestamp, earliest (-2), latest (-1), max timestamp (-3).

"Latest" is the high watermark for consumers (the log end for a replica);
a timestamp gives the first offset whose record's timestamp is at or after
it, or offset -1 when there is none (Kafka's answer). -3 (v7+, KIP-734)
gives the record with the largest timestamp. DESCRIBE on each topic (with an
authorizer; else TOPIC_AUTHORIZATION_FAILED for its partitions).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext, Services
from logstore.broker.replication.partition import Partition
from logstore.errors import LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.protocol.errors import error_for
from logstore.security import operations
from logstore.security.acls import ResourceType
from logstore.storage.log import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP, MAX_TIMESTAMP


def _lookup(
    broker: Services,
    topic: str,
    index: int,
    timestamp: int,
    consumer: bool,
    current_leader_epoch: int,
    committed: bool = False,
) -> tuple[ErrorCode, int, int]:
    """(error, timestamp, offset) for one partition: a consumer sees up to the HW, a
    read_committed one (``committed``) up to the last stable offset."""
    partition = broker.replica_manager.leader_partition(topic, index)
    if not isinstance(partition, Partition):
        return partition, -1, -1
    error = partition.check_leader_epoch(current_leader_epoch)
    if error != ErrorCode.none:
        return error, -1, -1
    log = partition.log
    visible = log.last_stable_offset if committed else log.high_watermark
    if timestamp == LATEST_TIMESTAMP:
        return ErrorCode.none, -1, visible if consumer else log.log_end_offset
    if timestamp == EARLIEST_TIMESTAMP:
        return ErrorCode.none, -1, log.log_start_offset
    if timestamp < 0 and timestamp != MAX_TIMESTAMP:
        return ErrorCode.invalid_request, -1, -1
    try:
        found = log.offset_for_timestamp(timestamp)
    except (LogstoreError, OSError) as e:
        return error_for(e), -1, -1
    if found is None or (consumer and found[1] >= visible):
        return ErrorCode.none, -1, -1
    return ErrorCode.none, found[0], found[1]


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(2, ctx.version).response_module
    consumer = request.replica_id < 0
    topics = []
    for topic in request.topics:
        partitions = []
        allowed = operations.allowed(ctx, ResourceType.TOPIC, topic.name)
        for partition in topic.partitions:
            if not allowed:
                error, timestamp, offset = ErrorCode.topic_authorization_failed, -1, -1
                partitions.append(
                    build(
                        module.ListOffsetsPartitionResponse, partition_index=partition.partition_index,
                        error_code=error, timestamp=timestamp, offset=offset, leader_epoch=-1,
                    )
                )
                continue
            error, timestamp, offset = _lookup(
                ctx.broker,
                topic.name,
                partition.partition_index,
                partition.timestamp,
                consumer,
                getattr(partition, "current_leader_epoch", -1),
                getattr(request, "isolation_level", 0) == 1,
            )
            partitions.append(
                build(
                    module.ListOffsetsPartitionResponse,
                    partition_index=partition.partition_index,
                    error_code=error,
                    timestamp=timestamp,
                    offset=offset,
                    leader_epoch=-1,
                )
            )
        topics.append(build(module.ListOffsetsTopicResponse, name=topic.name, partitions=tuple(partitions)))
    return build(module.ListOffsetsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


API = Api(key=2, name="ListOffsets", min_version=1, max_version=7, handle=handle)
