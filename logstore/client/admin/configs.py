"""The admin client's configs: describe, alter, alter incrementally (DescribeConfigs,
AlterConfigs, IncrementalAlterConfigs).

A :class:`ConfigResource` (TOPIC, BROKER by id, or GROUP: KIP-848's group configs) names
what to describe or change; :class:`ConfigEntry` is one described value (with its
:class:`ConfigSource` and synonyms) or one :class:`AlterConfigOpType` operation. TOPIC and
GROUP resources go to the controller (NOT_CONTROLLER is retried once), a BROKER resource to
that broker. Each resource has its own future, failed with the broker's error code and
message for it. ``alter_configs`` is deprecated with a warning, as in confluent-kafka.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable
from concurrent.futures import Future
from enum import Enum, IntEnum
from typing import Any

from logstore.client.admin.checks import check_bool, check_unique, config_text
from logstore.client.admin.client import AdminBase, kafka_error, new_future, settle
from logstore.client.admin.resources import ResourceType
from logstore.client.errors import KafkaError

DESCRIBE_CONFIGS = 32
ALTER_CONFIGS = 33
INCREMENTAL_ALTER_CONFIGS = 44

# ResourceType -> Kafka's ConfigResource.Type on the wire (GROUP is 32 there, KIP-848).
_CONFIG_WIRE_TYPE = {ResourceType.TOPIC: 2, ResourceType.BROKER: 4, ResourceType.GROUP: 32}


class ConfigSource(IntEnum):
    """Where a described config value comes from (DescribeConfigs' ``config_source``).

    An IntEnum: confluent-kafka's described entries carry the bare int, so both
    ``source == CONFIG_SOURCE_DEFAULT_CONFIG`` and ``source is ConfigSource.DEFAULT_CONFIG`` hold here.
    """

    UNKNOWN_CONFIG = 0
    DYNAMIC_TOPIC_CONFIG = 1
    DYNAMIC_BROKER_CONFIG = 2
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3
    STATIC_BROKER_CONFIG = 4
    DEFAULT_CONFIG = 5
    GROUP_CONFIG = 8


CONFIG_SOURCE_UNKNOWN_CONFIG = ConfigSource.UNKNOWN_CONFIG.value
CONFIG_SOURCE_DYNAMIC_TOPIC_CONFIG = ConfigSource.DYNAMIC_TOPIC_CONFIG.value
CONFIG_SOURCE_DYNAMIC_BROKER_CONFIG = ConfigSource.DYNAMIC_BROKER_CONFIG.value
CONFIG_SOURCE_DYNAMIC_DEFAULT_BROKER_CONFIG = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG.value
CONFIG_SOURCE_STATIC_BROKER_CONFIG = ConfigSource.STATIC_BROKER_CONFIG.value
CONFIG_SOURCE_DEFAULT_CONFIG = ConfigSource.DEFAULT_CONFIG.value
CONFIG_SOURCE_GROUP_CONFIG = ConfigSource.GROUP_CONFIG.value


class AlterConfigOpType(Enum):
    """The operation of one entry of ``incremental_alter_configs`` (IncrementalAlterConfigs' op codes)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


class ConfigEntry:
    """One config property: described by ``describe_configs``, or an operation for ``incremental_alter_configs``.

    ``synonyms`` maps each synonym's name to its ConfigEntry (``is_synonym`` True), highest
    precedence first, as DescribeConfigs lists them (the entry's own source among them).
    """

    def __init__(
        self,
        name: str,
        value: str | None,
        source: ConfigSource = ConfigSource.UNKNOWN_CONFIG,
        is_read_only: bool = False,
        is_default: bool = False,
        is_sensitive: bool = False,
        is_synonym: bool = False,
        synonyms: dict[str, ConfigEntry] | None = None,
        incremental_operation: AlterConfigOpType | None = None,
    ) -> None:
        self.name = name
        self.value = value
        self.source = source
        self.is_read_only = bool(is_read_only)
        self.is_default = bool(is_default)
        self.is_sensitive = bool(is_sensitive)
        self.is_synonym = bool(is_synonym)
        self.synonyms = {} if synonyms is None else synonyms
        self.incremental_operation = incremental_operation

    def __repr__(self) -> str:
        return f'ConfigEntry({self.name}="{self.value}")'

    def __str__(self) -> str:
        return f'{self.name}="{self.value}"'


@functools.total_ordering
class ConfigResource:
    """A resource with configs (TOPIC by name, BROKER by id as a string, GROUP), and what to set on it.

    ``set_config`` (dict str: str) is what ``alter_configs`` writes (every other key reverts
    to its default); ``incremental_configs`` (ConfigEntry with ``incremental_operation``) is
    what ``incremental_alter_configs`` applies. Equal and hashed by (type, name).
    """

    Type = ResourceType

    def __init__(
        self,
        restype: ResourceType | str | int,
        name: str,
        set_config: dict[str, str] | None = None,
        described_configs: dict[str, ConfigEntry] | None = None,
        error: KafkaError | None = None,
        incremental_configs: list[ConfigEntry] | None = None,
    ) -> None:
        if name is None:
            raise ValueError("Expected resource name to be a string")
        if isinstance(restype, str):
            try:
                restype = ResourceType[restype.upper()]
            except KeyError:
                raise ValueError(
                    f'Unknown resource type "{restype}": should be a ConfigResource.Type'
                ) from None
        elif isinstance(restype, int):
            restype = ResourceType(restype)
        self.restype = restype
        self.restype_int = int(restype.value)
        self.name = name
        self.set_config_dict = dict(set_config) if set_config is not None else {}
        self.incremental_configs = list(incremental_configs or [])
        self.configs = described_configs
        self.error = error

    def __repr__(self) -> str:
        if self.error is not None:
            return f"ConfigResource({self.restype},{self.name},{self.error!r})"
        return f"ConfigResource({self.restype},{self.name})"

    def __hash__(self) -> int:
        return hash((self.restype, self.name))

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, ConfigResource):
            return NotImplemented
        if self.restype != other.restype:
            return self.restype < other.restype
        return self.name < other.name

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ConfigResource):
            return NotImplemented
        return self.restype == other.restype and self.name == other.name

    def __len__(self) -> int:
        return len(self.set_config_dict)

    def set_config(self, name: str, value: str, overwrite: bool = True) -> None:
        """Set ``name`` for ``alter_configs`` (kept as it is when ``overwrite`` is False and it is set)."""
        if not overwrite and name in self.set_config_dict:
            return
        self.set_config_dict[name] = value

    def add_incremental_config(self, config_entry: ConfigEntry) -> None:
        """Add an entry (with its ``incremental_operation``) for ``incremental_alter_configs``."""
        self.incremental_configs.append(config_entry)


