"""The options of the ``logstore`` Spark data source, checked before any job runs.

Spark's Kafka connector is the contract: the same names, defaults and
rules (``subscribe`` / ``subscribePattern`` / ``assign``, exactly one;
``startingOffsets`` ``earliest``/``latest``/JSON; ``kafka.*`` passed to the
client), plus ``path``: a logstore data directory read from its segment
files, with no broker. Spark hands options over with lower-cased names;
they are matched here without regard to case and reported in Kafka's
spelling.

Offsets JSON is Kafka's: ``{"topicA": {"0": 23, "1": -2}}`` with -2 meaning
earliest and -1 latest; timestamps JSON is the same shape with
milliseconds. A problem raises :class:`OptionError` (a ``ValueError``)
whose message names the option, what was given and what is accepted.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

EARLIEST = -2
LATEST = -1

# Every option the reader accepts (Kafka's spelling), by lower-cased name.
READ_OPTIONS = {
    name.lower(): name
    for name in (
        "path", "subscribe", "subscribePattern", "assign", "startingOffsets", "endingOffsets",
        "startingTimestamp", "startingOffsetsByTimestamp", "endingTimestamp",
        "endingOffsetsByTimestamp", "startingOffsetsByTimestampStrategy", "maxOffsetsPerTrigger",
        "minPartitions", "failOnDataLoss", "includeHeaders", "maxRecordsPerPartition",
    )
}  # fmt: skip
# Every option the writer accepts; Spark adds checkpointLocation to streaming writes.
WRITE_OPTIONS = {
    name.lower(): name
    for name in ("path", "topic", "includeHeaders", "checkpointLocation", "sinkId", "batchBytes")
}
# kafka.* settings that have no meaning here (Spark's Kafka source refuses the same ones).
REFUSED_CLIENT_KEYS = {
    "group.id": "the source tracks offsets in Spark's checkpoint, not in a consumer group",
    "auto.offset.reset": "use startingOffsets (earliest, latest or offsets JSON)",
    "enable.auto.commit": "the source never commits offsets to Kafka",
    "key.deserializer": "keys are always binary; cast them in the query",
    "value.deserializer": "values are always binary; cast them in the query",
    "key.serializer": "write keys as binary or string columns",
    "value.serializer": "write values as binary or string columns",
}


class OptionError(ValueError):
    """A ``logstore`` data source option is unknown, missing, clashing or malformed."""


@dataclass(frozen=True)
class Subscription:
    """What to read: a topic list, a regex over topic names, or fixed partitions."""

    topics: tuple[str, ...] = ()
    pattern: re.Pattern[str] | None = None
    assigned: tuple[tuple[str, int], ...] = ()

    def matches(self, topic: str) -> bool:
        """Whether ``topic`` is read (assign: whether any of its partitions is)."""
        if self.pattern is not None:
            return self.pattern.fullmatch(topic) is not None
        if self.assigned:
            return any(t == topic for t, _ in self.assigned)
        return topic in self.topics


@dataclass(frozen=True)
class SourceOptions:
    """The reader's options, parsed and checked. Offsets maps: topic -> partition -> offset."""

    subscription: Subscription
    path: str | None
    client: dict[str, str]
    starting: str | dict[str, dict[int, int]]
    ending: str | dict[str, dict[int, int]]
    starting_timestamp: int | None = None
    starting_by_timestamp: dict[str, dict[int, int]] | None = None
    ending_timestamp: int | None = None
    ending_by_timestamp: dict[str, dict[int, int]] | None = None
    timestamp_strategy: str = "error"
    max_offsets_per_trigger: int | None = None
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    include_headers: bool = False
    max_records_per_partition: int | None = None
    streaming: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class SinkOptions:
    """The writer's options, parsed and checked."""

    path: str | None
    client: dict[str, str]
    topic: str | None
    checkpoint: str | None
    sink_id: str | None
    batch_bytes: int


