"""AlterPartition (key 56): a leader asks the controller to change a partition's ISR.

Kafka's ZooKeeper-mode brokers send this (as AlterIsr, KIP-497) instead of
writing the ISR themselves: only the controller writes partition state, so
its fencing covers ISR changes too. The controller checks that the sender
leads the partition at the leader epoch it names, and that the partition
epoch (the state znode's version) it names is current, then writes the new
ISR conditionally and answers the partition's new state. A broker that is
not the controller answers NOT_CONTROLLER; a stale leader FENCED_LEADER_EPOCH
or NOT_LEADER_OR_FOLLOWER; a stale partition epoch INVALID_UPDATE_VERSION
(the leader waits for the controller's next word, then retries).

With an authorizer: CLUSTER_ACTION on the cluster (brokers), else
CLUSTER_AUTHORIZATION_FAILED (security/operations.py).
"""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.security import operations


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(56, ctx.version).response_module
    link = ctx.broker.cluster_link
    if not operations.allowed_cluster(ctx) or link is None or not link.is_controller:
        return build(
            module.AlterPartitionResponse,
            throttle_time=NO_THROTTLE,
            error_code=(
                ErrorCode.not_controller if operations.allowed_cluster(ctx) else ErrorCode.cluster_authorization_failed
            ),
            topics=(),
        )
    loop = asyncio.get_running_loop()
    topics = []
    for topic in request.topics:
        name = ctx.broker.metadata.topic_by_id(topic.topic_id)
        partitions = []
        for p in topic.partitions:
            new_isr = tuple(
                getattr(p, "new_isr", ()) or (b.broker_id for b in getattr(p, "new_isr_with_epochs", ()))
            )
            if name is None:
                error, state = ErrorCode.unknown_topic_id, None
            else:
                error, state = await loop.run_in_executor(
                    None, link.alter_partition, name, p.partition_index, request.broker_id, p.leader_epoch,
                    new_isr, p.partition_epoch,
                )  # fmt: skip
            partitions.append(
                build(
                    module.PartitionData,
                    partition_index=p.partition_index,
                    error_code=error,
                    leader_id=state.leader if state else -1,
                    leader_epoch=state.leader_epoch if state else -1,
                    isr=tuple(state.isr) if state else (),
                    leader_recovery_state=0,
                    partition_epoch=state.partition_epoch if state else -1,
                )
            )
        topics.append(build(module.TopicData, topic_id=topic.topic_id, partitions=tuple(partitions)))
    return build(
        module.AlterPartitionResponse,
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        topics=tuple(topics),
    )


API = Api(key=56, name="AlterPartition", min_version=2, max_version=3, handle=handle)
