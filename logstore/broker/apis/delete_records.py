"""DeleteRecords (key 21): move partitions' log start offset forward.

Per partition, as Kafka's leader does it: offset -1 means the high
watermark; any other negative offset, or one above the high watermark, is
OFFSET_OUT_OF_RANGE. An offset at or below the current log start changes
nothing. Segments wholly below the new start are deleted; records below it
are no longer readable (a fetch there gets OFFSET_OUT_OF_RANGE). The result
is the partition's low watermark (its new log start), -1 on error.

An unknown topic or partition is UNKNOWN_TOPIC_OR_PARTITION; an internal
topic INVALID_TOPIC_EXCEPTION ("Cannot delete records of internal topic");
a topic whose ``cleanup.policy`` lacks ``delete`` POLICY_VIOLATION. The new
log start is kept in memory at once and written with the
``log-start-offset`` checkpoint (periodically and on clean shutdown, as in
Kafka). The request timeout is not used: there are no followers to wait for.

With an authorizer: DELETE on each topic, else TOPIC_AUTHORIZATION_FAILED
for its partitions (security/operations.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext, Services
from logstore.broker.topics import error_for
from logstore.coordinator.internal_topics import INTERNAL_TOPICS
from logstore.errors import LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations
from logstore.security.acls import ResourceType

HIGH_WATERMARK = -1


def delete_before(broker: Services, topic: str, partition: int, offset: int) -> tuple[ErrorCode, int]:
    """(error, low watermark) after deleting the records of one partition below ``offset``."""
    found = broker.replica_manager.leader_partition(topic, partition)
    if isinstance(found, ErrorCode):  # KAFKA_STORAGE_ERROR for a failed log directory's partition
        return (ErrorCode.unknown_topic_or_partition if found == ErrorCode.not_leader_or_follower else found), -1
    log = found.log
    if topic in INTERNAL_TOPICS:
        return ErrorCode.invalid_topic_exception, -1
    if "delete" not in log.config.cleanup_policy:
        return ErrorCode.policy_violation, -1
    if offset == HIGH_WATERMARK:
        offset = log.high_watermark
    if offset < 0:
        return ErrorCode.offset_out_of_range, -1
    try:
        return ErrorCode.none, log.delete_records(offset)
    except (LogstoreError, OSError) as e:
        return error_for(e), -1


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(21, ctx.version).response_module
    topics = []
    for topic in request.topics:
        partitions = []
        allowed = operations.allowed(ctx, ResourceType.TOPIC, topic.name)
        for partition in topic.partitions:
            if allowed:
                error, low = delete_before(ctx.broker, topic.name, partition.partition_index, partition.offset)
            else:
                error, low = ErrorCode.topic_authorization_failed, -1
            partitions.append(
                build(
                    module.DeleteRecordsPartitionResult,
                    partition_index=partition.partition_index,
                    low_watermark=low,
                    error_code=error,
                )
            )
        topics.append(build(module.DeleteRecordsTopicResult, name=topic.name, partitions=tuple(partitions)))
    return build(module.DeleteRecordsResponse, throttle_time=NO_THROTTLE, topics=tuple(topics))


API = Api(key=21, name="DeleteRecords", min_version=0, max_version=2, handle=handle)