def _split(
    options: Mapping[str, str], known: Mapping[str, str], role: str
) -> tuple[dict[str, str], dict[str, str]]:
    """(own options by Kafka's spelling, client settings without ``kafka.``); unknown names raise."""
    own: dict[str, str] = {}
    client: dict[str, str] = {}
    for raw, value in options.items():
        name = raw.lower()
        if name.startswith("kafka."):
            key = raw[len("kafka.") :].lower()
            if key in REFUSED_CLIENT_KEYS:
                raise OptionError(f"option kafka.{key} is not supported: {REFUSED_CLIENT_KEYS[key]}")
            client[key] = str(value)
        elif name in known:
            own[known[name]] = str(value)
        else:
            raise OptionError(_unknown(raw, known, role))
    return own, client


def _unknown(raw: str, known: Mapping[str, str], role: str) -> str:
    import difflib

    near = difflib.get_close_matches(raw.lower(), list(known), n=1, cutoff=0.6)
    hint = f"; did you mean {known[near[0]]}?" if near else ""
    names = ", ".join(sorted(known.values()))
    return (f"unknown option {raw!r} for the logstore {role}{hint} Options: {names}, "
            f"and kafka.* for logstore's client (kafka.bootstrap.servers, ...)")  # fmt: skip


def _where(own: Mapping[str, str], client: Mapping[str, str]) -> str | None:
    """The data directory, after checking that exactly one of path / kafka.bootstrap.servers is set."""
    path = own.get("path")
    servers = client.get("bootstrap.servers")
    if path and servers:
        raise OptionError("set either path (a logstore data directory) or kafka.bootstrap.servers, not both")
    if not path and not servers:
        raise OptionError(
            "no data to reach: set kafka.bootstrap.servers (a broker, e.g. 127.0.0.1:9092) "
            "or path (a logstore data directory)"
        )
    if path and path.startswith("embedded://"):
        path = path[len("embedded://") :]
    return path or None


def _bool(own: Mapping[str, str], name: str, default: bool) -> bool:
    value = own.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered not in ("true", "false"):
        raise OptionError(f"option {name} must be true or false, not {value!r}")
    return lowered == "true"


def _number(own: Mapping[str, str], name: str, least: int, what: str) -> int | None:
    """The whole number ``name`` (at least ``least``), or None when not given."""
    value = own.get(name)
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise OptionError(f"option {name} must be {what}, not {value!r}") from None
    if number < least:
        raise OptionError(f"option {name} must be >= {least}, not {number}")
    return number


def _positive(own: Mapping[str, str], name: str) -> int | None:
    return _number(own, name, 1, "a positive whole number")


