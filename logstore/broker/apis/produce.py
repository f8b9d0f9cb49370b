"""Produce (key 0): each partition's batch validated in C and appended as it came.

The checks and the append are the partition's and storage's
(:meth:`~logstore.broker.replication.partition.Partition.append_as_leader`, Kafka's
``appendRecordsToLeader``, over ``storage/validator.py``, Kafka's ``LogValidator``,
and ``UnifiedLog.append``); this module decodes the request, refuses bad ``acks``
for every partition (a transactional producer's must be -1), appends every
partition, and where acks=-1 asks for replication returns a ``Deferred`` holding
one wait for all of them, up to the request's timeout, so the connection serves
the requests behind it meanwhile (docs/broker.md, "Pipelining"); then encodes the answer.
With an authorizer: WRITE on each topic (TOPIC_AUTHORIZATION_FAILED for its
partitions) and, for a transactional producer, WRITE on its transactional id
(every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED); see security/operations.py. acks=0 sends no response. One partition's failure never
fails the others.
"""

from __future__ import annotations

import logging
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.apis import produce_codec
from logstore.broker.context import Deferred, RequestContext
from logstore.broker.replication.replica_manager import AppendResult, Opening
from logstore.broker.transactions.txn_verification import produce_error
from logstore.protocol import RawBody
from logstore.security import operations
from logstore.security.acls import ResourceType

_log = logging.getLogger("logstore.broker")


async def handle(ctx: RequestContext, request: Any) -> Any:
    acks = request.acks
    if acks not in (0, 1, -1) or (request.transactional_id is not None and acks != -1):
        # Kafka's rule too: a transaction's records need acks=-1.
        error = ErrorCode.invalid_required_acks
    else:
        error = ErrorCode.none
    auth = ctx.broker.authorizer
    if (
        auth is not None
        and request.transactional_id is not None
        and not operations.allowed(ctx, ResourceType.TRANSACTIONAL_ID, request.transactional_id)
    ):
        error = ErrorCode.transactional_id_authorization_failed  # the whole request, as Kafka
    replicas = ctx.broker.replica_manager
    refused: dict[tuple[str, int], AppendResult] = {}
    guards: dict[tuple[str, int], object] = {}
    if error == ErrorCode.none and request.transactional_id is not None and ctx.broker.txn_verifier.enabled:
        refused, guards = await _verify(ctx, request)
    responses = []
    waiting = []
    for topic in request.topic_data:
        partitions = []
        denied = auth is not None and not operations.allowed(ctx, ResourceType.TOPIC, topic.name)
        for data in topic.partition_data:
            if error != ErrorCode.none:
                result = AppendResult(error)
            elif denied:
                result = AppendResult(ErrorCode.topic_authorization_failed)
            elif refused and (topic.name, data.index) in refused:
                result = refused[(topic.name, data.index)]
            else:
                try:
                    guard = guards.get((topic.name, data.index)) if guards else None
                    result = await replicas.append(topic.name, data.index, data.records, acks, guard)
                except Exception:  # one partition's bug must not fail the others, nor the connection
                    _log.exception("producing to %s-%d failed", topic.name, data.index)
                    result = AppendResult(
                        ErrorCode.unknown_server_error, message="internal error; see broker log"
                    )
            partitions.append((data.index, result))
            if result.required_offset >= 0:
                waiting.append((topic.name, data.index, result))
            elif result.error:
                ctx.broker.metrics.error(API, result.error)
        responses.append((topic.name, partitions))
    if waiting:  # acks=-1 on a replicated partition: every append first, then one wait for all
        # The appends are done: the requests behind this one go on while it waits (context.py).
        return Deferred(_replicated(ctx, request, acks, responses, waiting))
    return _answer(ctx, acks, responses)


async def _replicated(
    ctx: RequestContext,
    request: Any,
    acks: int,
    responses: list[tuple[str, list[tuple[int, AppendResult]]]],
    waiting: list[tuple[str, int, AppendResult]],
) -> Any:
    """acks=-1: the answer once the ISR has every appended batch, or the request's timeout."""
    await ctx.broker.replica_manager.await_replication(waiting, request.timeout.total_seconds())
    for _, _, result in waiting:
        if result.error:
            ctx.broker.metrics.error(API, result.error)
    return _answer(ctx, acks, responses)


def _answer(
    ctx: RequestContext, acks: int, responses: list[tuple[str, list[tuple[int, AppendResult]]]]
) -> Any:
    if acks == 0:
        return None
    return RawBody(
        produce_codec.encode_body(
            ctx.version,
            [
                (
                    name,
                    [
                        (
                            index,
                            r.error,
                            r.base_offset,
                            r.append_time,
                            r.log_start,
                            r.message,
                            r.record_errors,
                        )
                        for index, r in partitions
                    ],
                )
                for name, partitions in responses
            ],
        )
    )


async def _verify(
    ctx: RequestContext, request: Any
) -> tuple[dict[tuple[str, int], AppendResult], dict[tuple[str, int], object]]:
    """KIP-890 part 1 (broker/transactions/txn_verification.py): the partitions whose batch would open the
    producer's transaction there are confirmed with its coordinator first. Returns the refused
    partitions' answers and the confirmed ones' verification guards."""
    replicas = ctx.broker.replica_manager
    opening: dict[tuple[str, int], Opening] = {}
    for topic in request.topic_data:
        for data in topic.partition_data:
            found = replicas.needs_verification(topic.name, data.index, data.records)
            if found is not None:
                opening[(topic.name, data.index)] = found
    if not opening:
        return {}, {}
    producers = {(found.producer_id, found.epoch) for found in opening.values()}
    if len(producers) > 1:  # Kafka: one transactional request, one producer
        mixed = AppendResult(
            ErrorCode.invalid_producer_id_mapping,
            message="Transactional records contained more than one producer ID",
        )
        return dict.fromkeys(opening, mixed), {}
    ((producer_id, epoch),) = producers
    # One guard per producer and partition while any verification is in flight (Kafka's
    # VerificationStateEntry): requests verified side by side share it, and a marker voids it.
    guards = {
        tp: found.partition.producers.guards.setdefault(producer_id, object())
        for tp, found in opening.items()
    }
    answers = await ctx.broker.txn_verifier.verify(
        request.transactional_id, producer_id, epoch, list(opening)
    )
    refused: dict[tuple[str, int], AppendResult] = {}
    for tp, answer in answers.items():
        if answer != ErrorCode.none:
            code, message = produce_error(answer)
            refused[tp] = AppendResult(code, message=message)
            guards.pop(tp, None)  # the partition's guard stays: another request may share it
    return refused, guards


API = Api(key=0, name="Produce", min_version=3, max_version=10, handle=handle, decode=produce_codec.decode)
