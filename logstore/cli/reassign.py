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
They drive logstore's own AdminClient, imported when the command runs (it takes
~0.3 s to import, which ``logstore --help`` need not wait for).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import click

from logstore.cli._clients import ConsoleError
from logstore.cli._options import (
    BOOTSTRAP_OPTION,
    TIMEOUT_OPTION,
    click_errors,
    command_config_option,
    props_option_value,
)
from logstore.cluster.assignment import assign_replicas

if TYPE_CHECKING:
    from logstore.client.admin import AdminClient

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


def _alter(admin: AdminClient, moves: Mapping[tuple[str, int], list[int] | None], timeout: float) -> list[str]:
    """AlterPartitionReassignments (None cancels a partition's); the failures, one line each."""
    # deferred with the AdminClient (see the module's docstring)
    from logstore.client.errors import KafkaException
    from logstore.client.types import TopicPartition

    futures = admin.alter_partition_reassignments(
        {TopicPartition(t, p): replicas for (t, p), replicas in moves.items()}, request_timeout=timeout
    )
    failures = []
    for tp, future in sorted(futures.items(), key=lambda kv: (kv[0].topic, kv[0].partition)):
        try:
            future.result(timeout)
        except KafkaException as e:
            failures.append(f"{tp.topic}-{tp.partition}: {e.args[0].str() if e.args else e}")
    return failures


def _moving(admin: AdminClient, timeout: float) -> set[tuple[str, int]]:
    """The partitions with a reassignment in progress."""
    ongoing = admin.list_partition_reassignments(request_timeout=timeout).result(timeout)
    return {(tp.topic, tp.partition) for tp in ongoing}


def execute(admin: AdminClient, plan: Plan, timeout: float) -> list[str]:
    current = _current(admin, {t for t, _ in plan}, timeout)
    for key in plan:
        if key not in current:
            raise ConsoleError(f"{key[0]} has no partition {key[1]}")
    before = {key: current[key] for key in plan}
    lines = ["Current partition replica assignment", "", plan_json(before), "",
             "Save this to use as the --reassignment-json-file option during rollback"]  # fmt: skip
    failures = _alter(admin, plan, timeout)
    if failures:
        raise ConsoleError("the reassignment was refused:\n  " + "\n  ".join(failures))
    lines.append(f"Successfully started partition reassignments for {_names(plan)}")
    return lines


def verify(admin: AdminClient, plan: Plan, timeout: float) -> tuple[list[str], bool]:
    """(the lines, whether every partition is done as planned)."""
    moving = _moving(admin, timeout)
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
    moving = _moving(admin, timeout)
    doomed = sorted(key for key in plan if key in moving)
    lines = []
    if doomed:
        failures = _alter(admin, dict.fromkeys(doomed), timeout)
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


# --------------------------------------------------------------------------- the command


@click.command("reassign-partitions")
@BOOTSTRAP_OPTION
@TIMEOUT_OPTION
@click.option("--reassignment-json-file", "plan_file", default=None, metavar="FILE",
              help='The plan: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}.')  # fmt: skip
@click.option("--execute", "action", flag_value="execute", help="Start the plan's reassignments.")
@click.option("--verify", "action", flag_value="verify", help="Say, per partition, whether the plan is done.")
@click.option("--cancel", "action", flag_value="cancel", help="Cancel the plan's reassignments in progress.")
@click.option("--list", "action", flag_value="list", help="Every reassignment in progress.")
@click.option("--generate", "action", flag_value="generate",
              help="Propose a plan moving whole topics onto --broker-list.")  # fmt: skip
@click.option("--topics-to-move-json-file", "topics_file", default=None, metavar="FILE",
              help='With --generate: {"version":1,"topics":[{"topic":"t"}]}.')  # fmt: skip
@click.option(
    "--broker-list", default=None, metavar="1,2,3", help="With --generate: the brokers to move onto."
)
@click.option("--disable-rack-aware", is_flag=True, help="With --generate: ignore broker.rack.")
@command_config_option("An admin client config key (repeatable).")
def reassign_partitions(bootstrap_server: str, timeout: float, plan_file: str | None, action: str | None,
                        topics_file: str | None, broker_list: str | None, disable_rack_aware: bool,
                        command_config: tuple[str, ...]) -> None:  # fmt: skip
    """Move partitions' replicas between brokers, like kafka-reassign-partitions.

    \b
    logstore reassign-partitions --generate --topics-to-move-json-file topics.json --broker-list 2,3
    logstore reassign-partitions --reassignment-json-file plan.json --execute
    logstore reassign-partitions --reassignment-json-file plan.json --verify
    logstore reassign-partitions --reassignment-json-file plan.json --cancel
    logstore reassign-partitions --list

    --execute prints the current assignment first: keep it, it is the plan that
    rolls the move back. New replicas copy the partition from its leader; once
    they are in sync the old replicas are removed and delete their copies.
    --verify exits with 1 while any partition of the plan is not done.
    """
    from logstore.client.admin import AdminClient  # deferred (see the module's docstring)

    if action is None:
        raise click.UsageError("say what to do: --execute, --verify, --cancel, --list or --generate")
    if action in ("execute", "verify", "cancel") and plan_file is None:
        raise click.UsageError(f"--{action} needs --reassignment-json-file FILE")
    if action == "generate" and (topics_file is None or broker_list is None):
        raise click.UsageError("--generate needs --topics-to-move-json-file FILE and --broker-list 1,2,3")
    config = {"bootstrap.servers": bootstrap_server, **props_option_value(command_config, "--command-config")}
    admin = AdminClient(config)
    done = True
    try:
        with click_errors():
            if action == "list":
                lines = list_ongoing(admin, timeout)
            elif action == "generate":
                assert topics_file is not None and broker_list is not None
                lines = generate(admin, topics_file, _broker_ids(broker_list), timeout, not disable_rack_aware)
            else:
                assert plan_file is not None
                plan = load_plan(plan_file)
                if action == "verify":
                    lines, done = verify(admin, plan, timeout)
                else:
                    lines = (execute if action == "execute" else cancel)(admin, plan, timeout)
        for line in lines:
            click.echo(line)
    finally:
        admin.close()
    if not done:
        raise SystemExit(1)


def _broker_ids(broker_list: str) -> list[int]:
    try:
        return [int(b) for b in broker_list.split(",") if b.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{broker_list!r}: broker ids separated by commas", param_hint="--broker-list"
        ) from None
