"""What the broker hands the group coordinator for consumer-protocol groups (KIP-848).

- :class:`MetadataTopics`: the topics consumer groups are assigned from, read
  from the broker's :class:`~logstore.broker.metadata_cache.MetadataCache`
  (the coordinator's :class:`~logstore.coordinator.consumer_membership.TopicCatalog`);
- :func:`coordinator_options`: those topics and the groups' dynamic configs
  (:class:`~logstore.coordinator.group_configs.GroupConfigs`, kept in
  ``group-configs.json`` in the data directory), as keyword arguments of
  :class:`~logstore.coordinator.GroupCoordinator`.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterable
from typing import Any

from logstore.broker.metadata_cache import MetadataCache
from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.coordinator.group.group_configs import GroupConfigs

GROUP_CONFIGS_FILE = "group-configs.json"


class MetadataTopics:
    """The metadata cache as the coordinator's topic catalog. Every call is O(1) but
    :meth:`topic_names`, O(topics log topics)."""

    def __init__(self, metadata: MetadataCache) -> None:
        self._metadata = metadata

    def describe_topic(self, name: str) -> tuple[uuid.UUID, int] | None:
        """(topic id, partition count), or None for a topic that does not exist."""
        topic = self._metadata.topic(name)
        return None if topic is None else (topic.topic_id, len(topic.partitions))

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._metadata.topic_by_id(topic_id)

    def topic_names(self) -> Iterable[str]:
        return self._metadata.topic_names()


def coordinator_options(metadata: MetadataCache, data_dir: str, config: CoordinatorConfig) -> dict[str, Any]:
    """The consumer-group arguments of the broker's GroupCoordinator (``catalog``, ``group_configs``)."""
    path = os.path.join(data_dir, GROUP_CONFIGS_FILE)
    return {"catalog": MetadataTopics(metadata), "group_configs": GroupConfigs(config, path)}
