"""Topic lookups shared by the APIs: existence, auto-creation, error codes."""

from __future__ import annotations

import asyncio
import logging

from kio.schema.errors import ErrorCode

from logstore.broker.context import Services
from logstore.coordinator.internal_topics import INTERNAL_TOPICS
from logstore.errors import InvalidArgumentError, LogstoreError, TopicExistsError
from logstore.protocol.errors import error_for
from logstore.storage.store import validate_topic_name

_log = logging.getLogger("logstore.broker")


async def topic_error(broker: Services, name: str | None, auto_create: bool) -> ErrorCode:
    """NONE if the topic exists (creating it when allowed, off the event loop: in a cluster the
    controller's answer is awaited), else why not."""
    if name is None:
        return ErrorCode.invalid_topic_exception
    if broker.metadata.has_topic(name):
        return ErrorCode.none
    try:
        validate_topic_name(name)
    except InvalidArgumentError:
        return ErrorCode.invalid_topic_exception
    if not (auto_create and broker.config.auto_create_topics_enable) or name in INTERNAL_TOPICS:
        return ErrorCode.unknown_topic_or_partition
    try:
        await asyncio.get_running_loop().run_in_executor(
            None,
            broker.controller.create_topic,
            name,
            broker.config.num_partitions,
            {},
            broker.config.default_replication_factor,
        )
        _log.info("auto-created topic %s with %d partitions", name, broker.config.num_partitions)
    except TopicExistsError:
        pass
    except (LogstoreError, OSError) as e:
        _log.error("auto-creating topic %s failed: %s", name, e)
        return error_for(e)
    # In a cluster the topic may exist (made through another broker) before this broker's metadata
    # has it: LEADER_NOT_AVAILABLE, retriable, as Kafka answers for a topic being created. A topic
    # without partitions instead would tell librdkafka it has none, and it fails what it queued.
    return ErrorCode.none if broker.metadata.has_topic(name) else ErrorCode.leader_not_available
