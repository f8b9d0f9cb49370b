"""``logstore groups``: consumer groups, like ``kafka-consumer-groups`` (the work: :mod:`.consumer_groups`)."""

from __future__ import annotations

import click

from logstore.cli._clients import select_client
from logstore.cli._options import BOOTSTRAP_OPTION, TIMEOUT_OPTION, click_errors, client_option
from logstore.cli._tables import format_table
from logstore.cli.groups.consumer_groups import (
    DESCRIBE_HEADER,
    RESET_HEADER,
    Groups,
    parse_datetime,
    parse_topic_spec,
)


@click.group()
@client_option("The client library that talks to the broker.")
def groups(client_name: str) -> None:
    """Consumer groups, like kafka-consumer-groups.

    \b
    logstore groups list            the groups (and their states with --state)
    logstore groups describe        committed offsets, log-end offsets, lag and members
    logstore groups reset-offsets   move a stopped group's committed offsets
    logstore groups delete          delete groups that have no active members

    They use an AdminClient, logstore's or confluent-kafka's (--client), and
    work against any Kafka-protocol broker.
    """
    select_client(client_name)


@groups.command("list")
@BOOTSTRAP_OPTION
@TIMEOUT_OPTION
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help="Only groups in this state (repeatable): Stable, Empty, PreparingRebalance, "
    "CompletingRebalance, Dead. With it, each group's state is printed too.",
)
def groups_list(bootstrap_server: str, timeout: float, states: tuple[str, ...]) -> None:
    """Print the group ids, one per line (GROUP and STATE columns with --state)."""
    with click_errors():
        found = Groups(bootstrap_server, timeout).list_groups(states)
    if states:
        for line in format_table(["GROUP", "STATE"], found):
            click.echo(line)
    else:
        for group, _ in found:
            click.echo(group)


@groups.command("describe")
@BOOTSTRAP_OPTION
@TIMEOUT_OPTION
@click.option(
    "--group", "group_ids", multiple=True, metavar="GROUP", help="A group to describe (repeatable)."
)
@click.option("--all-groups", is_flag=True, help="Describe every group.")
def groups_describe(
    bootstrap_server: str, timeout: float, group_ids: tuple[str, ...], all_groups: bool
) -> None:
    """Per partition: committed offset, log-end offset, lag and the member that has it.

    Prints kafka-consumer-groups' columns: GROUP TOPIC PARTITION
    CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID. A partition
    with no committed offset shows "-" as CURRENT-OFFSET and LAG; one that no
    member has shows "-" as CONSUMER-ID, HOST and CLIENT-ID; a member with no
    partitions gets a row of its own. Exits 1 if a group does not exist.

    \b
      logstore groups describe --group my-group
    """
    if not group_ids and not all_groups:
        raise click.UsageError("name a group with --group GROUP, or use --all-groups")
    missing = []
    with click_errors():
        client = Groups(bootstrap_server, timeout)
        names = [g for g, _ in client.list_groups()] if all_groups else list(group_ids)
        for name in names:
            info = client.describe(name)
            if not info.exists:
                missing.append(name)
                click.echo(f"Error: Consumer group '{name}' does not exist.", err=True)
                continue
            click.echo()
            if info.state in ("Empty", "Dead"):
                click.echo(f"Consumer group '{name}' has no active members.")
            elif info.state in ("PreparingRebalance", "CompletingRebalance"):
                click.echo(f"Warning: Consumer group '{name}' is rebalancing.")
            click.echo()
            for line in format_table(DESCRIBE_HEADER, [row.cells() for row in info.rows]):
                click.echo(line)
    if missing:
        raise click.ClickException(
            f"no such group: {', '.join(missing)}; logstore groups list --bootstrap-server "
            f"{bootstrap_server} shows the groups"
        )


@groups.command("reset-offsets")
@BOOTSTRAP_OPTION
@TIMEOUT_OPTION
@click.option("--group", required=True, help="The group whose committed offsets to move.")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,...]",
    help="A topic, or some of its partitions as topic:0,1 (repeatable).",
)
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="Reset to each partition's log start.")
@click.option("--to-latest", is_flag=True, help="Reset to each partition's log end.")
@click.option("--to-offset", type=int, default=None, metavar="N", help="Reset to offset N (kept in range).")
@click.option(
    "--to-datetime",
    default=None,
    metavar="ISO",
    help="Reset to the first record at or after this time, e.g. 2024-05-01T12:00:00.000 (local) or "
    "2024-05-01T12:00:00Z; the log end where there is none.",
)
@click.option("--execute", is_flag=True, help="Commit the new offsets (without it: a dry run).")
def groups_reset_offsets(
    bootstrap_server: str,
    timeout: float,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    execute: bool,
) -> None:
    """Move a group's committed offsets; a dry run unless --execute.

    The group must have no active members (stop its consumers first). Prints
    GROUP TOPIC PARTITION NEW-OFFSET for every partition in scope. Give the
    scope (--topic ... or --all-topics) and exactly one of --to-earliest,
    --to-latest, --to-offset N, --to-datetime ISO.

    \b
      logstore groups reset-offsets --group g --topic events --to-earliest            # show the plan
      logstore groups reset-offsets --group g --topic events --to-earliest --execute  # apply it
    """
    chosen = [
        name
        for name, given in (
            ("--to-earliest", to_earliest),
            ("--to-latest", to_latest),
            ("--to-offset", to_offset is not None),
            ("--to-datetime", to_datetime is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime ISO"
            + (f" (got {' '.join(chosen)})" if chosen else "")
        )
    if bool(topics) == all_topics:
        raise click.UsageError("give the topics to reset with --topic TOPIC (repeatable), or --all-topics")
    with click_errors():
        specs = [parse_topic_spec(spec) for spec in topics]
        value: int | None = None
        if to_earliest:
            to = "earliest"
        elif to_latest:
            to = "latest"
        elif to_offset is not None:
            to, value = "offset", to_offset
        else:
            assert to_datetime is not None
            to, value = "datetime", parse_datetime(to_datetime)
        client = Groups(bootstrap_server, timeout)
        plan = client.plan_reset(group, specs, all_topics, to, value)
        if execute:
            client.execute_reset(group, plan)
    if not execute:
        click.echo("Dry run: nothing was changed; add --execute to commit these offsets.", err=True)
    click.echo()
    for line in format_table(RESET_HEADER, [(group, t, p, offset) for t, p, offset in plan]):
        click.echo(line)


@groups.command("delete")
@BOOTSTRAP_OPTION
@TIMEOUT_OPTION
@click.option(
    "--group", "group_ids", multiple=True, required=True, metavar="GROUP", help="A group (repeatable)."
)
def groups_delete(bootstrap_server: str, timeout: float, group_ids: tuple[str, ...]) -> None:
    """Delete groups with their committed offsets; only groups with no active members.

    Exits 1 if any group could not be deleted, saying why.
    """
    with click_errors():
        outcome = Groups(bootstrap_server, timeout).delete(group_ids)
    deleted = [g for g, reason in outcome.items() if reason is None]
    failed = {g: reason for g, reason in outcome.items() if reason is not None}
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        click.echo(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        lines = "\n".join(
            f"* Group '{g}' could not be deleted due to: {reason}" for g, reason in failed.items()
        )
        raise click.ClickException(f"Deletion of some consumer groups failed:\n{lines}")