class ConfigsAdmin(AdminBase):
    """The calls on configs (see the module docstring)."""

    def _config_route(self, resource: ConfigResource) -> int | KafkaError | None:
        """BROKER resources go to that broker ("" to any), others to the controller."""
        if resource.restype is not ResourceType.BROKER:
            return self._controller()
        if resource.name == "":
            return None
        return int(resource.name)

    @staticmethod
    def _check_resources(resources: Any, method: str) -> list[ConfigResource]:
        if not isinstance(resources, list):
            raise TypeError(f"Expected list of ConfigResource, not {type(resources).__name__}")
        if not resources:
            raise ValueError("Expected non-empty list of ConfigResource objects")
        for r in resources:
            if not isinstance(r, ConfigResource):
                raise ValueError(f"Expected list of {ConfigResource!r}")
            if r.restype not in _CONFIG_WIRE_TYPE:
                raise ValueError(
                    f"{r!r}: {method} takes TOPIC, BROKER and GROUP resources, not {r.restype.name}"
                )
            if not isinstance(r.name, str):
                raise TypeError(f"{r!r}: the resource name must be a str")
            if r.restype is ResourceType.BROKER and r.name != "" and not r.name.isdigit():
                raise ValueError(f"{r!r}: a BROKER resource is named by the broker id, e.g. '0'")
        check_unique("resource", resources)
        return resources

    def _configs_call(
        self,
        api_key: int,
        resources: list[ConfigResource],
        resource_fields: Callable[[ConfigResource], dict[str, Any]],
        extra: dict[str, Any],
        results_field: str,
        value_of: Callable[[Any], Any],
        deadline: float,
    ) -> dict[ConfigResource, Future[Any]]:
        """``{resource: Future}`` for a request naming each resource (type, name and its
        ``resource_fields``) whose answer has a result per resource in ``results_field``
        (``value_of`` a result is the future's value)."""
        futures = {r: new_future() for r in resources}
        by_key = {(_CONFIG_WIRE_TYPE[r.restype], r.name): r for r in resources}

        def build(batch: list[ConfigResource]) -> dict[str, Any]:
            named = [
                {"resource_type": _CONFIG_WIRE_TYPE[r.restype], "resource_name": r.name, **resource_fields(r)}
                for r in batch
            ]
            return {"resources": named, **extra}

        def parse(response: Any, batch: list[ConfigResource]) -> dict[ConfigResource, Any]:
            out: dict[ConfigResource, Any] = {}
            for result in getattr(response, results_field):
                resource = by_key.get((int(result.resource_type), result.resource_name))
                if resource is None:
                    continue
                if result.error_code:
                    out[resource] = kafka_error(result.error_code, result.error_message)
                else:
                    out[resource] = value_of(result)
            return out

        def work() -> None:
            settle(
                futures, self._to_controller(api_key, resources, build, parse, deadline, self._config_route)
            )

        self._submit(futures.values(), work, deadline)
        return futures

    def describe_configs(
        self, resources: list[ConfigResource], *, request_timeout: float | None = None
    ) -> dict[ConfigResource, Future[dict[str, ConfigEntry]]]:
        """Every config of each resource (DescribeConfigs, with synonyms); ``{resource: Future[{name: ConfigEntry}]}``."""
        self._check_resources(resources, "describe_configs")
        deadline = self._deadline(request_timeout)

        return self._configs_call(DESCRIBE_CONFIGS, resources, lambda _: {"configuration_keys": None},
                                  {"include_synonyms": True, "include_documentation": False}, "results",
                                  _described_configs, deadline)  # fmt: skip

    def alter_configs(
        self,
        resources: list[ConfigResource],
        *,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[ConfigResource, Future[None]]:
        """Replace each resource's configs with its ``set_config`` (AlterConfigs); deprecated as in confluent.

        Every key not in ``set_config`` reverts to its default. ``{resource: Future[None]}``.
        """
        warnings.warn("alter_configs has been deprecated. Use incremental_alter_configs instead.",
                      category=DeprecationWarning, stacklevel=2)  # fmt: skip
        self._check_resources(resources, "alter_configs")
        check_bool("validate_only", validate_only)
        deadline = self._deadline(request_timeout)
        for r in resources:
            for name, value in r.set_config_dict.items():
                config_text(repr(r), name, value)

        def resource_fields(r: ConfigResource) -> dict[str, Any]:
            configs = [{"name": n, "value": config_text(repr(r), n, v)} for n, v in r.set_config_dict.items()]
            return {"configs": configs}

        return self._configs_call(ALTER_CONFIGS, resources, resource_fields, {"validate_only": validate_only},
                                  "responses", lambda _: None, deadline)  # fmt: skip

    def incremental_alter_configs(
        self,
        resources: list[ConfigResource],
        *,
        request_timeout: float | None = None,
        validate_only: bool = False,
    ) -> dict[ConfigResource, Future[None]]:
        """Apply each resource's ``incremental_configs`` (IncrementalAlterConfigs); ``{resource: Future[None]}``.

        Each ConfigEntry needs an ``incremental_operation``; SET/APPEND/SUBTRACT need a value.
        """
        self._check_resources(resources, "incremental_alter_configs")
        check_bool("validate_only", validate_only)
        deadline = self._deadline(request_timeout)
        for r in resources:
            if not r.incremental_configs:
                raise ValueError(
                    "expected non-empty list of ConfigEntry to alter incrementally in incremental_configs field"
                )
            for entry in r.incremental_configs:
                if not isinstance(entry, ConfigEntry):
                    raise TypeError(f"{r!r}: incremental_configs holds ConfigEntry objects, not {entry!r}")
                if not isinstance(entry.incremental_operation, AlterConfigOpType):
                    raise TypeError(f"{r!r}: {entry!r} needs incremental_operation (an AlterConfigOpType)")
                if entry.incremental_operation is not AlterConfigOpType.DELETE and entry.value is None:
                    raise ValueError(f"{r!r}: {entry!r} {entry.incremental_operation.name} needs a value")
                config_text(repr(r), entry.name, "" if entry.value is None else entry.value)
            check_unique("config", (e.name for e in r.incremental_configs))

        def resource_fields(r: ConfigResource) -> dict[str, Any]:
            configs = [
                {"name": e.name, "config_operation": e.incremental_operation.value,  # type: ignore[union-attr]
                 "value": None if e.incremental_operation is AlterConfigOpType.DELETE
                 else config_text(repr(r), e.name, e.value)}
                for e in r.incremental_configs
            ]  # fmt: skip
            return {"configs": configs}

        return self._configs_call(INCREMENTAL_ALTER_CONFIGS, resources, resource_fields,
                                  {"validate_only": validate_only}, "responses", lambda _: None, deadline)  # fmt: skip


def _described_configs(result: Any) -> dict[str, ConfigEntry]:
    out = {}
    for c in result.configs:
        source = _source(int(c.config_source))
        synonyms = {
            s.name: ConfigEntry(s.name, s.value, _source(int(s.source)), is_synonym=True)
            for s in getattr(c, "synonyms", ())
        }
        out[c.name] = ConfigEntry(c.name, c.value, source, bool(c.read_only), source is ConfigSource.DEFAULT_CONFIG,
                                  bool(c.is_sensitive), False, synonyms)  # fmt: skip
    return out


def _source(value: int) -> ConfigSource:
    try:
        return ConfigSource(value)
    except ValueError:
        return ConfigSource.UNKNOWN_CONFIG
