"""``logstore acls``: the click commands (the work is in :mod:`logstore.acls_admin`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from logstore.errors import LogstoreError

_PATTERNS = ["literal", "prefixed", "match", "any"]


def _common(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The options every acls command takes: the broker, the timeout, the resources."""
    options = [
        click.option("--bootstrap-server", default="127.0.0.1:9092", show_default=True, help="HOST:PORT of a broker."),
        click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=15, show_default=True,
                     help="Seconds to wait for each answer from the broker."),
        click.option("--topic", "topics", multiple=True, metavar="NAME", help="A topic (repeatable; * for every topic)."),
        click.option("--group", "groups", multiple=True, metavar="NAME", help="A consumer group (repeatable; * for all)."),
        click.option("--transactional-id", "txn_ids", multiple=True, metavar="ID",
                     help="A transactional id (repeatable; * for all)."),
        click.option("--cluster", is_flag=True, help="The cluster resource (kafka-cluster)."),
    ]  # fmt: skip
    for option in reversed(options):
        fn = option(fn)
    return fn


def _operations(values: tuple[str, ...]) -> list[Any]:
    from logstore.acls_admin import operation_of

    return [operation_of(v) for v in values]


_OPERATION_HELP = (
    "An operation (repeatable): All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
    "DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens."
)


@click.group()
@click.option("--client", "client_name", type=click.Choice(["logstore", "confluent"]), default="logstore",
              show_default=True, help="The client library that talks to the broker.")  # fmt: skip
def acls(client_name: str) -> None:
    """ACLs, like kafka-acls (the broker needs authorizer.class.name set).

    \b
    logstore acls add --allow-principal User:alice --operation Read --topic orders
    logstore acls add --deny-principal User:bob --operation All --topic orders- --resource-pattern-type prefixed
    logstore acls list [--topic orders] [--principal User:alice]
    logstore acls remove --topic orders [--allow-principal User:alice] [--operation Read]

    Principals are <type>:<name> (User:alice; User:* for everyone), hosts an IP or * (the default).
    DENY wins over ALLOW; READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
    DESCRIBE_CONFIGS. See docs/acls.md for what each API needs.
    """
    from logstore._clients import select_client

    select_client(client_name)


def _run(work: Callable[[Any], Any]) -> Any:
    from logstore.acls_admin import Acls

    try:
        return work(Acls)
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None


@acls.command("add")
@_common
@click.option(
    "--allow-principal", "allow", multiple=True, metavar="PRINCIPAL", help="Principal to allow (repeatable)."
)
@click.option(
    "--deny-principal", "deny", multiple=True, metavar="PRINCIPAL", help="Principal to deny (repeatable)."
)
@click.option(
    "--host", "hosts", multiple=True, metavar="HOST", help="Host the ACL applies to (repeatable; default *)."
)
@click.option("--operation", "operations", multiple=True, metavar="OP", help=_OPERATION_HELP)
@click.option("--resource-pattern-type", "pattern", type=click.Choice(["literal", "prefixed"], case_sensitive=False),
              default="literal", show_default=True, help="How the resource names match.")  # fmt: skip
def acls_add(bootstrap_server: str, timeout: float, topics: tuple[str, ...], groups: tuple[str, ...],
             txn_ids: tuple[str, ...], cluster: bool, allow: tuple[str, ...], deny: tuple[str, ...],
             hosts: tuple[str, ...], operations: tuple[str, ...], pattern: str) -> None:  # fmt: skip
    """Add ACLs: every principal x host x operation x resource given."""
    from logstore.acls_admin import format_acls

    def work(cls: Any) -> Any:
        client = cls(bootstrap_server, timeout)
        try:
            ops = _operations(operations)
            return client.add(
                client.resources(topics, groups, txn_ids, cluster), pattern, allow, deny, hosts, ops
            )
        finally:
            client.close()

    added = _run(work)
    click.echo("Adding ACLs:")
    for line in format_acls(added):
        click.echo(line)


@acls.command("remove")
@_common
@click.option(
    "--allow-principal", "allow", multiple=True, metavar="PRINCIPAL", help="Only this principal's ACLs."
)
@click.option(
    "--deny-principal", "deny", multiple=True, metavar="PRINCIPAL", help="Only this principal's ACLs."
)
@click.option("--host", "hosts", multiple=True, metavar="HOST", help="Only ACLs for this host (repeatable).")
@click.option("--operation", "operations", multiple=True, metavar="OP", help=_OPERATION_HELP)
@click.option("--resource-pattern-type", "pattern", type=click.Choice(_PATTERNS, case_sensitive=False),
              default="literal", show_default=True,
              help="Which patterns match the names: literal, prefixed, match (those that apply), any.")  # fmt: skip
def acls_remove(bootstrap_server: str, timeout: float, topics: tuple[str, ...], groups: tuple[str, ...],
                txn_ids: tuple[str, ...], cluster: bool, allow: tuple[str, ...], deny: tuple[str, ...],
                hosts: tuple[str, ...], operations: tuple[str, ...], pattern: str) -> None:  # fmt: skip
    """Remove the ACLs of the resources that match the other options."""
    from logstore.acls_admin import format_acls

    def work(cls: Any) -> Any:
        client = cls(bootstrap_server, timeout)
        try:
            resources = client.resources(topics, groups, txn_ids, cluster)
            return client.remove(resources, pattern, allow + deny, hosts, _operations(operations))
        finally:
            client.close()

    removed = _run(work)
    click.echo(f"Removed {len(removed)} ACL(s):")
    for line in format_acls(removed):
        click.echo(line)


@acls.command("list")
@_common
@click.option(
    "--principal", "principals", multiple=True, metavar="PRINCIPAL", help="Only this principal's ACLs."
)
@click.option("--resource-pattern-type", "pattern", type=click.Choice(_PATTERNS, case_sensitive=False),
              default="any", show_default=True,
              help="Which patterns match the names: literal, prefixed, match (those that apply), any.")  # fmt: skip
def acls_list(bootstrap_server: str, timeout: float, topics: tuple[str, ...], groups: tuple[str, ...],
              txn_ids: tuple[str, ...], cluster: bool, principals: tuple[str, ...], pattern: str) -> None:  # fmt: skip
    """List the ACLs of the resources given (every ACL when none)."""
    from logstore.acls_admin import format_acls

    def work(cls: Any) -> Any:
        client = cls(bootstrap_server, timeout)
        try:
            return client.list(client.resources(topics, groups, txn_ids, cluster), pattern, principals)
        finally:
            client.close()

    for line in format_acls(_run(work)):
        click.echo(line)
