"""DeleteTopics (key 20): delete topics by name, or from v6 by topic ID.

With ``delete.topic.enable=false`` every topic in the request fails with
TOPIC_DELETION_DISABLED (INVALID_REQUEST before v3, which lacks that code),
as in Kafka. Otherwise, per topic: an unknown name is
UNKNOWN_TOPIC_OR_PARTITION, an unknown ID UNKNOWN_TOPIC_ID; a name given
twice, an ID given twice, both a name and an ID in one entry, neither, or a
name whose ID is also in the request are INVALID_REQUEST with Kafka's
messages. Internal topic names are deleted like any other (Kafka's
controller does not refuse them either).

A deleted topic's logs are removed from disk before the response is sent.
The broker forgets the topic's producer state, and fetches waiting on its
partitions are woken (they then see UNKNOWN_TOPIC_OR_PARTITION). Results
carry the topic ID from v6, messages from v5. kio starts at v1.

With an authorizer (security/operations.py): DELETE on each topic, and DESCRIBE on a
topic named by ID (else TOPIC_AUTHORIZATION_FAILED, without its name).
"""

from __future__ import annotations

import logging
import uuid
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.context import RequestContext, Services
from logstore.errors import LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.protocol.errors import error_for
from logstore.security import operations
from logstore.security.acls import ResourceType

_log = logging.getLogger("logstore.broker")
_ZERO_UUID = uuid.UUID(int=0)

Result = tuple[str | None, uuid.UUID, ErrorCode, str | None]


def _requested(ctx: RequestContext, request: Any) -> list[tuple[str | None, uuid.UUID]]:
    """(name, id) per entry; the zero UUID when no ID was given."""
    if ctx.version < 6:
        return [(name, _ZERO_UUID) for name in request.topic_names]
    return [(topic.name, topic.topic_id or _ZERO_UUID) for topic in request.topics]


def delete_topic(broker: Services, name: str) -> tuple[ErrorCode, str | None]:
    """Delete one topic and everything the broker keeps for it."""
    try:
        partitions = broker.metadata.partitions(name)
        broker.controller.delete_topic(name)
    except (LogstoreError, OSError) as e:
        return error_for(e), str(e)
    broker.replica_manager.forget_topic(name)
    for partition in range(partitions):
        broker.replica_manager.appended(name, partition)
    _log.info("deleted topic %s (%d partitions)", name, partitions)
    return ErrorCode.none, None


def _delete_all(ctx: RequestContext, entries: list[tuple[str | None, uuid.UUID]]) -> list[Result]:
    broker = ctx.broker
    metadata = broker.metadata
    auth = broker.authorizer
    results: list[Result] = []
    names = Counter(name for name, topic_id in entries if name is not None and topic_id == _ZERO_UUID)
    ids = Counter(topic_id for name, topic_id in entries if name is None and topic_id != _ZERO_UUID)
    targets: dict[uuid.UUID, str] = {}  # id -> name of every topic to delete
    for name, topic_id in entries:
        if name is None and topic_id == _ZERO_UUID:
            results.append(
                (None, _ZERO_UUID, ErrorCode.invalid_request, "Neither topic name nor id were specified.")
            )
        elif name is not None and topic_id != _ZERO_UUID:
            results.append(
                (
                    name,
                    topic_id,
                    ErrorCode.invalid_request,
                    "You may not specify both topic name and topic id.",
                )
            )
    for name, count in names.items():
        if count > 1:
            results.append((name, _ZERO_UUID, ErrorCode.invalid_request, "Duplicate topic name."))
    for topic_id, count in ids.items():
        if count > 1:
            results.append((None, topic_id, ErrorCode.invalid_request, "Duplicate topic id."))
        else:
            found = metadata.topic_by_id(topic_id)
            if found is None:
                results.append((None, topic_id, ErrorCode.unknown_topic_id, f"No topic with ID {topic_id}."))
            elif auth is not None and not operations.allowed(ctx, ResourceType.TOPIC, found, "by_id"):
                results.append((None, topic_id, ErrorCode.topic_authorization_failed, "Authorization failed."))
            elif auth is not None and not operations.allowed(ctx, ResourceType.TOPIC, found):
                results.append((found, topic_id, ErrorCode.topic_authorization_failed, "Authorization failed."))
            else:
                targets[topic_id] = found
    for name, count in names.items():
        if count > 1:
            continue
        if auth is not None and not operations.allowed(ctx, ResourceType.TOPIC, name):
            results.append((name, _ZERO_UUID, ErrorCode.topic_authorization_failed, "Authorization failed."))
            continue
        if not metadata.has_topic(name):
            results.append(
                (name, _ZERO_UUID, ErrorCode.unknown_topic_or_partition, f"Topic {name} does not exist.")
            )
            continue
        topic_id = metadata.topic_id(name)
        if topic_id in targets or ids[topic_id] > 1:
            targets.pop(topic_id, None)
            results.append(
                (
                    name,
                    topic_id,
                    ErrorCode.invalid_request,
                    "The provided topic name maps to an ID that was already supplied.",
                )
            )
            continue
        targets[topic_id] = name
    for topic_id, name in targets.items():
        results.append((name, topic_id, *delete_topic(broker, name)))
    return results


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(20, ctx.version).response_module
    entries = _requested(ctx, request)
    if not ctx.broker.config.delete_topic_enable:
        error = ErrorCode.topic_deletion_disabled if ctx.version >= 3 else ErrorCode.invalid_request
        results: list[Result] = [
            (name, topic_id, error, "Topic deletion is disabled.") for name, topic_id in entries
        ]
    else:
        results = _delete_all(ctx, entries)
    responses = tuple(
        build(
            module.DeletableTopicResult, name=name, topic_id=topic_id, error_code=error, error_message=message
        )
        for name, topic_id, error, message in results
    )
    return build(module.DeleteTopicsResponse, throttle_time=NO_THROTTLE, responses=responses)


API = Api(key=20, name="DeleteTopics", min_version=1, max_version=6, handle=handle)
