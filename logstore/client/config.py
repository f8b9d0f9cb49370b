"""Client configuration: Kafka's dotted names, checked once, with hints.

A config is a dict like confluent-kafka's: ``{"bootstrap.servers":
"127.0.0.1:9092", "linger.ms": 5}``. Values may be given as their type or as
strings (``"5"``, ``"true"``), as librdkafka accepts them. An unknown key
raises :class:`ConfigError` naming the nearest valid key; a value of the
wrong type or out of range names the key, what was given and what is allowed.
librdkafka's older names for the same settings are accepted (``message.timeout.ms``
for ``delivery.timeout.ms``, ``queue.buffering.max.ms`` for ``linger.ms``, ...).

>>> c = ClientConfig.parse({"bootstrap.servers": "h:1", "linger.ms": "7"}, "producer")
>>> c["linger.ms"], c["acks"]
(7.0, -1)
>>> ClientConfig.parse({"bootstrap.servers": "h:1", "linger.msx": 1}, "producer")
Traceback (most recent call last):
...
logstore.client.config.ConfigError: unknown producer config key 'linger.msx'; did you mean 'linger.ms'?
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from logstore.client.sasl import MECHANISMS as SASL_MECHANISMS
from logstore.errors import InvalidConfigError
from logstore.security.plain import PLAIN_LOGIN_MODULE, parse_jaas
from logstore.security.scram import SCRAM_LOGIN_MODULE

ALL = frozenset({"producer", "consumer", "admin"})
P = frozenset({"producer"})
C = frozenset({"consumer"})


class ConfigError(InvalidConfigError):
    """A client config key or value this client cannot take; the message says what would do."""


@dataclass(frozen=True)
class Key:
    """One config key: its kind, default, the clients it applies to, and its bounds."""

    name: str
    kind: str  # int, bool, str, float, list, callable, any, or "enum:a|b|c"
    default: Any
    roles: frozenset[str] = ALL
    low: float | None = None
    high: float | None = None


def _keys() -> list[Key]:
    big = 2**31 - 1
    return [
        # -- every client --------------------------------------------------
        Key("bootstrap.servers", "any", None),
        Key("client.id", "str", "logstore"),
        Key("metadata.max.age.ms", "int", 300_000, low=1),
        Key("topic.metadata.refresh.interval.ms", "int", 300_000, low=-1),
        Key("socket.connection.setup.timeout.ms", "int", 10_000, low=1),
        Key("socket.timeout.ms", "int", 60_000, low=1),
        Key("request.timeout.ms", "int", 30_000, low=1),
        Key("reconnect.backoff.ms", "int", 100, low=0),
        Key("reconnect.backoff.max.ms", "int", 10_000, low=0),
        Key("retry.backoff.ms", "int", 100, low=1),
        Key("retry.backoff.max.ms", "int", 1_000, low=1),
        Key("socket.send.buffer.bytes", "int", 0, low=0),
        Key("socket.receive.buffer.bytes", "int", 0, low=0),
        Key("allow.auto.create.topics", "bool", True),
        Key("security.protocol", "enum:plaintext|PLAINTEXT|sasl_plaintext|SASL_PLAINTEXT", "plaintext"),
        Key("sasl.mechanism", "enum:" + "|".join(SASL_MECHANISMS), "PLAIN"),
        Key("sasl.username", "str", None),
        Key("sasl.password", "str", None),
        Key("sasl.jaas.config", "str", None),  # Java's form: username and password taken from it
        Key("error_cb", "callable", None),
        Key("logger", "any", None),
        Key("stats_cb", "callable", None),
        Key("statistics.interval.ms", "int", 0, low=0),
        Key("debug", "str", ""),
        Key(
            "log_level", "int", 6, low=0, high=7
        ),  # librdkafka's syslog level; this client logs via `logging`
        Key("api.version.request", "bool", True),
        Key("broker.address.family", "enum:any|v4|v6", "any"),
        Key("logstore.store", "any", None),  # an embedded Store handed in (see docs/client.md)
        # -- producer ------------------------------------------------------
        Key("acks", "enum:0|1|-1|all", -1, P),
        Key("linger.ms", "float", 5, P, 0, 900_000),
        Key("batch.size", "int", 1_000_000, P, 1, big),
        Key("batch.num.messages", "int", 10_000, P, 1, 1_000_000),
        Key("buffer.memory", "int", 1 << 30, P, 1, 2**62),
        Key("queue.buffering.max.messages", "int", 100_000, P, 0, big),
        Key("max.block.ms", "int", 60_000, P, 0, big),
        Key("compression.type", "enum:none|gzip|snappy|lz4|zstd", "none", P),
        Key("max.in.flight.requests.per.connection", "int", 5, P, 1, 1_000_000),
        Key("retries", "int", big, P, 0, big),
        Key("delivery.timeout.ms", "int", 120_000, P, 0, big),
        Key("enable.idempotence", "bool", True, P),
        Key("partitioner", "any", "murmur2_random", P),
        Key("message.max.bytes", "int", 1_000_000, P, 1000, 1_000_000_000),
        Key("key.serializer", "callable", None, P),
        Key("value.serializer", "callable", None, P),
        Key("interceptors", "list", (), P),
        Key("on_delivery", "callable", None, P),
        Key("delivery.report.only.error", "bool", False, P),
        Key("transactional.id", "str", None, P),
        Key("transaction.timeout.ms", "int", 60_000, P, 1000, big),
        # -- consumer ------------------------------------------------------
        Key("group.id", "str", None, C),
        Key("group.instance.id", "str", None, C),
        Key("session.timeout.ms", "int", 45_000, C, 1, 3_600_000),
        Key("heartbeat.interval.ms", "int", 3_000, C, 1, 3_600_000),
        Key("max.poll.interval.ms", "int", 300_000, C, 1, 86_400_000),
        Key("enable.auto.commit", "bool", True, C),
        Key("auto.commit.interval.ms", "int", 5_000, C, 0, 86_400_000),
        Key("enable.auto.offset.store", "bool", True, C),
        Key(
            "auto.offset.reset", "enum:earliest|latest|none|smallest|largest|beginning|end|error", "latest", C
        ),
        Key("partition.assignment.strategy", "str", "range,roundrobin", C),
        Key("fetch.min.bytes", "int", 1, C, 1, 100_000_000),
        Key("fetch.max.bytes", "int", 52_428_800, C, 0, big),
        Key("fetch.max.wait.ms", "int", 500, C, 0, 300_000),
        Key("max.partition.fetch.bytes", "int", 1_048_576, C, 1, big),
        Key("check.crcs", "bool", False, C),
        Key("isolation.level", "enum:read_committed|read_uncommitted", "read_uncommitted", C),
        Key("enable.partition.eof", "bool", False, C),
        Key("key.deserializer", "callable", None, C),
        Key("value.deserializer", "callable", None, C),
        Key("on_commit", "callable", None, C),
        Key("client.rack", "str", None, C),
    ]


KEYS: dict[str, Key] = {key.name: key for key in _keys()}

ALIASES = {
    "metadata.broker.list": "bootstrap.servers",
    "queue.buffering.max.ms": "linger.ms",
    "message.timeout.ms": "delivery.timeout.ms",
    "request.required.acks": "acks",
    "compression.codec": "compression.type",
    "message.send.max.retries": "retries",
    "queue.buffering.max.kbytes": "buffer.memory",  # scaled by 1024 in _alias_value
    "max.in.flight": "max.in.flight.requests.per.connection",
    "fetch.wait.max.ms": "fetch.max.wait.ms",
    "max.partition.fetch.bytes": "max.partition.fetch.bytes",
    "fetch.message.max.bytes": "max.partition.fetch.bytes",
    "auto.commit.enable": "enable.auto.commit",
    "sasl.mechanisms": "sasl.mechanism",
    "sasl.user": "sasl.username",
}
_NO_TLS = (
    "logstore's client speaks PLAINTEXT and SASL_PLAINTEXT, not TLS; "
    "for a TLS listener use confluent-kafka (the same API: change the import)"
)
_TRUE = {"true", "1", "yes", "on"}
_FALSE = {"false", "0", "no", "off"}


def _nearest(name: str, role: str) -> str:
    names = [k for k, key in KEYS.items() if role in key.roles]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return f"; see docs/client.md for the {role} keys"


def _coerce(key: Key, value: Any) -> Any:
    kind = key.kind
    name = key.name
    if value is None and (key.default is None or kind in ("any", "callable")):
        return None
    if kind == "any":
        return value
    if kind == "callable":
        if not callable(value):
            raise ConfigError(f"{name} must be callable, not {type(value).__name__}")
        return value
    if kind == "bool":
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ConfigError(f"{name} must be true or false, not {value!r}")
    if kind in ("int", "float"):
        if isinstance(value, bool):
            raise ConfigError(f"{name} must be a number, not {value!r}")
        try:
            number = int(value) if kind == "int" else float(value)
        except (TypeError, ValueError):
            raise ConfigError(
                f"{name} must be {'an integer' if kind == 'int' else 'a number'}, not {value!r}"
            ) from None
        if (key.low is not None and number < key.low) or (key.high is not None and number > key.high):
            raise ConfigError(
                f"{name}={value!r} is out of range [{key.low:g}, {key.high if key.high is not None else 'inf'}]"
            )
        return number
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be a string, not {type(value).__name__}")
        return value
    if kind == "list":
        if isinstance(value, (str, bytes)) or not hasattr(value, "__iter__"):
            raise ConfigError(f"{name} must be a list, not {type(value).__name__}")
        return tuple(value)
    assert kind.startswith("enum:"), kind
    allowed = kind[5:].split("|")
    text = str(value).strip()
    if text not in allowed and text.lower() not in allowed:
        raise ConfigError(f"{name}={value!r} is not one of {', '.join(allowed)}")
    return text if text in allowed else text.lower()


def _normalized(name: str, value: Any) -> Any:
    """Values whose spellings differ mean one thing: acks all is -1, smallest is earliest."""
    if name == "acks":
        return -1 if value in ("all", "-1") else int(value)
    if name == "auto.offset.reset":
        return {"smallest": "earliest", "beginning": "earliest", "largest": "latest", "end": "latest",
                "error": "none"}.get(value, value)  # fmt: skip
    if name == "security.protocol":
        return value.lower()
    return value


def _credentials_from_jaas(values: dict[str, Any]) -> None:
    """``sasl.username``/``sasl.password`` from ``sasl.jaas.config`` where not given themselves, as
    Kafka's Java client (and Spark's Kafka connector, as ``kafka.sasl.jaas.config``) take them:
    ``org.apache.kafka.common.security.scram.ScramLoginModule required username="u" password="p";``."""
    try:
        modules = parse_jaas(values["sasl.jaas.config"])
    except InvalidConfigError as e:
        raise ConfigError(str(e)) from None
    options = next((o for module, _, o in modules if module in _LOGIN_MODULES), None)
    if options is None or "username" not in options or "password" not in options:
        raise ConfigError(
            "sasl.jaas.config: logstore's client takes username and password from a PlainLoginModule "
            "or ScramLoginModule entry"
        )
    values["sasl.username"] = values.get("sasl.username") or options["username"]
    values["sasl.password"] = values.get("sasl.password") or options["password"]


_LOGIN_MODULES = (PLAIN_LOGIN_MODULE, SCRAM_LOGIN_MODULE)


class ClientConfig(Mapping[str, Any]):
    """A checked config: every key of the role, the user's values over the defaults."""

    def __init__(self, values: dict[str, Any], given: frozenset[str]) -> None:
        self._values = values
        self.given = given

    @classmethod
    def parse(cls, config: Mapping[str, Any] | None, role: str, **overrides: Any) -> ClientConfig:
        """Check ``config`` for a client of ``role`` (producer, consumer, admin)."""
        if config is None:
            config = {}
        if not isinstance(config, Mapping):
            raise ConfigError(f"a config must be a dict of Kafka config names, not {type(config).__name__}")
        values = {name: key.default for name, key in KEYS.items() if role in key.roles}
        given: set[str] = set()
        for raw_name, value in {**config, **overrides}.items():
            if not isinstance(raw_name, str):
                raise ConfigError(f"config keys are strings, not {raw_name!r}")
            name = ALIASES.get(raw_name, raw_name)
            if name.startswith(("ssl.", "enable.ssl.")) or (
                name == "security.protocol" and str(value).strip().upper() in ("SSL", "SASL_SSL")
            ):
                raise ConfigError(f"{raw_name}={value!r}: {_NO_TLS}")
            if name.startswith("default.topic.config"):
                continue
            key = KEYS.get(name)
            if key is None or role not in key.roles:
                where = f" (a {'/'.join(sorted(key.roles))} key)" if key is not None else ""
                raise ConfigError(f"unknown {role} config key {raw_name!r}{where}{_nearest(raw_name, role)}")
            if raw_name == "queue.buffering.max.kbytes":
                value = int(value) * 1024
            values[name] = _normalized(name, _coerce(key, value))
            given.add(name)
        if values.get("bootstrap.servers") is None and values.get("logstore.store") is None:
            raise ConfigError(
                "bootstrap.servers is required: 'host:port,...' for brokers, or 'embedded:///path/to/data' "
                "for a Store in this process"
            )
        if values.get("sasl.jaas.config") is not None:
            _credentials_from_jaas(values)
        if values.get("security.protocol") == "sasl_plaintext" and (
            values.get("sasl.username") is None or values.get("sasl.password") is None
        ):
            raise ConfigError("security.protocol=SASL_PLAINTEXT needs sasl.username and sasl.password")
        return cls(values, frozenset(given))

    def __getitem__(self, name: str) -> Any:
        return self._values[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def seconds(self, name: str) -> float:
        """A ``*.ms`` value in seconds."""
        return float(self._values[name]) / 1000.0


Callback = Callable[..., Any]
