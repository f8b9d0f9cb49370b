"""AlterPartitionReassignments (key 45, KIP-455): move partitions' replicas, or cancel a move.

Clients send it to the controller; any other broker (and a broker alone)
answers NOT_CONTROLLER. Each partition names its target replicas, or null to
cancel its reassignment. The controller validates and starts each one
(:meth:`~logstore.broker.cluster_member.ClusterLink.alter_reassignments`: the
new replicas catch up as followers, then the old ones go) and answers at once,
per partition: NONE, INVALID_REPLICA_ASSIGNMENT (with Kafka's message),
UNKNOWN_TOPIC_OR_PARTITION, NO_REASSIGNMENT_IN_PROGRESS. From v1 (KIP-860)
``allow_replication_factor_change`` false refuses a target of another size
with INVALID_REPLICATION_FACTOR. Progress: ListPartitionReassignments.

With an authorizer: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
(security/operations.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.cluster_member import NotControllerError
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(45, ctx.version).response_module
    changes: dict[tuple[str, int], tuple[int, ...] | None] = {}
    for topic in request.topics:
        for p in topic.partitions:
            changes[(topic.name, p.partition_index)] = None if p.replicas is None else tuple(p.replicas)
    results: dict[tuple[str, int], tuple[ErrorCode, str | None]] = {}
    link = ctx.broker.cluster_link
    top, top_message = ErrorCode.none, None
    if not operations.allowed_cluster(ctx):
        top, top_message = ErrorCode.cluster_authorization_failed, "ALTER on the cluster is needed"
    elif link is None or not link.is_controller:
        top = ErrorCode.not_controller
        top_message = "This broker is not the controller: send the request to the controller"
    else:
        metadata = ctx.broker.metadata
        if not getattr(request, "allow_replication_factor_change", True):
            for (name, index), target in list(changes.items()):
                state = metadata.partition_state(name, index)
                if target is not None and state is not None and len(target) != len(state.replicas):
                    results[(name, index)] = (
                        ErrorCode.invalid_replication_factor,
                        f"The replication factor is changed from {len(state.replicas)} to {len(target)} "
                        "but allowReplicationFactorChange is false",
                    )
                    del changes[(name, index)]
        loop = asyncio.get_running_loop()
        try:
            results.update(await loop.run_in_executor(None, link.alter_reassignments, changes))
        except NotControllerError as e:
            top, top_message = ErrorCode.not_controller, str(e)
    by_topic: dict[str, list[Any]] = {}
    for topic in request.topics:
        for p in topic.partitions:
            error, message = results.get((topic.name, p.partition_index), (top, None))
            by_topic.setdefault(topic.name, []).append(
                build(
                    module.ReassignablePartitionResponse,
                    partition_index=p.partition_index,
                    error_code=error,
                    error_message=message,
                )
            )
    return build(
        module.AlterPartitionReassignmentsResponse,
        throttle_time=NO_THROTTLE,
        allow_replication_factor_change=getattr(request, "allow_replication_factor_change", True),
        error_code=top,
        error_message=top_message,
        responses=tuple(
            build(module.ReassignableTopicResponse, name=name, partitions=tuple(partitions))
            for name, partitions in by_topic.items()
        ),
    )


API = Api(key=45, name="AlterPartitionReassignments", min_version=0, max_version=1, handle=handle)
