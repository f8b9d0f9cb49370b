"""AddPartitionsToTxn (key 24, v0-v3, the client's form): partitions join a producer's transaction.

Partitions of topics this cluster does not have get UNKNOWN_TOPIC_OR_PARTITION
and the others OPERATION_NOT_ATTEMPTED (Kafka's KafkaApis); otherwise every
partition gets the coordinator's answer (see
:mod:`logstore.coordinator.transactions`). v0-v1 read PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH.
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.apis import Api
from logstore.broker.server import RequestContext
from logstore.broker.transactions import coordinator_of, for_version
from logstore.protocol import NO_THROTTLE, build, codec


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(24, ctx.version).response_module
    metadata = ctx.broker.metadata
    wanted = [(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions]
    unknown = {tp for tp in wanted if not 0 <= tp[1] < (metadata.partition_count(tp[0]) or 0)}
    if unknown:
        errors = {tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted for tp in wanted}
    else:
        error = await coordinator_of(ctx.broker).add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            wanted,
        )
        errors = dict.fromkeys(wanted, for_version(error, ctx.version, 2))
    by_topic: dict[str, list[Any]] = {}
    for (topic, index), error in errors.items():
        by_topic.setdefault(topic, []).append(
            build(module.AddPartitionsToTxnPartitionResult, partition_index=index, partition_error_code=error)
        )
    return build(
        module.AddPartitionsToTxnResponse,
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            build(module.AddPartitionsToTxnTopicResult, name=name, results_by_partition=tuple(results))
            for name, results in by_topic.items()
        ),
    )


API = Api(key=24, name="AddPartitionsToTxn", min_version=0, max_version=3, handle=handle)
