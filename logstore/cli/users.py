"""``logstore users``: SCRAM users, like ``kafka-configs --entity-type users --alter --add-config SCRAM-...``.

Over the wire (``--bootstrap-server``) the commands use confluent-kafka's
AdminClient: AlterUserScramCredentials (KIP-554: the client salts and hashes
the password, PBKDF2 with ``--iterations``, and sends only the salted
password) and DescribeUserScramCredentials. ``--command-config KEY=VALUE``
passes client settings, so the tool also talks to a TLS or SASL listener
(``security.protocol=SASL_SSL``, ``sasl.mechanism``, ``ssl.ca.location``...).

To make the first user before any broker runs (Kafka's
``kafka-storage format --add-scram``), ``--data-dir`` writes the credential
file of a broker that runs alone (``<data dir>/scram-credentials.json``;
see logstore/security/credentials.py) directly, with logstore's own SCRAM
code (logstore/security/scram.py). A running broker reads that file at
start only: use ``--bootstrap-server`` while it runs.
"""

from __future__ import annotations

import importlib
from typing import Any

import click

from logstore.cli._clients import import_confluent_kafka, kafka_reason
from logstore.cli._options import click_errors, command_config_option, parse_props
from logstore.cli._tables import format_table
from logstore.errors import LogstoreError

MECHANISM_NAMES = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class UsersError(LogstoreError):
    """A users command cannot go on; the message says what to do."""


def _admin(bootstrap_server: str, command_config: tuple[str, ...]) -> Any:
    import_confluent_kafka("logstore users", UsersError)
    admin_module = importlib.import_module("confluent_kafka.admin")
    config = {"bootstrap.servers": bootstrap_server, **parse_props(command_config, "--command-config")}
    return admin_module, admin_module.AdminClient(config)


def _mechanism(admin_module: Any, name: str) -> Any:
    return getattr(admin_module.ScramMechanism, name.replace("-", "_"))


def _alter(admin: Any, change: Any, user: str, timeout: float, failure: str) -> None:
    """AlterUserScramCredentials of one upsertion or deletion; UsersError("failure: reason") if refused."""
    futures = admin.alter_user_scram_credentials([change], request_timeout=timeout)
    try:
        futures[user].result(timeout)
    except Exception as e:
        raise UsersError(f"{failure}: {kafka_reason(e)}") from None


def upsert_remote(
    bootstrap_server: str,
    command_config: tuple[str, ...],
    user: str,
    mechanism: str,
    password: str,
    iterations: int,
    timeout: float,
) -> None:
    admin_module, admin = _admin(bootstrap_server, command_config)
    info = admin_module.ScramCredentialInfo(_mechanism(admin_module, mechanism), iterations)
    upsertion = admin_module.UserScramCredentialUpsertion(user, info, password.encode("utf-8"))
    _alter(admin, upsertion, user, timeout, f"cannot set the {mechanism} credential of {user}")


def delete_remote(
    bootstrap_server: str, command_config: tuple[str, ...], user: str, mechanism: str, timeout: float
) -> None:
    admin_module, admin = _admin(bootstrap_server, command_config)
    deletion = admin_module.UserScramCredentialDeletion(user, _mechanism(admin_module, mechanism))
    _alter(admin, deletion, user, timeout, f"cannot delete the {mechanism} credential of {user}")


def describe_remote(
    bootstrap_server: str, command_config: tuple[str, ...], users: list[str], timeout: float
) -> list[tuple[str, str, int]]:
    """(user, mechanism, iterations) rows."""
    _, admin = _admin(bootstrap_server, command_config)
    try:
        found = admin.describe_user_scram_credentials(users or None, request_timeout=timeout)
        described = (
            {user: future.result(timeout) for user, future in found.items()}
            if isinstance(found, dict)
            else found.result(timeout)
        )
    except Exception as e:
        raise UsersError(f"cannot describe the users: {kafka_reason(e)}") from None
    rows = []
    for user, description in sorted(described.items()):
        for info in description.scram_credential_infos:
            rows.append((user, str(info.mechanism.name).replace("_", "-"), int(info.iterations)))
    return rows


def upsert_local(data_dir: str, user: str, mechanism: str, password: str, iterations: int) -> None:
    # deferred, as in delete_local: the SCRAM code adds ~8 ms to every `logstore --help`
    from logstore.security.credentials import FILE_NAME, FileCredentialStore
    from logstore.security.scram import MAX_ITERATIONS, MECHANISMS, MIN_ITERATIONS, ScramCredential

    if not MIN_ITERATIONS <= iterations <= MAX_ITERATIONS:
        raise UsersError(f"--iterations {iterations}: Kafka accepts {MIN_ITERATIONS}..{MAX_ITERATIONS}")
    if not user:
        raise UsersError("--user must not be empty")
    store = FileCredentialStore(data_dir)
    credential = ScramCredential.from_password(MECHANISMS[mechanism], password, iterations=iterations)
    store.alter([], [(user, mechanism, credential)])
    click.echo(f"{user}: {mechanism} credential written to {data_dir}/{FILE_NAME}", err=True)


