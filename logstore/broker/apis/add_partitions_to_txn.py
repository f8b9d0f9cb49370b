"""AddPartitionsToTxn (key 24): partitions join a producer's transaction.

v0-v3 are the client's form (one transaction). v4-v5 are the brokers' batched
form (several transactions), which a partition leader uses to ask whether
partitions are in a transaction (``verify_only``, KIP-890 part 1: see
broker/transactions/txn_verification.py); it needs CLUSTER_ACTION on the cluster (else the
top-level CLUSTER_AUTHORIZATION_FAILED). v4 reads TRANSACTION_ABORTABLE as
INVALID_TXN_STATE (v5 added the code).

Partitions of topics this cluster does not have get UNKNOWN_TOPIC_OR_PARTITION
and the others OPERATION_NOT_ATTEMPTED (Kafka's KafkaApis); otherwise every
partition gets the coordinator's answer (see
:mod:`logstore.coordinator.txn.transaction_coordinator`). v0-v1 read PRODUCER_FENCED as
INVALID_PRODUCER_EPOCH.

With an authorizer (security/operations.py): WRITE on the transactional id (else
every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED) and on each topic (else
TOPIC_AUTHORIZATION_FAILED, the others OPERATION_NOT_ATTEMPTED).
"""

from __future__ import annotations

from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext
from logstore.broker.transactions.state_topic import coordinator_of, for_version
from logstore.protocol import NO_THROTTLE, build, codec, group_by_topic
from logstore.security import operations
from logstore.security.acls import ResourceType


async def handle(ctx: RequestContext, request: Any) -> Any:
    if ctx.version >= 4:
        return await _handle_batched(ctx, request)
    module = codec(24, ctx.version).response_module
    metadata = ctx.broker.metadata
    wanted = [(t.name, int(p)) for t in request.v3_and_below_topics for p in t.partitions]
    denied: set[str] = set()
    txn_id = request.v3_and_below_transactional_id
    if ctx.broker.authorizer is not None:
        if not operations.allowed(ctx, ResourceType.TRANSACTIONAL_ID, txn_id):
            denied = {name for name, _ in wanted}
        else:
            names = {name for name, _ in wanted}
            denied = names - operations.filter_allowed(ctx, ResourceType.TOPIC, names, str)
    unknown = {tp for tp in wanted if tp[0] not in denied and not 0 <= tp[1] < (metadata.partition_count(tp[0]) or 0)}
    if denied and not operations.allowed(ctx, ResourceType.TRANSACTIONAL_ID, txn_id):
        errors = dict.fromkeys(wanted, ErrorCode.transactional_id_authorization_failed)
    elif unknown or denied:
        errors = {
            tp: ErrorCode.topic_authorization_failed if tp[0] in denied
            else ErrorCode.unknown_topic_or_partition if tp in unknown
            else ErrorCode.operation_not_attempted
            for tp in wanted
        }  # fmt: skip
    else:
        error = await coordinator_of(ctx.broker).add_partitions(
            request.v3_and_below_transactional_id,
            request.v3_and_below_producer_id,
            request.v3_and_below_producer_epoch,
            wanted,
        )
        errors = dict.fromkeys(wanted, for_version(error, ctx.version, 2))
    by_topic = group_by_topic(
        (topic, build(module.AddPartitionsToTxnPartitionResult, partition_index=index, partition_error_code=error))
        for (topic, index), error in errors.items()
    )
    return build(
        module.AddPartitionsToTxnResponse,
        throttle_time=NO_THROTTLE,
        results_by_topic_v3_and_below=tuple(
            build(module.AddPartitionsToTxnTopicResult, name=name, results_by_partition=tuple(results))
            for name, results in by_topic.items()
        ),
    )


async def _handle_batched(ctx: RequestContext, request: Any) -> Any:
    """v4+: each transaction verified (``verify_only``) or its partitions added."""
    module = codec(24, ctx.version).response_module
    if not operations.allowed_cluster(ctx, "broker"):
        return build(
            module.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE,
            error_code=ErrorCode.cluster_authorization_failed, results_by_transaction=(),
        )  # fmt: skip
    coordinator = coordinator_of(ctx.broker)
    metadata = ctx.broker.metadata
    results = []
    for txn in request.transactions:
        wanted = [(t.name, int(p)) for t in txn.topics for p in t.partitions]
        if txn.verify_only:
            errors = coordinator.verify_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted)
        else:
            unknown = {tp for tp in wanted if not 0 <= tp[1] < (metadata.partition_count(tp[0]) or 0)}
            if unknown:
                errors = {
                    tp: ErrorCode.unknown_topic_or_partition if tp in unknown else ErrorCode.operation_not_attempted
                    for tp in wanted
                }  # fmt: skip
            else:
                error = await coordinator.add_partitions(txn.transactional_id, txn.producer_id, txn.producer_epoch, wanted)
                errors = dict.fromkeys(wanted, error)
        if ctx.version < 5:
            errors = {tp: ErrorCode.invalid_txn_state if e == ErrorCode.transaction_abortable else e for tp, e in errors.items()}
        by_topic = group_by_topic(
            (topic, build(module.AddPartitionsToTxnPartitionResult, partition_index=index, partition_error_code=error))
            for (topic, index), error in errors.items()
        )
        results.append(build(
            module.AddPartitionsToTxnResult, transactional_id=txn.transactional_id,
            topic_results=tuple(
                build(module.AddPartitionsToTxnTopicResult, name=name, results_by_partition=tuple(parts))
                for name, parts in by_topic.items()
            ),
        ))  # fmt: skip
    return build(
        module.AddPartitionsToTxnResponse, throttle_time=NO_THROTTLE, error_code=ErrorCode.none,
        results_by_transaction=tuple(results),
    )  # fmt: skip


API = Api(key=24, name="AddPartitionsToTxn", min_version=0, max_version=5, handle=handle)
