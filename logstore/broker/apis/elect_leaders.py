"""ElectLeaders (key 43, KIP-183/460): a preferred or an unclean leader election, asked by an admin.

Clients send it to the controller (Metadata's controller id). Any other broker,
and a broker alone (it has no controller), answers NOT_CONTROLLER for every
partition named, as Kafka's ZooKeeper-mode brokers do; from v2 also as the
top-level error. The controller runs the election on its worker thread
(:meth:`~logstore.broker.cluster_member.ClusterLink.elect_leaders`): per
partition NONE, ELECTION_NOT_NEEDED (the preferred replica already leads; for
an unclean election, the leader is alive), PREFERRED_LEADER_NOT_AVAILABLE (the
preferred replica is down or out of the ISR) or ELIGIBLE_LEADERS_NOT_AVAILABLE
(no live replica), UNKNOWN_TOPIC_OR_PARTITION. No partitions (null): every
partition in the cluster. v0 has no election type: preferred.

With an authorizer: ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED
(security/operations.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.cluster_member import PREFERRED, UNCLEAN, NotControllerError
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec, group_by_topic
from logstore.security import operations


def _results(module: Any, results: dict[tuple[str, int], tuple[Any, str | None]]) -> tuple[Any, ...]:
    by_topic = group_by_topic(
        (topic, build(module.PartitionResult, partition_id=partition, error_code=error, error_message=message))
        for (topic, partition), (error, message) in results.items()
    )
    return tuple(
        build(module.ReplicaElectionResult, topic=topic, partition_result=tuple(partitions))
        for topic, partitions in by_topic.items()
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(43, ctx.version).response_module
    named = (
        None
        if request.topic_partitions is None
        else [(t.topic, p) for t in request.topic_partitions for p in t.partitions]
    )
    election_type = getattr(request, "election_type", PREFERRED)
    link = ctx.broker.cluster_link
    top = ErrorCode.none
    results: dict[tuple[str, int], tuple[Any, str | None]]
    if not operations.allowed_cluster(ctx):
        top = ErrorCode.cluster_authorization_failed
        results = {key: (top, None) for key in named or ()}
    elif election_type not in (PREFERRED, UNCLEAN):
        top = ErrorCode.invalid_request
        results = {
            key: (ErrorCode.invalid_request, f"Unknown election type {election_type}") for key in named or ()
        }
    elif link is None or not link.is_controller:
        top = ErrorCode.not_controller
        results = {key: (ErrorCode.not_controller, None) for key in named or ()}
    else:
        loop = asyncio.get_running_loop()
        try:
            results = await loop.run_in_executor(None, link.elect_leaders, election_type, named)
        except NotControllerError:
            top = ErrorCode.not_controller
            results = {key: (ErrorCode.not_controller, None) for key in named or ()}
    return build(
        module.ElectLeadersResponse,
        throttle_time=NO_THROTTLE,
        error_code=top,
        replica_election_results=_results(module, results),
    )


API = Api(key=43, name="ElectLeaders", min_version=0, max_version=2, handle=handle)
