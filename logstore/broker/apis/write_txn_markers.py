"""WriteTxnMarkers (key 27, v1): a transaction coordinator's markers, written by the leaders.

Each marker (producer id and epoch, COMMIT or ABORT, the coordinator's epoch)
goes to every listed partition this broker leads as a control batch, and is
answered once the ISR has it; a partition led elsewhere is
NOT_LEADER_OR_FOLLOWER, an unknown one UNKNOWN_TOPIC_OR_PARTITION, a marker
below the producer's epoch INVALID_PRODUCER_EPOCH. Brokers send it to each
other; clients do not.

With an authorizer: ALTER or CLUSTER_ACTION on the cluster (brokers), else every
partition CLUSTER_AUTHORIZATION_FAILED (security/operations.py).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.transactions.transaction_io import write_markers_here
from logstore.protocol import build, codec, group_by_topic
from logstore.security import operations


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(27, ctx.version).response_module
    results = []
    allowed = ctx.broker.authorizer is None or operations.allowed_cluster(ctx, "alter") or operations.allowed_cluster(ctx)
    for marker in request.markers:
        tps = [(t.name, int(p)) for t in marker.topics for p in t.partition_indexes]
        if allowed:
            errors = await write_markers_here(
                ctx.broker, marker.producer_id, marker.producer_epoch, marker.coordinator_epoch,
                bool(marker.transaction_result), tps,
            )  # fmt: skip
        else:
            errors = dict.fromkeys(tps, ErrorCode.cluster_authorization_failed)
        by_topic = group_by_topic(
            (topic, build(module.WritableTxnMarkerPartitionResult, partition_index=index, error_code=error))
            for (topic, index), error in errors.items()
        )
        results.append(
            build(
                module.WritableTxnMarkerResult,
                producer_id=marker.producer_id,
                topics=tuple(
                    build(module.WritableTxnMarkerTopicResult, name=name, partitions=tuple(parts))
                    for name, parts in by_topic.items()
                ),
            )
        )
    return build(module.WriteTxnMarkersResponse, markers=tuple(results))


API = Api(key=27, name="WriteTxnMarkers", min_version=1, max_version=1, handle=handle)
