"""The GROUP config resource (type 32) of DescribeConfigs, IncrementalAlterConfigs and AlterConfigs.

The config handlers call these for a resource of type :data:`GROUP` (a one-line hook each); the
rules are the coordinator's (:mod:`logstore.coordinator.group_configs`): ``consumer.session.timeout.ms``
and ``consumer.heartbeat.interval.ms`` per group, bounded by the broker's ``group.consumer.min.*``
and ``group.consumer.max.*``.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.config.dynamic_config import ConfigEntry
from logstore.broker.context import Services
from logstore.broker.groups.offsets_topic import coordinator_of
from logstore.coordinator.group.group_configs import GROUP_RESOURCE_TYPE

GROUP = GROUP_RESOURCE_TYPE

Outcome = tuple[ErrorCode, str | None]


def describe_group_resource(broker: Services, name: str) -> tuple[ErrorCode, str | None, list[ConfigEntry]]:
    """DescribeConfigs of group ``name``: (error, message, entries sorted by name)."""
    error, message, entries = coordinator_of(broker).group_configs.describe(name)
    return (
        error,
        message,
        [
            ConfigEntry(e.name, e.value, e.source, e.read_only, e.synonyms, e.config_type, e.documentation)
            for e in entries
        ],
    )


def incremental_alter_group_resource(
    broker: Services, name: str, changes: Iterable[Any], validate_only: bool
) -> Outcome:
    """IncrementalAlterConfigs of group ``name``; ``changes`` are the request's configs (name,
    config_operation, value)."""
    triples = [(change.name, change.config_operation, change.value) for change in changes]
    return coordinator_of(broker).group_configs.incremental_alter(name, triples, validate_only)


def alter_group_resource(broker: Services, name: str, configs: Iterable[Any], validate_only: bool) -> Outcome:
    """AlterConfigs (legacy) of group ``name``: ``configs`` (name, value) become its whole set."""
    return coordinator_of(broker).group_configs.alter(name, {c.name: c.value for c in configs}, validate_only)