def _json_object(name: str, text: str, example: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise OptionError(f"option {name} is not valid JSON ({e.msg} at character {e.pos}): {text!r}; "
                          f"expected e.g. {example}") from None  # fmt: skip
    if not isinstance(value, dict):
        raise OptionError(f"option {name} must be a JSON object such as {example}, not {text!r}")
    return value


def parse_partition_offsets(name: str, text: str) -> dict[str, dict[int, int]]:
    """Kafka's ``{"topic": {"0": 23, "1": -2}}`` as topic -> partition -> number."""
    example = '{"topicA": {"0": 23, "1": -2}}'
    result: dict[str, dict[int, int]] = {}
    for topic, parts in _json_object(name, text, example).items():
        if not isinstance(parts, dict) or not parts:
            raise OptionError(f"option {name}: topic {topic!r} needs an object of partition to offset, "
                              f"e.g. {example}")  # fmt: skip
        offsets: dict[int, int] = {}
        for partition, offset in parts.items():
            if not str(partition).lstrip("-").isdigit() or int(partition) < 0:
                raise OptionError(f"option {name}: partition {partition!r} of topic {topic!r} is not a "
                                  f"partition number")  # fmt: skip
            if isinstance(offset, bool) or not isinstance(offset, int):
                raise OptionError(f"option {name}: {topic}[{partition}] = {offset!r} is not a whole number")
            offsets[int(partition)] = offset
        result[str(topic)] = offsets
    return result


def format_offsets(offsets: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    """topic -> partition -> offset as Kafka's JSON object (partition numbers as strings)."""
    return {t: {str(p): int(o) for p, o in sorted(parts.items())} for t, parts in sorted(offsets.items())}


def read_offsets(value: Mapping[str, Any]) -> dict[str, dict[int, int]]:
    """The inverse of :func:`format_offsets` (a checkpointed offset from Spark)."""
    return {str(t): {int(p): int(o) for p, o in parts.items()} for t, parts in value.items()}


def _subscription(own: Mapping[str, str]) -> Subscription:
    given = [name for name in ("subscribe", "subscribePattern", "assign") if own.get(name)]
    if len(given) != 1:
        said = " and ".join(given) if given else "none"
        raise OptionError(f"set exactly one of subscribe, subscribePattern or assign (got {said})")
    name = given[0]
    text = own[name]
    if name == "subscribe":
        topics = tuple(t.strip() for t in text.split(",") if t.strip())
        if not topics:
            raise OptionError(f"option subscribe lists no topic: {text!r}; give e.g. events,orders")
        return Subscription(topics=topics)
    if name == "subscribePattern":
        try:
            return Subscription(pattern=re.compile(text))
        except re.error as e:
            raise OptionError(
                f"option subscribePattern is not a valid regular expression ({e}): {text!r}"
            ) from None
    example = '{"topicA": [0, 1], "topicB": [2]}'
    assigned: list[tuple[str, int]] = []
    for topic, parts in _json_object("assign", text, example).items():
        if not isinstance(parts, list) or not all(isinstance(p, int) and not isinstance(p, bool) and p >= 0
                                                  for p in parts):  # fmt: skip
            raise OptionError(
                f"option assign: topic {topic!r} needs a list of partition numbers, e.g. {example}"
            )
        assigned += [(str(topic), p) for p in parts]
    if not assigned:
        raise OptionError(f"option assign names no partition: {text!r}; e.g. {example}")
    return Subscription(assigned=tuple(sorted(set(assigned))))


def _offsets_option(own: Mapping[str, str], name: str, default: str, *, streaming: bool
                    ) -> str | dict[str, dict[int, int]]:  # fmt: skip
    text = own.get(name, default).strip()
    starting = name == "startingOffsets"
    if text.lower() in ("earliest", "latest"):
        word = text.lower()
        if not starting and word == "earliest":
            raise OptionError("endingOffsets cannot be earliest; use latest or offsets JSON")
        if starting and word == "latest" and not streaming:
            raise OptionError("startingOffsets=latest is not allowed in a batch query (it would read nothing); "
                              "use earliest or offsets JSON")  # fmt: skip
        return word
    offsets = parse_partition_offsets(name, text)
    for topic, parts in offsets.items():
        for partition, offset in parts.items():
            if offset < EARLIEST:
                raise OptionError(f"option {name}: {topic}[{partition}] = {offset} is not an offset "
                                  f"(-2 earliest, -1 latest, or >= 0)")  # fmt: skip
            if not starting and offset == EARLIEST:
                raise OptionError(
                    f"option endingOffsets: {topic}[{partition}] = -2 (earliest) is not allowed"
                )
            if starting and offset == LATEST and not streaming:
                raise OptionError(f"option startingOffsets: {topic}[{partition}] = -1 (latest) is not allowed "
                                  f"in a batch query")  # fmt: skip
    return offsets


def _timestamp(own: Mapping[str, str], name: str) -> int | None:
    return _number(own, name, 0, "milliseconds since the epoch")


def _check_assigned(sub: Subscription, name: str, offsets: object) -> None:
    """Offsets JSON may only name partitions that ``assign`` reads (Spark's rule)."""
    if not sub.assigned or not isinstance(offsets, dict):
        return
    wanted = set(sub.assigned)
    for topic, parts in offsets.items():
        for partition in parts:
            if (topic, partition) not in wanted:
                raise OptionError(f"option {name} names {topic}[{partition}], which assign does not read")


def parse_source_options(options: Mapping[str, str], *, streaming: bool | None) -> SourceOptions:
    """The reader's options, checked: raises :class:`OptionError` on the first problem.

    ``streaming=None``: the checks that hold for batch and streaming alike
    (Spark asks for the schema before it says which query it plans).
    """
    if streaming is None:
        try:
            return parse_source_options(options, streaming=False)
        except OptionError as batch_error:
            try:
                return parse_source_options(options, streaming=True)
            except OptionError:
                raise batch_error from None
    own, client = _split(options, READ_OPTIONS, "streaming source" if streaming else "source")
    path = _where(own, client)
    sub = _subscription(own)
    starting = _offsets_option(
        own, "startingOffsets", "latest" if streaming else "earliest", streaming=streaming
    )
    if streaming and "endingOffsets" in own:
        raise OptionError("endingOffsets is for batch queries; a streaming query reads on as data arrives")
    if streaming and ("endingTimestamp" in own or "endingOffsetsByTimestamp" in own):
        raise OptionError("endingTimestamp / endingOffsetsByTimestamp are for batch queries")
    if not streaming and "maxOffsetsPerTrigger" in own:
        raise OptionError("maxOffsetsPerTrigger is for streaming queries (readStream)")
    ending = "latest" if streaming else _offsets_option(own, "endingOffsets", "latest", streaming=False)
    by_time = own.get("startingOffsetsByTimestamp")
    end_by_time = own.get("endingOffsetsByTimestamp")
    strategy = own.get("startingOffsetsByTimestampStrategy", "error").lower()
    if strategy not in ("error", "latest"):
        raise OptionError(
            f"option startingOffsetsByTimestampStrategy must be error or latest, not {strategy!r}"
        )
    parsed = SourceOptions(
        subscription=sub,
        path=path,
        client=client,
        starting=starting,
        ending=ending,
        starting_timestamp=_timestamp(own, "startingTimestamp"),
        starting_by_timestamp=None if by_time is None else parse_partition_offsets("startingOffsetsByTimestamp", by_time),
        ending_timestamp=_timestamp(own, "endingTimestamp"),
        ending_by_timestamp=None if end_by_time is None else parse_partition_offsets("endingOffsetsByTimestamp", end_by_time),
        timestamp_strategy=strategy,
        max_offsets_per_trigger=_positive(own, "maxOffsetsPerTrigger"),
        min_partitions=_positive(own, "minPartitions"),
        fail_on_data_loss=_bool(own, "failOnDataLoss", True),
        include_headers=_bool(own, "includeHeaders", False),
        max_records_per_partition=_positive(own, "maxRecordsPerPartition"),
        streaming=streaming,
    )  # fmt: skip
    for name, value in (("startingOffsets", parsed.starting), ("endingOffsets", parsed.ending),
                        ("startingOffsetsByTimestamp", parsed.starting_by_timestamp),
                        ("endingOffsetsByTimestamp", parsed.ending_by_timestamp)):  # fmt: skip
        _check_assigned(sub, name, value)
    return parsed


def parse_sink_options(options: Mapping[str, str], *, streaming: bool) -> SinkOptions:
    """The writer's options, checked: raises :class:`OptionError` on the first problem."""
    own, client = _split(options, WRITE_OPTIONS, "streaming sink" if streaming else "sink")
    path = _where(own, client)
    topic = own.get("topic")
    if topic is not None and not topic.strip():
        raise OptionError("option topic is empty; name the topic to write to, or give a topic column")
    batch_bytes = _positive(own, "batchBytes") or (1 << 20)
    return SinkOptions(
        path=path,
        client=client,
        topic=topic,
        checkpoint=own.get("checkpointLocation"),
        sink_id=own.get("sinkId"),
        batch_bytes=batch_bytes,
    )
