"""CreatePartitions (key 37): grow topics to a larger partition count.

Partitions are only ever added: a count equal to the current one or below
it is INVALID_PARTITIONS with Kafka's messages. An unknown topic is
UNKNOWN_TOPIC_OR_PARTITION and a topic named twice INVALID_REQUEST. A
manual assignment must give exactly one replica list per new partition,
each naming only this broker once (else INVALID_REPLICA_ASSIGNMENT, with
Kafka's messages). ``validate_only`` checks and changes nothing. The new
partitions exist (empty, on disk) when the response is sent; the request
timeout is not used.

With an authorizer: ALTER on each topic, else TOPIC_AUTHORIZATION_FAILED
(security/operations.py).
"""

from __future__ import annotations

import logging
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.apis.create_topics import manual_assignment_error
from logstore.broker.context import RequestContext, Services
from logstore.errors import LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.protocol.errors import error_for
from logstore.security import operations
from logstore.security.acls import ResourceType

_log = logging.getLogger("logstore.broker")


def _grow(broker: Services, topic: Any, validate_only: bool) -> tuple[ErrorCode, str | None]:
    name, count = topic.name, topic.count
    if not broker.metadata.has_topic(name):
        return ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist."
    current = broker.metadata.partitions(name)
    if count < current:
        return (
            ErrorCode.invalid_partitions,
            f"The topic {name} currently has {current} partition(s); {count} would not be an increase.",
        )
    if count == current:
        return ErrorCode.invalid_partitions, f"Topic already has {current} partition(s)."
    if topic.assignments is not None:
        if len(topic.assignments) != count - current:
            return (
                ErrorCode.invalid_replica_assignment,
                f"Attempted to add {count - current} additional partition(s), but only "
                f"{len(topic.assignments)} assignment(s) were specified.",
            )
        for assignment in topic.assignments:
            problem = manual_assignment_error(broker, assignment.broker_ids)
            if problem is not None:
                return ErrorCode.invalid_replica_assignment, problem
    if validate_only:
        return ErrorCode.none, None
    try:
        broker.controller.add_partitions(name, count)
    except (LogstoreError, OSError) as e:
        return error_for(e), str(e)
    _log.info("topic %s grew from %d to %d partitions", name, current, count)
    return ErrorCode.none, None


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(37, ctx.version).response_module
    counts = Counter(topic.name for topic in request.topics)
    results = []
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        if operations.allowed(ctx, ResourceType.TOPIC, topic.name):
            error, message = _grow(ctx.broker, topic, request.validate_only)
        else:
            error, message = ErrorCode.topic_authorization_failed, "The topic authorization is failed."
        results.append(
            build(
                module.CreatePartitionsTopicResult, name=topic.name, error_code=error, error_message=message
            )
        )
    for name in (name for name, count in counts.items() if count > 1):
        results.append(
            build(
                module.CreatePartitionsTopicResult,
                name=name,
                error_code=ErrorCode.invalid_request,
                error_message="Duplicate topic name.",
            )
        )
    return build(module.CreatePartitionsResponse, throttle_time=NO_THROTTLE, results=tuple(results))


API = Api(key=37, name="CreatePartitions", min_version=0, max_version=3, handle=handle)
