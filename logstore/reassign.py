"""``logstore reassign-partitions``: kafka-reassign-partitions' plans and outputs over AdminClient.

A plan is Kafka's JSON: ``{"version": 1, "partitions": [{"topic": "t",
"partition": 0, "replicas": [1, 2], "log_dirs": ["any", "any"]}]}`` (``log_dirs``
optional; only ``any`` is served: one log dir per broker). The actions, as the
Kafka tool has them:

- ``generate``: a plan moving whole topics (``{"topics": [{"topic": "t"}]}``)
  onto a broker list, with Kafka's (rack-aware) assignment, beside the current
  assignment (to keep for a rollback);
- ``execute``: print the current assignment, start the plan
  (AlterPartitionReassignments);
- ``verify``: per partition, completed, still in progress, or not as planned;
- ``cancel``: cancel the plan's reassignments in progress;
- ``list``: every reassignment in progress (ListPartitionReassignments).

Every function returns the lines to print; errors are ConsoleError with what to do.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from logstore.client.admin import AdminClient
from logstore.client.errors import KafkaException
from logstore.client.types import TopicPartition
from logstore.cluster.assignment import assign_replicas
from logstore.console import ConsoleError

Plan = dict[tuple[str, int], list[int]]


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path) as f:
            return json.load(f)
    except OSError as e:
        raise ConsoleError(f"cannot read {what} {path}: {e.strerror}") from None
    except json.JSONDecodeError as e:
        raise ConsoleError(f"{path} is not JSON: {e}") from None


def load_plan(path: str) -> Plan:
    """A reassignment plan file -> {(topic, partition): replicas}; ConsoleError naming what is wrong."""
    data = _read_json(path, "the reassignment plan")
    entries = data.get("partitions") if isinstance(data, dict) else None
    if not isinstance(entries, list) or not entries:
        raise ConsoleError(
            f'{path}: expected {{"version": 1, "partitions": [{{"topic", "partition", "replicas"}}]}}'
        )
    plan: Plan = {}
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise ConsoleError(f"{path}: partitions[{i}] is not an object")
        topic, partition, replicas = entry.get("topic"), entry.get("partition"), entry.get("replicas")
        if not isinstance(topic, str) or not topic:
            raise ConsoleError(f"{path}: partitions[{i}] has no topic")
        if not isinstance(partition, int) or partition < 0:
            raise ConsoleError(f"{path}: partitions[{i}] ({topic}) has no partition number")
        if not isinstance(replicas, list) or not replicas or not all(isinstance(b, int) for b in replicas):
            raise ConsoleError(
                f"{path}: {topic}-{partition} needs a non-empty list of broker ids in replicas"
            )
        if len(set(replicas)) != len(replicas):
            raise ConsoleError(f"{path}: {topic}-{partition} names a broker twice in {replicas}")
        dirs = entry.get("log_dirs")
        if dirs is not None and (not isinstance(dirs, list) or len(dirs) != len(replicas)):
            raise ConsoleError(f"{path}: {topic}-{partition}: log_dirs must have one entry per replica")
        if dirs is not None and any(d != "any" for d in dirs):
            raise ConsoleError(
                f'{path}: {topic}-{partition}: only log dir "any" is supported (one per broker)'
            )
        if (topic, partition) in plan:
            raise ConsoleError(f"{path}: {topic}-{partition} appears twice")
        plan[(topic, partition)] = list(replicas)
    return plan


def plan_json(plan: Mapping[tuple[str, int], list[int]]) -> str:
    return _json({"version": 1, "partitions": [
        {"topic": t, "partition": p, "replicas": r, "log_dirs": ["any"] * len(r)}
        for (t, p), r in sorted(plan.items())
    ]})  # fmt: skip


def _current(admin: AdminClient, topics: set[str], timeout: float) -> Plan:
    metadata = admin.list_topics(timeout=timeout)
    current: Plan = {}
    for name in sorted(topics):
        topic = metadata.topics.get(name)
        if topic is None or topic.error is not None:
            raise ConsoleError(f"topic {name!r} does not exist (logstore topics list shows the topics)")
        for p, info in topic.partitions.items():
            current[(name, p)] = list(info.replicas)
    return current


def _names(keys: Any) -> str:
    return ",".join(f"{t}-{p}" for t, p in sorted(keys))


def _settle(futures: Mapping[TopicPartition, Any], timeout: float) -> list[str]:
    failures = []
    for tp, future in sorted(futures.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        try:
            future.result(timeout)
        except KafkaException as e:
            failures.append(f"{tp.topic}-{tp.partition}: {e.args[0].str() if e.args else e}")
    return failures


def execute(admin: AdminClient, plan: Plan, timeout: float) -> list[str]:
    current = _current(admin, {t for t, _ in plan}, timeout)
    for key in plan:
        if key not in current:
            raise ConsoleError(f"{key[0]} has no partition {key[1]}")
    before = {key: current[key] for key in plan}
    lines = ["Current partition replica assignment", "", plan_json(before), "",
             "Save this to use as the --reassignment-json-file option during rollback"]  # fmt: skip
    futures = admin.alter_partition_reassignments(
        {TopicPartition(t, p): replicas for (t, p), replicas in plan.items()}, request_timeout=timeout
    )
    failures = _settle(futures, timeout)
    if failures:
        raise ConsoleError("the reassignment was refused:\n  " + "\n  ".join(failures))
    lines.append(f"Successfully started partition reassignments for {_names(plan)}")
    return lines


def verify(admin: AdminClient, plan: Plan, timeout: float) -> tuple[list[str], bool]:
    """(the lines, whether every partition is done as planned)."""
    ongoing = admin.list_partition_reassignments(request_timeout=timeout).result(timeout)
    moving = {(tp.topic, tp.partition) for tp in ongoing}
    current = _current(admin, {t for t, _ in plan}, timeout)
    lines, done = ["Status of partition reassignment:"], True
    for (topic, p), target in sorted(plan.items()):
        if (topic, p) in moving:
            lines.append(f"Reassignment of partition {topic}-{p} is still in progress.")
            done = False
        elif current.get((topic, p)) == target:
            lines.append(f"Reassignment of partition {topic}-{p} is completed.")
        else:
            lines.append(f"There is no active reassignment of partition {topic}-{p}, but replica set is "
                         f"{current.get((topic, p))} rather than {target}.")  # fmt: skip
            done = False
    return lines, done


def cancel(admin: AdminClient, plan: Plan, timeout: float) -> list[str]:
    ongoing = admin.list_partition_reassignments(request_timeout=timeout).result(timeout)
    moving = {(tp.topic, tp.partition) for tp in ongoing}
    doomed = sorted(key for key in plan if key in moving)
    lines = []
    if doomed:
        futures = admin.alter_partition_reassignments(
            {TopicPartition(t, p): None for t, p in doomed}, request_timeout=timeout
        )
        failures = _settle(futures, timeout)
        if failures:
            raise ConsoleError("cancelling failed:\n  " + "\n  ".join(failures))
        lines.append(f"Successfully cancelled partition reassignments for: {_names(doomed)}")
    else:
        lines.append("None of the specified partition reassignments are active.")
    return lines


def list_ongoing(admin: AdminClient, timeout: float) -> list[str]:
    ongoing = admin.list_partition_reassignments(request_timeout=timeout).result(timeout)
    if not ongoing:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for tp, r in sorted(ongoing.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        lines.append(f"{tp.topic}-{tp.partition}: replicas: {','.join(map(str, r.replicas))}. "
                     f"adding: {','.join(map(str, r.adding_replicas))}. "
                     f"removing: {','.join(map(str, r.removing_replicas))}.")  # fmt: skip
    return lines


def generate(
    admin: AdminClient, topics_file: str, brokers: list[int], timeout: float, rack_aware: bool
) -> list[str]:
    data = _read_json(topics_file, "the topics to move")
    entries = data.get("topics") if isinstance(data, dict) else None
    if (
        not isinstance(entries, list)
        or not entries
        or not all(isinstance(e, dict) and e.get("topic") for e in entries)
    ):
        raise ConsoleError(f'{topics_file}: expected {{"version": 1, "topics": [{{"topic": "name"}}]}}')
    names = {str(e["topic"]) for e in entries}
    metadata = admin.list_topics(timeout=timeout)
    racks = {b.id: None for b in metadata.brokers.values()}
    unknown = [b for b in brokers if b not in racks]
    if unknown:
        raise ConsoleError(
            f"--broker-list names brokers not in the cluster: {unknown} (live: {sorted(racks)})"
        )
    current = _current(admin, names, timeout)
    proposed: Plan = {}
    for name in sorted(names):
        count = sum(1 for t, _ in current if t == name)
        factor = len(current[(name, 0)])
        if factor > len(brokers):
            raise ConsoleError(
                f"{name} has {factor} replicas per partition; --broker-list names {len(brokers)} brokers"
            )
        made = assign_replicas(sorted(brokers), count, factor, rack_aware=rack_aware)
        proposed.update({(name, p): list(r) for p, r in made.items()})
    return ["Current partition replica assignment", plan_json(current), "",
            "Proposed partition reassignment configuration", plan_json(proposed)]  # fmt: skip
