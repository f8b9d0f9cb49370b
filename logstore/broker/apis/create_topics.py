"""CreateTopics (key 19): create topics, checked the way Kafka's controller checks them.

Per topic, in Kafka's order: a name given twice in the request is
INVALID_REQUEST ("Duplicate topic name."); an illegal name, or one that
collides with an existing topic once '.' and '_' are treated alike, is
INVALID_TOPIC_EXCEPTION; an existing topic is TOPIC_ALREADY_EXISTS; a bad
config (unknown key, bad value, null value) is INVALID_CONFIG with the
reason. Then the layout: ``num_partitions`` -1 takes ``num.partitions``,
``replication_factor`` -1 takes ``default.replication.factor``; 0 or below
-1 is INVALID_PARTITIONS / INVALID_REPLICATION_FACTOR, and a factor above the
registered brokers is INVALID_REPLICATION_FACTOR; ``min.insync.replicas``
above the factor is INVALID_CONFIG (acks=all could never succeed). A manual
assignment needs both counts at -1 (else INVALID_REQUEST), registered
brokers each named once per partition, the same count for every partition,
and partitions 0..n-1 (else INVALID_REPLICA_ASSIGNMENT, with Kafka's
messages). Every error carries a message.

The legacy keys Kafka 3.x accepts and ignores (``message.format.version``,
``message.downconversion.enable``; legacy_topic_configs.py) are checked
(INVALID_CONFIG for a version Kafka does not know) and kept beside the
topic's config. ``validate_only`` runs every check and creates nothing. From v5 a result
carries the partition count, replication factor and the topic's resulting
configs (as DescribeConfigs reports them); v7 adds the topic ID (the zero
UUID for ``validate_only``: no topic exists). The request timeout is not
used: creation is done when the response is sent. kio starts at v2.

With an authorizer (security/operations.py): CREATE on the cluster, or on each
topic (else TOPIC_AUTHORIZATION_FAILED); the configs in the answer (v5+) need
DESCRIBE_CONFIGS on the topic (else topic_config_error_code
TOPIC_AUTHORIZATION_FAILED and none).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.api_definition import Api
from logstore.broker.apis.alter_configs import set_legacy
from logstore.broker.apis.describe_configs import topic_entries
from logstore.broker.config.legacy_topic_configs import checked, split
from logstore.broker.context import RequestContext, Services
from logstore.errors import InvalidArgumentError, InvalidConfigError, LogstoreError
from logstore.protocol import NO_THROTTLE, build, codec
from logstore.protocol.errors import error_for
from logstore.security import operations
from logstore.security.acls import ResourceType
from logstore.storage.config import LogConfig
from logstore.storage.store import validate_topic_name

_log = logging.getLogger("logstore.broker")
_ZERO_UUID = uuid.UUID(int=0)


class Refused(Exception):
    """A topic that cannot be created: its error code and message."""

    def __init__(self, error: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.error = error
        self.message = message


def manual_assignment_error(broker: Services, replicas: Any) -> str | None:
    """Kafka's complaint about one partition's replica list, or None."""
    if not replicas:
        return "The manual partition assignment includes an empty replica list."
    for replica in replicas:
        if broker.metadata.broker(replica) is None:
            return f"The manual partition assignment includes broker {replica}, but no such broker is registered."
    for replica in replicas:
        if list(replicas).count(replica) > 1:
            return f"The manual partition assignment includes the broker {replica} more than once."
    return None


def _layout(broker: Services, topic: Any) -> tuple[int, int, dict[int, list[int]] | None]:
    """(partitions, replication factor, manual assignment or None) the request asks for, or Refused."""
    if topic.assignments:
        if topic.replication_factor != -1:
            raise Refused(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but replication factor was not set to -1.",
            )
        if topic.num_partitions != -1:
            raise Refused(
                ErrorCode.invalid_request,
                "A manual partition assignment was specified, but numPartitions was not set to -1.",
            )
        seen: set[int] = set()
        for assignment in topic.assignments:
            if assignment.partition_index in seen:
                raise Refused(
                    ErrorCode.invalid_replica_assignment,
                    f"Found multiple manual partition assignments for partition {assignment.partition_index}",
                )
            seen.add(assignment.partition_index)
            problem = manual_assignment_error(broker, assignment.broker_ids)
            if problem is not None:
                raise Refused(ErrorCode.invalid_replica_assignment, problem)
        if seen != set(range(len(seen))):
            raise Refused(
                ErrorCode.invalid_replica_assignment,
                "partitions should be a consecutive 0-based integer sequence",
            )
        manual = {a.partition_index: list(a.broker_ids) for a in topic.assignments}
        if len({len(replicas) for replicas in manual.values()}) > 1:
            raise Refused(
                ErrorCode.invalid_replica_assignment, "All partitions should have the same number of replicas"
            )
        return len(seen), len(manual[0]), manual
    if topic.replication_factor < -1 or topic.replication_factor == 0:
        raise Refused(
            ErrorCode.invalid_replication_factor,
            "Replication factor must be larger than 0, or -1 to use the default value.",
        )
    if topic.num_partitions < -1 or topic.num_partitions == 0:
        raise Refused(
            ErrorCode.invalid_partitions,
            "Number of partitions must be larger than 0, or -1 to use the default value.",
        )
    factor = (
        broker.config.default_replication_factor
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    live = max(len(broker.metadata.brokers()), 1)
    if factor > live:
        raise Refused(
            ErrorCode.invalid_replication_factor,
            f"Unable to replicate the partition {factor} time(s): The target replication factor of "
            f"{factor} cannot be reached because only {live} broker(s) are registered.",
        )
    partitions = int(broker.config.num_partitions if topic.num_partitions == -1 else topic.num_partitions)
    return partitions, int(factor), None


def _check(
    broker: Services, topic: Any
) -> tuple[int, int, dict[int, list[int]] | None, LogConfig, dict[str, str]]:
    """(partitions, replication factor, manual assignment, config, legacy keys) for a creatable
    topic, or Refused."""
    metadata = broker.metadata
    name = topic.name
    try:
        validate_topic_name(name)
    except InvalidArgumentError as e:
        raise Refused(ErrorCode.invalid_topic_exception, str(e)) from None
    if metadata.has_topic(name):
        raise Refused(ErrorCode.topic_already_exists, f"Topic '{name}' already exists.")
    if "." in name or "_" in name:
        unified = name.replace(".", "_")
        for existing in metadata.topic_names():
            if existing.replace(".", "_") == unified:
                raise Refused(
                    ErrorCode.invalid_topic_exception,
                    f"Topic '{name}' collides with existing topic: {existing}",
                )
    nulls = [config.name for config in topic.configs if config.value is None]
    if nulls:
        raise Refused(
            ErrorCode.invalid_config, f"Null value not supported for topic configs: {','.join(nulls)}"
        )
    regular, legacy = split({c.name: c.value for c in topic.configs})
    try:
        config = LogConfig.from_dict(regular, defaults=broker.controller.defaults)
        legacy = checked(legacy)
    except InvalidConfigError as e:
        raise Refused(ErrorCode.invalid_config, str(e)) from None
    partitions, factor, manual = _layout(broker, topic)
    if config.min_insync_replicas > factor:
        raise Refused(
            ErrorCode.invalid_config,
            f"min.insync.replicas={config.min_insync_replicas} is above the replication factor {factor}: "
            "acks=all could never succeed; lower min.insync.replicas or raise the factor",
        )
    return partitions, factor, manual, config, legacy


def _create(
    broker: Services, topic: Any, validate_only: bool
) -> tuple[int, int, LogConfig, uuid.UUID, dict[str, str]]:
    partitions, factor, manual, config, legacy = _check(broker, topic)
    if validate_only:
        return partitions, factor, config, _ZERO_UUID, legacy
    try:
        broker.controller.create_topic(topic.name, partitions, config.overrides, factor, manual)
    except (LogstoreError, OSError) as e:
        raise Refused(error_for(e), str(e)) from None
    _log.info("created topic %s with %d partitions, replication factor %d", topic.name, partitions, factor)
    try:
        set_legacy(broker, topic.name, checked(legacy, topic.name))
    except (LogstoreError, OSError) as e:  # the topic exists; its legacy keys could not be kept
        _log.warning("topic %s: legacy configs %s not kept: %s", topic.name, legacy, e)
    metadata = broker.metadata
    return partitions, factor, metadata.topic_config(topic.name), metadata.topic_id(topic.name), legacy


def _config_results(
    ctx: RequestContext, module: Any, config: LogConfig, legacy: dict[str, str]
) -> tuple[Any, ...]:
    return tuple(
        build(
            module.CreatableTopicConfigs,
            name=entry.name,
            value=entry.value,
            read_only=entry.read_only,
            config_source=entry.source,
            is_sensitive=False,
        )
        for entry in topic_entries(ctx.broker, config, legacy)
    )


async def handle(ctx: RequestContext, request: Any) -> Any:
    module = codec(19, ctx.version).response_module
    counts = Counter(topic.name for topic in request.topics)
    results = []
    auth = ctx.broker.authorizer
    on_cluster = auth is None or operations.allowed_cluster(ctx)
    for topic in request.topics:
        if counts[topic.name] > 1:
            continue
        fields: dict[str, Any] = {"topic_id": _ZERO_UUID, "configs": ()}
        describable = auth is None or operations.allowed(ctx, ResourceType.TOPIC, topic.name, "configs")
        if not describable:
            fields["topic_config_error_code"] = ErrorCode.topic_authorization_failed
        if not (on_cluster or operations.allowed(ctx, ResourceType.TOPIC, topic.name)):
            fields.update(error_code=ErrorCode.topic_authorization_failed, error_message="Authorization failed.")
            results.append(build(module.CreatableTopicResult, name=topic.name, **fields))
            continue
        try:
            partitions, factor, config, topic_id, legacy = await asyncio.get_running_loop().run_in_executor(
                None, _create, ctx.broker, topic, request.validate_only
            )  # off the event loop: files and fsyncs alone, the controller's answer in a cluster
        except Refused as e:
            fields.update(error_code=e.error, error_message=e.message)
        else:
            fields.update(
                error_code=ErrorCode.none,
                error_message=None,
                topic_id=topic_id,
                num_partitions=partitions,
                replication_factor=factor,
                configs=_config_results(ctx, module, config, legacy) if ctx.version >= 5 and describable else (),
            )
        results.append(build(module.CreatableTopicResult, name=topic.name, **fields))
    for name in (name for name, count in counts.items() if count > 1):
        results.append(
            build(
                module.CreatableTopicResult,
                name=name,
                topic_id=_ZERO_UUID,
                error_code=ErrorCode.invalid_request,
                error_message="Duplicate topic name.",
                configs=(),
            )
        )
    return build(module.CreateTopicsResponse, throttle_time=NO_THROTTLE, topics=tuple(results))


API = Api(key=19, name="CreateTopics", min_version=2, max_version=7, handle=handle)
