"""Dynamic group configs: the GROUP config resource (type 32) of DescribeConfigs and (Incremental)AlterConfigs.

Kafka's ``GroupConfig`` for consumer-protocol groups: a group may override

- ``consumer.session.timeout.ms`` (default: the broker's ``group.consumer.session.timeout.ms``),
- ``consumer.heartbeat.interval.ms`` (default: ``group.consumer.heartbeat.interval.ms``),

each an int of at least 1, within the broker's ``group.consumer.min.*`` and
``group.consumer.max.*``, the session timeout above the heartbeat interval
(checked on the group's effective values; INVALID_CONFIG with Kafka's
message otherwise). An unknown name is INVALID_CONFIG ("Unknown group config
name"), an empty group name INVALID_REQUEST. The group need not exist.
DescribeConfigs lists both keys with their effective values: source
DYNAMIC_GROUP_CONFIG (8) for an override, else DEFAULT_CONFIG (5), type INT,
never read-only.

The overrides are kept in one JSON file (written atomically) in the broker's
data directory; Kafka keeps them in its metadata log, so every broker sees
them, while here each broker keeps its own (a cluster's admin must send a
change to the group's coordinator). The coordinator reads a group's values
when it answers a heartbeat (the interval) and when it starts a member's
session timer (the timeout), so a change applies from the next heartbeat.

>>> configs = GroupConfigs(CoordinatorConfig())
>>> configs.incremental_alter("g", [("consumer.heartbeat.interval.ms", SET, "6000")], validate_only=False)
(<ErrorCode.none: 0>, None)
>>> configs.heartbeat_interval_ms("g"), configs.heartbeat_interval_ms("other")
(6000, 5000)
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass

from kio.schema.errors import ErrorCode

from logstore.coordinator.group.coordinator_config import CoordinatorConfig
from logstore.storage.checkpoints import write_atomically

log = logging.getLogger(__name__)

GROUP_RESOURCE_TYPE = 32
DYNAMIC_GROUP_CONFIG = 8
DEFAULT_CONFIG = 5
INT_CONFIG_TYPE = 3
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
_OPERATION_NAMES = {SET: "SET", DELETE: "DELETE", APPEND: "APPEND", SUBTRACT: "SUBTRACT"}
_FILE_VERSION = 1

SESSION_TIMEOUT = "consumer.session.timeout.ms"
HEARTBEAT_INTERVAL = "consumer.heartbeat.interval.ms"

Outcome = tuple[ErrorCode, str | None]


@dataclass(frozen=True)
class GroupConfigKey:
    """One group config: its broker default and bounds (attributes of :class:`CoordinatorConfig`)."""

    name: str
    default: str
    minimum: str
    maximum: str
    doc: str

    def bounds(self, config: CoordinatorConfig) -> tuple[int, int]:
        return getattr(config, self.minimum), getattr(config, self.maximum)


GROUP_CONFIG_KEYS: dict[str, GroupConfigKey] = {
    key.name: key
    for key in (
        GroupConfigKey(
            SESSION_TIMEOUT,
            "group_consumer_session_timeout_ms",
            "group_consumer_min_session_timeout_ms",
            "group_consumer_max_session_timeout_ms",
            "The timeout to detect client failures when using the consumer group protocol.",
        ),
        GroupConfigKey(
            HEARTBEAT_INTERVAL,
            "group_consumer_heartbeat_interval_ms",
            "group_consumer_min_heartbeat_interval_ms",
            "group_consumer_max_heartbeat_interval_ms",
            "The heartbeat interval given to the members of a consumer group.",
        ),
    )
}


def _broker_name(attribute: str) -> str:
    return attribute.replace("_", ".")


@dataclass(frozen=True)
class GroupConfigEntry:
    """One described group config; ``synonyms`` are (name, value, source), highest precedence first."""

    name: str
    value: str
    source: int
    read_only: bool
    synonyms: tuple[tuple[str, str | None, int], ...]
    config_type: int
    documentation: str | None


class GroupConfigs:
    """Every group's config overrides, persisted in ``path`` (or kept in memory when None).

    Invariant: every stored override has a known name and an int value that
    passed validation against this broker's bounds when it was set. Reads are
    O(1); changes rewrite the file, O(all overrides).
    """

    def __init__(self, config: CoordinatorConfig, path: str | None = None) -> None:
        self.config = config
        self.path = path
        self._overrides: dict[str, dict[str, int]] = {}
        if path is not None:
            self._load(path)

    # -- reads -------------------------------------------------------------------------

    def overrides(self, group_id: str) -> dict[str, int]:
        """The group's overrides (a copy). O(keys)."""
        return dict(self._overrides.get(group_id, {}))

    def value(self, group_id: str, name: str) -> int:
        """The group's effective value of ``name``: its override, else the broker's default. O(1)."""
        override = self._overrides.get(group_id, {}).get(name)
        return (
            override if override is not None else int(getattr(self.config, GROUP_CONFIG_KEYS[name].default))
        )

    def session_timeout_ms(self, group_id: str) -> int:
        """``consumer.session.timeout.ms`` of the group. O(1)."""
        return self.value(group_id, SESSION_TIMEOUT)

    def heartbeat_interval_ms(self, group_id: str) -> int:
        """``consumer.heartbeat.interval.ms`` of the group. O(1)."""
        return self.value(group_id, HEARTBEAT_INTERVAL)

    def describe(
        self, group_id: str, keys: Collection[str] | None = None
    ) -> tuple[ErrorCode, str | None, list[GroupConfigEntry]]:
        """DescribeConfigs of a GROUP resource: (error, message, entries sorted by name). O(keys)."""
        if not group_id:
            return ErrorCode.invalid_request, "Group name must not be empty", []
        overrides = self._overrides.get(group_id, {})
        entries = []
        for name in sorted(GROUP_CONFIG_KEYS):
            if keys and name not in keys:
                continue
            value = str(self.value(group_id, name))
            source = DYNAMIC_GROUP_CONFIG if name in overrides else DEFAULT_CONFIG
            entries.append(
                GroupConfigEntry(
                    name,
                    value,
                    source,
                    False,
                    ((name, value, source),),
                    INT_CONFIG_TYPE,
                    GROUP_CONFIG_KEYS[name].doc,
                )
            )
        return ErrorCode.none, None, entries

    # -- changes -----------------------------------------------------------------------

    def incremental_alter(
        self, group_id: str, changes: Iterable[tuple[str, int, str | None]], validate_only: bool
    ) -> Outcome:
        """IncrementalAlterConfigs of a GROUP resource: (name, operation, value) per key. O(keys).

        SET gives a key a value, DELETE drops its override; APPEND and SUBTRACT
        are INVALID_CONFIG (no key is a list). The resulting overrides are checked
        whole, then stored unless ``validate_only``.
        """
        if not group_id:
            return ErrorCode.invalid_request, "Group name must not be empty"
        overrides: dict[str, str | int] = dict(self._overrides.get(group_id, {}))
        for name, operation, value in changes:
            if operation == DELETE:
                overrides.pop(name, None)
            elif operation in (APPEND, SUBTRACT):
                return (
                    ErrorCode.invalid_config,
                    f"Can't {_OPERATION_NAMES[operation]} to key {name} because its type is not LIST.",
                )
            elif operation == SET:
                if value is None:
                    return ErrorCode.invalid_config, f"Null value not supported for group configs: {name}"
                overrides[name] = value
            else:
                return ErrorCode.invalid_request, f"Unknown alter config operation type {operation}"
        return self._replace(group_id, overrides, validate_only)

    def alter(self, group_id: str, configs: Mapping[str, str | None], validate_only: bool) -> Outcome:
        """AlterConfigs (the legacy API) of a GROUP resource: ``configs`` become its whole set. O(keys)."""
        if not group_id:
            return ErrorCode.invalid_request, "Group name must not be empty"
        nulls = sorted(name for name, value in configs.items() if value is None)
        if nulls:
            return ErrorCode.invalid_config, f"Null value not supported for group configs: {','.join(nulls)}"
        return self._replace(group_id, dict(configs.items()), validate_only)

    def _replace(
        self, group_id: str, overrides: Mapping[str, str | int | None], validate_only: bool
    ) -> Outcome:
        parsed, error = self._validate(overrides)
        if error is not None:
            return ErrorCode.invalid_config, error
        if validate_only:
            return ErrorCode.none, None
        previous = self._overrides.get(group_id)
        if parsed:
            self._overrides[group_id] = parsed
        else:
            self._overrides.pop(group_id, None)
        try:
            self._save()
        except OSError as e:
            if previous is None:
                self._overrides.pop(group_id, None)
            else:
                self._overrides[group_id] = previous
            log.error("could not store group configs in %s: %s", self.path, e)
            return ErrorCode.kafka_storage_error, f"could not store the group configs: {e.strerror}"
        log.info("group %s configs are now %s", group_id, parsed or "the defaults")
        return ErrorCode.none, None

    def _validate(self, overrides: Mapping[str, str | int | None]) -> tuple[dict[str, int], str | None]:
        """The overrides as ints, or Kafka's message for the first problem. O(keys)."""
        parsed: dict[str, int] = {}
        for name, raw in overrides.items():
            if name not in GROUP_CONFIG_KEYS:
                return {}, f"Unknown group config name: {name}"
            try:
                value = int(str(raw).strip())
            except ValueError:
                return {}, f"Invalid value {raw} for configuration {name}: Not a number of type INT"
            if value < 1:
                return {}, f"Invalid value {value} for configuration {name}: Value must be at least 1"
            if value > 2**31 - 1:
                return {}, f"Invalid value {raw} for configuration {name}: Not a number of type INT"
            parsed[name] = value
        for name in sorted(parsed):
            key = GROUP_CONFIG_KEYS[name]
            low, high = key.bounds(self.config)
            if parsed[name] < low:
                return {}, f"{name} must be greater than or equal to {_broker_name(key.minimum)}"
            if parsed[name] > high:
                return {}, f"{name} must be less than or equal to {_broker_name(key.maximum)}"

        def effective(name: str) -> int:
            return parsed.get(name, int(getattr(self.config, GROUP_CONFIG_KEYS[name].default)))

        if effective(SESSION_TIMEOUT) <= effective(HEARTBEAT_INTERVAL):
            return {}, f"{SESSION_TIMEOUT} must be greater than {HEARTBEAT_INTERVAL}"
        return parsed, None

    # -- the file ----------------------------------------------------------------------

    def _load(self, path: str) -> None:
        try:
            with open(path, encoding="utf-8") as f:
                document = json.load(f)
        except FileNotFoundError:
            return
        except (OSError, ValueError) as e:
            log.error("ignoring unreadable group configs in %s: %s", path, e)
            return
        groups = document.get("groups") if isinstance(document, dict) else None
        if not isinstance(groups, dict):
            log.error("ignoring group configs in %s: no 'groups' object", path)
            return
        for group_id, overrides in groups.items():
            parsed, error = self._validate(overrides if isinstance(overrides, dict) else {"": None})
            if error is not None:
                log.error("ignoring the stored configs of group %s: %s", group_id, error)
            elif parsed:
                self._overrides[str(group_id)] = parsed

    def _save(self) -> None:
        if self.path is None:
            return
        document = {"version": _FILE_VERSION, "groups": self._overrides}
        data = json.dumps(document, sort_keys=True, indent=1).encode("utf-8")
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        write_atomically(self.path, data)
