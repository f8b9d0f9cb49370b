"""``logstore quotas``: client quotas, like ``kafka-configs --entity-type users/clients/ips``.

An entity is named with ``--user NAME`` / ``--user-default``, ``--client-id NAME`` /
``--client-default`` (both: a user's quota for one client id), or ``--ip ADDR`` /
``--ip-default``; kafka-configs' ``--entity-type users --entity-name alice`` is ``--user
alice``, ``--entity-default`` is ``--user-default``. The calls go over the wire through
logstore's AdminClient (DescribeClientQuotas, AlterClientQuotas), so any Kafka broker serves
them. Errors from the broker (INVALID_REQUEST for an unknown key, a bad value or entity) are
printed with its message and exit 1.
"""

from __future__ import annotations

import click

from logstore.cli._clients import logstore_admin
from logstore.cli._options import BOOTSTRAP_OPTION, with_options


def _entity(user: str | None, user_default: bool, client_id: str | None, client_default: bool,
            ip: str | None, ip_default: bool) -> dict[str, str | None]:  # fmt: skip
    entity: dict[str, str | None] = {}
    for kind, name, default in (("user", user, user_default), ("client-id", client_id, client_default),
                                ("ip", ip, ip_default)):  # fmt: skip
        if name is not None and default:
            raise click.UsageError(f"give --{kind} NAME or --{kind.split('-')[0]}-default, not both")
        if name is not None or default:
            entity[kind] = name
    return entity


_entity_options = with_options(
    click.option("--user", default=None, metavar="NAME", help="The user (a principal's name, e.g. alice)."),
    click.option("--user-default", is_flag=True, help="The <default> user: every user without its own quota."),
    click.option("--client-id", default=None, metavar="ID", help="The client id."),
    click.option("--client-default", is_flag=True, help="The <default> client id."),
    click.option("--ip", default=None, metavar="ADDR", help="An IP address (connection_creation_rate)."),
    click.option("--ip-default", is_flag=True, help="The <default> IP."),
    BOOTSTRAP_OPTION,
    click.option(
        "--timeout",
        type=click.FloatRange(min=0, min_open=True),
        default=15,
        show_default=True,
        help="Seconds to wait for the broker.",
    ),
)
"""The entity, the broker and the timeout: the options of both commands."""


@click.group()
def quotas() -> None:
    """Client quotas, like kafka-configs --entity-type users/clients/ips.

    \b
    logstore quotas describe [--user U] [--client-id C]     quotas of matching entities
    logstore quotas alter --user U --add-config producer_byte_rate=1048576
    logstore quotas alter --client-default --delete-config consumer_byte_rate

    Keys: producer_byte_rate, consumer_byte_rate (bytes/s), request_percentage (% of one
    thread), controller_mutation_rate; connection_creation_rate for --ip. With no entity,
    describe lists every entity that has quotas; describe --user '*' matches any user.
    """


@quotas.command("describe")
@_entity_options
@click.option("--strict", is_flag=True, help="Only entities of exactly the types given.")
def describe(user: str | None, user_default: bool, client_id: str | None, client_default: bool,
             ip: str | None, ip_default: bool, bootstrap_server: str, timeout: float, strict: bool) -> None:  # fmt: skip
    """Print the quotas of the entities matching the options, one line each (kafka-configs' form)."""
    entity = _entity(user, user_default, client_id, client_default, ip, ip_default)
    with logstore_admin(bootstrap_server) as admin:
        found = admin.describe_client_quotas(list(entity.items()), strict=strict, request_timeout=timeout).result()
    for names, values in sorted(found.items(), key=lambda item: str(item[0])):
        shown = ", ".join(f"{kind} {'<default>' if name is None else repr(name)}" for kind, name in names)
        configs = ", ".join(f"{k}={v:g}" for k, v in sorted(values.items()))
        click.echo(f"Quota configs for {shown} are {configs}")


@quotas.command("alter")
@_entity_options
@click.option(
    "--add-config", "add", default="", metavar="K=V,...", help="Quotas to set, e.g. producer_byte_rate=1024."
)
@click.option("--delete-config", "delete", default="", metavar="K,...", help="Quotas to remove.")
@click.option("--validate-only", is_flag=True, help="Check with the broker, change nothing.")
def alter(user: str | None, user_default: bool, client_id: str | None, client_default: bool, ip: str | None,
          ip_default: bool, bootstrap_server: str, timeout: float, add: str, delete: str,
          validate_only: bool) -> None:  # fmt: skip
    """Set and/or remove quotas of one entity."""
    entity = _entity(user, user_default, client_id, client_default, ip, ip_default)
    if not entity:
        raise click.UsageError("name an entity: --user, --client-id, --ip (or their -default forms)")
    ops: dict[str, float | None] = {}
    for item in filter(None, (part.strip() for part in add.split(","))):
        key, sep, value = item.partition("=")
        try:
            ops[key.strip()] = float(value)
        except ValueError:
            raise click.BadParameter(f"{item!r} is not KEY=NUMBER", param_hint="--add-config") from None
        if not sep:
            raise click.BadParameter(f"{item!r} is not KEY=NUMBER", param_hint="--add-config")
    for key in filter(None, (part.strip() for part in delete.split(","))):
        ops[key] = None
    if not ops:
        raise click.UsageError("give --add-config and/or --delete-config")
    with logstore_admin(bootstrap_server) as admin:
        (future,) = admin.alter_client_quotas([(entity, ops)], validate_only=validate_only, request_timeout=timeout)
        future.result()
    click.echo(
        "Validated the quotas (nothing changed)." if validate_only else "Completed updating the quotas."
    )
