"""Topic configs Kafka 3.x still accepts but no longer acts on: accepted, stored, shown, ignored.

``message.format.version`` was deprecated by KIP-724 in Kafka 3.0: a 3.x broker whose
``inter.broker.protocol.version`` is 3.0 or later accepts it (any version its MetadataVersion
knows, e.g. ``0.10.0``, ``2.8``, ``3.0-IV1``), keeps it in the topic's config and shows it in
DescribeConfigs, and ignores it: records are always v2 batches (Kafka logs that the value is
ignored). ``message.downconversion.enable`` (removed in Kafka 4.0) controls down-conversion for
old fetchers, which this broker never serves (Fetch starts at v4, and batches are always v2), so
it is accepted and ignored too. Their broker synonyms are ``log.message.format.version`` (static
only, as in Kafka) and ``log.message.downconversion.enable`` (dynamic).

The topic's other configs go to the Store, whose ``LogConfig`` holds only the keys that act;
these keys are kept beside them by the broker, in ``<data-dir>/legacy-topic-configs.json``,
keyed by topic ID (a topic deleted and created again under its name starts without them). In a
ZooKeeper cluster that file is per broker: a value set through one broker is shown by that
broker (a departure from Kafka, which keeps it in the topic's znode).
"""

from __future__ import annotations

import json
import logging
import os
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from logstore.broker.config.broker_config import (
    DEFAULT_MESSAGE_FORMAT_VERSION,
    BrokerConfig,
    message_format_version_error,
)
from logstore.errors import InvalidConfigError
from logstore.storage.checkpoints import write_atomically

_log = logging.getLogger("logstore.broker")


def _boolean_error(value: str) -> str | None:
    return None if value.strip().lower() in ("true", "false") else "Expected value to be either true or false"


@dataclass(frozen=True)
class LegacyKey:
    """A topic key accepted for Kafka 3.x compatibility and ignored."""

    name: str
    kind: str
    default: str
    broker_key: str
    doc: str

    def error(self, value: str) -> str | None:
        """None when ``value`` is one Kafka 3.x accepts, else why not."""
        return message_format_version_error(value) if self.kind == "string" else _boolean_error(value)

    def normalized(self, value: str) -> str:
        return value.strip().lower() if self.kind == "boolean" else value.strip()

    def broker_value(self, config: BrokerConfig) -> tuple[str, bool]:
        """The broker-level value (Kafka's synonym) and whether a layer above the default sets it."""
        value = config.values[self.broker_key]
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        return text, self.broker_key in config.raw


LEGACY_TOPIC_KEYS: dict[str, LegacyKey] = {
    key.name: key
    for key in (
        LegacyKey(
            "message.format.version",
            "string",
            DEFAULT_MESSAGE_FORMAT_VERSION,
            "log.message.format.version",
            "[DEPRECATED in Kafka 3.0] the message format version to append with; accepted and "
            "ignored (batches are always v2, as in Kafka 3.x once inter.broker.protocol.version >= 3.0)",
        ),
        LegacyKey(
            "message.downconversion.enable",
            "boolean",
            "true",
            "log.message.downconversion.enable",
            "whether old fetchers get down-converted batches; accepted and ignored (this broker "
            "serves Fetch from v4 and stores v2 batches only, so there is nothing to down-convert)",
        ),
    )
}


def split(config: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the keys LogConfig takes, the legacy keys) of a topic config."""
    regular = {k: v for k, v in config.items() if k not in LEGACY_TOPIC_KEYS}
    legacy = {k: v for k, v in config.items() if k in LEGACY_TOPIC_KEYS}
    return regular, legacy


def checked(legacy: Mapping[str, Any], topic: str = "") -> dict[str, str]:
    """The legacy keys normalized; InvalidConfigError in Kafka's words on a bad value."""
    result = {}
    for name, value in legacy.items():
        key = LEGACY_TOPIC_KEYS[name]
        if value is None:
            raise InvalidConfigError(f"Null value not supported for topic configs: {name}")
        problem = key.error(str(value))
        if problem is not None:
            raise InvalidConfigError(f"Invalid value {value} for configuration {name}: {problem}")
        result[name] = key.normalized(str(value))
    if "message.format.version" in result and topic:
        _log.info(
            "Topic configuration message.format.version with value `%s` is ignored for `%s`: "
            "records are always stored as v2 batches (deprecated in Kafka 3.0, removed in 4.0)",
            result["message.format.version"],
            topic,
        )
    return result


class LegacyTopicConfigs:
    """The legacy keys each topic sets, by topic ID, persisted as JSON (tmp, fsync, rename)."""

    FILE = "legacy-topic-configs.json"

    def __init__(self, data_dir: str) -> None:
        self.path = os.path.join(data_dir, self.FILE)
        self._lock = threading.Lock()
        self._by_id: dict[str, dict[str, Any]] = {}
        try:
            with open(self.path, encoding="utf-8") as f:
                data = json.load(f)
            topics = data.get("topics", {}) if isinstance(data, dict) else {}
            self._by_id = {str(k): dict(v) for k, v in topics.items() if isinstance(v, dict)}
        except FileNotFoundError:
            pass
        except (OSError, ValueError) as e:
            _log.warning("ignoring unreadable %s: %s", self.path, e)

    def get(self, topic_id: uuid.UUID) -> dict[str, str]:
        """The legacy keys the topic sets (empty if none)."""
        entry = self._by_id.get(str(topic_id))
        return dict(entry.get("config", {})) if entry else {}

    def set(self, topic_id: uuid.UUID, topic: str, config: Mapping[str, str], live: set[uuid.UUID]) -> None:
        """Make ``config`` the topic's legacy keys; entries of topics not in ``live`` are dropped."""
        with self._lock:
            keep = {str(t) for t in live}
            by_id = {k: v for k, v in self._by_id.items() if k in keep}
            if config:
                by_id[str(topic_id)] = {"topic": topic, "config": dict(config)}
            else:
                by_id.pop(str(topic_id), None)
            if by_id == self._by_id:
                return
            text = json.dumps({"version": 1, "topics": by_id}, indent=1, sort_keys=True)
            write_atomically(self.path, text.encode())
            self._by_id = by_id
