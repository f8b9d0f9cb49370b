"""What ``logstore groups`` does: Kafka's ``kafka-consumer-groups`` against any Kafka-protocol broker.

It talks to the broker through an ``AdminClient``, logstore's or confluent-kafka's (``--client``; imported
only when a command runs): ListGroups, DescribeGroups, OffsetFetch,
OffsetCommit (to reset), DeleteGroups, and ListOffsets for log-start,
log-end and by-time offsets. Tables are printed as Kafka prints them
(left-aligned columns, "-" where there is no value).

``describe`` lists, per group, one row per partition that a member is
assigned or that has a committed offset, and one row per member with no
partitions: GROUP TOPIC PARTITION CURRENT-OFFSET LOG-END-OFFSET LAG
CONSUMER-ID HOST CLIENT-ID. LAG is LOG-END-OFFSET minus CURRENT-OFFSET.

``reset-offsets`` plans new committed offsets for a group that has no
active members (Empty, or unknown to the broker), prints GROUP TOPIC
PARTITION NEW-OFFSET, and commits them only with ``execute`` (a dry run
otherwise, as Kafka). An offset past the log end or before the log start
is moved to it, with a warning (Kafka's rule).

>>> parse_topic_spec("t:0,2")
('t', [0, 2])
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from logstore.cli._clients import admin_module, kafka_reason, selected_module, stderr_line, unreachable
from logstore.errors import LogstoreError

DESCRIBE_HEADER = [
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
]
RESET_HEADER = ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"]
STATES = ["Stable", "Empty", "PreparingRebalance", "CompletingRebalance", "Dead"]
_INACTIVE = {"Empty", "Dead", "Unknown"}

Printer = Callable[[str], None]


class GroupsError(LogstoreError):
    """A groups command cannot go on; the message says what to do."""


def confluent_kafka() -> ModuleType:
    return selected_module("logstore groups", GroupsError)


def _code(exc: BaseException) -> int | None:
    first: Any = exc.args[0] if exc.args else None
    return int(first.code()) if hasattr(first, "code") else None


def parse_topic_spec(spec: str) -> tuple[str, list[int] | None]:
    """``topic`` or ``topic:0,1,2`` (Kafka's --topic syntax for reset-offsets)."""
    name, sep, partitions = spec.partition(":")
    if not name:
        raise GroupsError(f"--topic {spec!r}: give a topic name, optionally with partitions (t or t:0,1)")
    if not sep:
        return name, None
    try:
        return name, sorted({int(p) for p in partitions.split(",") if p.strip()})
    except ValueError:
        raise GroupsError(f"--topic {spec!r}: partitions must be numbers, e.g. {name}:0,1") from None


def parse_datetime(text: str) -> int:
    """An ISO-8601 time (Kafka's YYYY-MM-DDTHH:mm:SS.sss, zone optional: local) as epoch ms."""
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise GroupsError(
            f"--to-datetime {text!r} is not ISO-8601; use e.g. 2024-05-01T12:00:00.000 "
            "(local time) or 2024-05-01T12:00:00Z"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's tool
    return int(moment.timestamp() * 1000)


@dataclass
class OffsetRow:
    """One line of ``describe``."""

    group: str
    topic: str | None
    partition: int | None
    current: int | None
    log_end: int | None
    consumer_id: str | None
    host: str | None
    client_id: str | None

    @property
    def lag(self) -> int | None:
        if self.current is None or self.log_end is None or self.current < 0:
            return None
        return max(self.log_end - self.current, 0)

    def cells(self) -> list[Any]:
        current = self.current if self.current is not None and self.current >= 0 else None
        return [
            self.group,
            self.topic,
            self.partition,
            current,
            self.log_end,
            self.lag,
            self.consumer_id,
            self.host,
            self.client_id,
        ]


@dataclass
class GroupInfo:
    group: str
    state: str
    exists: bool
    rows: list[OffsetRow]


class Groups:
    """An AdminClient on one broker, with the calls the commands need (each bounded by ``timeout``)."""

    def __init__(self, bootstrap: str, timeout: float = 15.0) -> None:
        self.kafka = confluent_kafka()
        AdminClient = admin_module(self.kafka).AdminClient

        self.bootstrap = bootstrap
        self.timeout = timeout
        try:
            # log_level 2: no librdkafka lines for refused connections; errors come back as messages.
            self.admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        except (self.kafka.KafkaException, ValueError, TypeError) as e:
            raise GroupsError(
                f"bad --bootstrap-server {bootstrap!r} ({kafka_reason(e)}); use HOST:PORT"
            ) from None
        self._topics: dict[str, int] = {}

    # -- plumbing -------------------------------------------------------------

    def _unreachable(self, error: object) -> GroupsError:
        return GroupsError(unreachable(self.bootstrap, self.timeout, error))

    def _result(self, future: Any, what: str) -> Any:
        try:
            return future.result(self.timeout + 5)
        except self.kafka.KafkaException as e:
            if _code(e) in (self.kafka.KafkaError._TIMED_OUT, self.kafka.KafkaError._TRANSPORT):
                raise self._unreachable(kafka_reason(e)) from None
            raise GroupsError(f"{what} failed: {kafka_reason(e)}") from None
        except TimeoutError:
            raise self._unreachable("no answer") from None

    def partitions(self, topic: str) -> int:
        if topic not in self._topics:
            try:
                metadata = self.admin.list_topics(topic, timeout=self.timeout)
            except self.kafka.KafkaException as e:
                raise self._unreachable(kafka_reason(e)) from None
            entry = metadata.topics.get(topic)
            if entry is None or entry.error is not None or not entry.partitions:
                raise GroupsError(
                    f"topic {topic!r} does not exist on {self.bootstrap}; check the name "
                    "(the broker's topics: logstore groups list shows groups, not topics)"
                )
            self._topics[topic] = len(entry.partitions)
        return self._topics[topic]

    def offsets(self, partitions: Iterable[tuple[str, int]], spec: Any) -> dict[tuple[str, int], int]:
        """ListOffsets for each partition: ``spec`` is an OffsetSpec (earliest, latest, for_timestamp)."""
        wanted = list(dict.fromkeys(partitions))
        if not wanted:
            return {}
        request = {self.kafka.TopicPartition(t, p): spec for t, p in wanted}
        try:
            futures = self.admin.list_offsets(request, request_timeout=self.timeout)
        except self.kafka.KafkaException as e:
            raise GroupsError(f"ListOffsets failed: {kafka_reason(e)}") from None
        return {
            (tp.topic, tp.partition): int(
                self._result(future, f"ListOffsets of {tp.topic}-{tp.partition}").offset
            )
            for tp, future in futures.items()
        }

    # -- commands -----------------------------------------------------------------

    def list_groups(self, states: Sequence[str] = ()) -> list[tuple[str, str]]:
        """(group, state) of every group, or of those in ``states``."""
        kwargs: dict[str, Any] = {"request_timeout": self.timeout}
        if states:
            kwargs["states"] = {self._state_enum(state) for state in states}
        result = self._result(self.admin.list_consumer_groups(**kwargs), "ListGroups")
        if result.errors:
            raise GroupsError(f"ListGroups failed: {'; '.join(kafka_reason(e) for e in result.errors)}")
        return sorted((g.group_id, _state_name(g.state)) for g in result.valid)

    def _state_enum(self, name: str) -> Any:
        for state in self.kafka.ConsumerGroupState:
            if _state_name(state).lower() == name.lower():
                return state
        raise GroupsError(f"--state {name!r} is not a group state; use one of {', '.join(STATES)}")

    def describe_group(self, group: str) -> tuple[str, bool, list[Any]]:
        """(state, exists, members) of one group."""
        future = self.admin.describe_consumer_groups([group], request_timeout=self.timeout)[group]
        try:
            description = future.result(self.timeout + 5)
        except self.kafka.KafkaException as e:
            if _code(e) == self.kafka.KafkaError.GROUP_ID_NOT_FOUND:
                return "Dead", False, []
            if _code(e) in (self.kafka.KafkaError._TIMED_OUT, self.kafka.KafkaError._TRANSPORT):
                raise self._unreachable(kafka_reason(e)) from None
            raise GroupsError(f"DescribeGroups of {group!r} failed: {kafka_reason(e)}") from None
        state = _state_name(description.state)
        return state, state != "Dead", list(description.members)

    def committed(self, group: str) -> dict[tuple[str, int], int]:
        request = [self.kafka.ConsumerGroupTopicPartitions(group)]
        futures = self.admin.list_consumer_group_offsets(request, request_timeout=self.timeout)
        result = self._result(futures[group], f"OffsetFetch of group {group!r}")
        return {
            (tp.topic, tp.partition): int(tp.offset)
            for tp in result.topic_partitions or ()
            if tp.offset is not None and tp.offset >= 0
        }

    def describe(self, group: str) -> GroupInfo:
        state, exists, members = self.describe_group(group)
        committed = self.committed(group)
        if not members and not committed and not exists:
            return GroupInfo(group, state, False, [])
        assigned: dict[tuple[str, int], Any] = {}
        idle = []
        for member in members:
            partitions = member.assignment.topic_partitions if member.assignment else []
            for tp in partitions:
                assigned[(tp.topic, tp.partition)] = member
            if not partitions:
                idle.append(member)
        keys = sorted(set(assigned) | set(committed))
        log_end = self.offsets(keys, _offset_spec().latest())
        rows = []
        for key in keys:
            member = assigned.get(key)
            rows.append(
                OffsetRow(
                    group,
                    key[0],
                    key[1],
                    committed.get(key),
                    log_end.get(key),
                    member.member_id if member else None,
                    member.host if member else None,
                    member.client_id if member else None,
                )
            )
        for member in sorted(idle, key=lambda m: m.member_id):
            rows.append(
                OffsetRow(group, None, None, None, None, member.member_id, member.host, member.client_id)
            )
        return GroupInfo(group, state, True, rows)

    def plan_reset(
        self,
        group: str,
        topics: Sequence[tuple[str, list[int] | None]],
        all_topics: bool,
        to: str,
        value: int | None,
        warn: Printer = stderr_line,
    ) -> list[tuple[str, int, int]]:
        """[(topic, partition, new offset)] for a group with no active members."""
        state, _, members = self.describe_group(group)
        if state not in _INACTIVE or members:
            raise GroupsError(
                f"assignments can only be reset if the group {group!r} is inactive, but the current state "
                f"is {state}; stop its consumers (and wait for their session timeout) and retry"
            )
        partitions: list[tuple[str, int]] = []
        if all_topics:
            partitions = sorted(self.committed(group))
            if not partitions:
                raise GroupsError(f"group {group!r} has no committed offsets; name the topics with --topic")
        for name, chosen in topics:
            count = self.partitions(name)
            for partition in chosen if chosen is not None else range(count):
                if not 0 <= partition < count:
                    raise GroupsError(f"topic {name!r} has partitions 0-{count - 1}, not {partition}")
                partitions.append((name, partition))
        partitions = list(dict.fromkeys(partitions))
        specs = _offset_spec()
        if to == "earliest":
            new = self.offsets(partitions, specs.earliest())
        elif to == "latest":
            new = self.offsets(partitions, specs.latest())
        elif to == "datetime":
            assert value is not None
            found = self.offsets(partitions, specs.for_timestamp(value))
            latest = self.offsets([p for p in partitions if found[p] < 0], specs.latest())
            new = {p: latest[p] if found[p] < 0 else found[p] for p in partitions}
        else:  # offset
            assert value is not None
            earliest = self.offsets(partitions, specs.earliest())
            latest = self.offsets(partitions, specs.latest())
            new = {}
            for p in partitions:
                offset = value
                if offset > latest[p]:
                    warn(
                        f"New offset ({offset}) is higher than latest offset for topic partition "
                        f"{p[0]}-{p[1]}. Value will be set to {latest[p]}"
                    )
                    offset = latest[p]
                elif offset < earliest[p]:
                    warn(
                        f"New offset ({offset}) is lower than earliest offset for topic partition "
                        f"{p[0]}-{p[1]}. Value will be set to {earliest[p]}"
                    )
                    offset = earliest[p]
                new[p] = offset
        return [(t, p, new[(t, p)]) for t, p in partitions]

    def execute_reset(self, group: str, plan: Sequence[tuple[str, int, int]]) -> None:
        tps = [self.kafka.TopicPartition(t, p, offset) for t, p, offset in plan]
        request = [self.kafka.ConsumerGroupTopicPartitions(group, tps)]
        futures = self.admin.alter_consumer_group_offsets(request, request_timeout=self.timeout)
        result = self._result(futures[group], f"committing the new offsets of group {group!r}")
        failed = [tp for tp in result.topic_partitions or () if tp.error is not None]
        if failed:
            reasons = ", ".join(f"{tp.topic}-{tp.partition}: {tp.error.str()}" for tp in failed)
            raise GroupsError(
                f"the broker refused some offsets of group {group!r} ({reasons}); "
                "make sure no consumer of the group is running and retry"
            )

    def delete(self, groups: Sequence[str]) -> dict[str, str | None]:
        """group -> None (deleted) or the reason it was not."""
        futures = self.admin.delete_consumer_groups(list(groups), request_timeout=self.timeout)
        outcome: dict[str, str | None] = {}
        for group in groups:
            try:
                futures[group].result(self.timeout + 5)
                outcome[group] = None
            except self.kafka.KafkaException as e:
                code = _code(e)
                if code in (self.kafka.KafkaError._TIMED_OUT, self.kafka.KafkaError._TRANSPORT):
                    raise self._unreachable(kafka_reason(e)) from None
                reason = kafka_reason(e)
                if code == self.kafka.KafkaError.NON_EMPTY_GROUP:
                    reason += " (the group has active members: stop its consumers first)"
                elif code == self.kafka.KafkaError.GROUP_ID_NOT_FOUND:
                    reason += " (no such group: logstore groups list shows the groups)"
                outcome[group] = reason
        return outcome


def _offset_spec() -> Any:
    return admin_module(confluent_kafka()).OffsetSpec


def _state_name(state: Any) -> str:
    """Kafka's name of a ConsumerGroupState ("PreparingRebalance", ...)."""
    names = {
        "STABLE": "Stable",
        "EMPTY": "Empty",
        "DEAD": "Dead",
        "PREPARING_REBALANCING": "PreparingRebalance",
        "COMPLETING_REBALANCING": "CompletingRebalance",
        "UNKNOWN": "Unknown",
    }
    return names.get(getattr(state, "name", str(state)), str(state))