def delete_local(data_dir: str, user: str, mechanism: str) -> None:
    from logstore.security.credentials import FileCredentialStore  # deferred (see upsert_local)

    store = FileCredentialStore(data_dir)
    if store.get(user, mechanism) is None:
        raise UsersError(f"{user} has no {mechanism} credential in {data_dir}")
    store.alter([(user, mechanism)], [])


def _where(bootstrap_server: str | None, data_dir: str | None) -> None:
    if (bootstrap_server is None) == (data_dir is None):
        raise click.UsageError(
            "give --bootstrap-server HOST:PORT (a running broker) or --data-dir DIR (a stopped broker's data)"
        )


_SERVER = click.option("--bootstrap-server", default=None, help="HOST:PORT of a running broker.")
_DATA_DIR = click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Write the credential file of a stopped single broker instead (bootstraps the first user).",
)
_CONFIG = command_config_option("A client config key (repeatable), e.g. security.protocol=SASL_SSL.")
_USER = click.option("--user", required=True, help="The user name (the principal User:<name>).")
_MECHANISM = click.option(
    "--mechanism", type=click.Choice(MECHANISM_NAMES), default="SCRAM-SHA-512", show_default=True
)
_TIMEOUT = click.option("--timeout", type=float, default=30.0, show_default=True, help="Seconds to wait.")


@click.group()
def users() -> None:
    """SCRAM users of SASL listeners (kafka-configs --entity-type users).

    \b
    logstore users add --bootstrap-server H:P --user alice --password pw    add or replace a credential
    logstore users add --data-dir DIR --user admin --password pw             before the broker first starts
    logstore users alter ...                                                  the same as add
    logstore users describe --bootstrap-server H:P [--user alice]           mechanisms and iterations
    logstore users delete --bootstrap-server H:P --user alice               remove a credential

    Passwords are never stored: the broker keeps salted keys (RFC 5802). PLAIN users
    are the listener's JAAS config (docs/security.md), not these.
    """


def _upsert_command(name: str, help_text: str) -> None:
    @users.command(name, help=help_text)
    @_SERVER
    @_DATA_DIR
    @_CONFIG
    @_USER
    @_MECHANISM
    @click.option("--password", prompt=True, hide_input=True, help="The password (prompted when left out).")
    @click.option(
        "--iterations",
        type=click.IntRange(4096, 16384),
        default=4096,
        show_default=True,
        help="PBKDF2 iterations (Kafka accepts 4096..16384).",
    )
    @_TIMEOUT
    def command(
        bootstrap_server: str | None,
        data_dir: str | None,
        command_config: tuple[str, ...],
        user: str,
        mechanism: str,
        password: str,
        iterations: int,
        timeout: float,
    ) -> None:
        _where(bootstrap_server, data_dir)
        if data_dir is not None:
            with click_errors():
                upsert_local(data_dir, user, mechanism, password, iterations)
        else:
            assert bootstrap_server is not None
            with click_errors():
                upsert_remote(bootstrap_server, command_config, user, mechanism, password, iterations, timeout)
            click.echo(f"{user}: {mechanism} credential set", err=True)


_upsert_command("add", "Add (or replace) a user's SCRAM credential.")
_upsert_command("alter", "Replace (or add) a user's SCRAM credential; the same as add.")


@users.command("describe")
@click.option("--bootstrap-server", required=True, help="HOST:PORT of a running broker.")
@_CONFIG
@click.option("--user", "user_names", multiple=True, help="A user to describe (repeatable; default: all).")
@_TIMEOUT
def users_describe(
    bootstrap_server: str, command_config: tuple[str, ...], user_names: tuple[str, ...], timeout: float
) -> None:
    """Print USER MECHANISM ITERATIONS for each credential."""
    with click_errors():
        rows = describe_remote(bootstrap_server, command_config, list(user_names), timeout)
    for line in format_table(["USER", "MECHANISM", "ITERATIONS"], rows):
        click.echo(line)


@users.command("delete")
@_SERVER
@_DATA_DIR
@_CONFIG
@_USER
@_MECHANISM
@_TIMEOUT
def users_delete(
    bootstrap_server: str | None,
    data_dir: str | None,
    command_config: tuple[str, ...],
    user: str,
    mechanism: str,
    timeout: float,
) -> None:
    """Delete a user's SCRAM credential for one mechanism."""
    _where(bootstrap_server, data_dir)
    with click_errors():
        if data_dir is not None:
            delete_local(data_dir, user, mechanism)
        else:
            assert bootstrap_server is not None
            delete_remote(bootstrap_server, command_config, user, mechanism, timeout)
    click.echo(f"{user}: {mechanism} credential deleted", err=True)
