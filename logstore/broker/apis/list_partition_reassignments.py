"""ListPartitionReassignments (key 46, KIP-455): the reassignments in progress.

Answered by the controller (any other broker, and a broker alone: NOT_CONTROLLER),
from the topic znodes' ``adding_replicas``/``removing_replicas``: each
partition being reassigned with its replicas (the target first, then the
originals not in it), the replicas being added and those being removed. Null
topics: every reassignment; a partition named that is not being reassigned is
left out, as Kafka does.

With an authorizer: DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED
(security/operations.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.cluster_member import NotControllerError
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec, group_by_topic
from logstore.security import operations


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(46, ctx.version).response_module
    named = (
        None if request.topics is None else [(t.name, p) for t in request.topics for p in t.partition_indexes]
    )
    link = ctx.broker.cluster_link
    error, message = ErrorCode.none, None
    found: dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]] = {}
    if not operations.allowed_cluster(ctx):
        error, message = ErrorCode.cluster_authorization_failed, "DESCRIBE on the cluster is needed"
    elif link is None or not link.is_controller:
        error = ErrorCode.not_controller
        message = "This broker is not the controller: send the request to the controller"
    else:
        loop = asyncio.get_running_loop()
        try:
            found = await loop.run_in_executor(None, link.list_reassignments, named)
        except NotControllerError as e:
            error, message = ErrorCode.not_controller, str(e)
    by_topic = group_by_topic(
        (topic, build(module.OngoingPartitionReassignment, partition_index=partition, replicas=replicas,
                      adding_replicas=adding, removing_replicas=removing))
        for (topic, partition), (replicas, adding, removing) in sorted(found.items())
    )  # fmt: skip
    return build(
        module.ListPartitionReassignmentsResponse,
        throttle_time=NO_THROTTLE,
        error_code=error,
        error_message=message,
        topics=tuple(
            build(module.OngoingTopicReassignment, name=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )


API = Api(key=46, name="ListPartitionReassignments", min_version=0, max_version=0, handle=handle)
