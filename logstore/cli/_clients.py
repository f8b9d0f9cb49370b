"""What the client-side tools share: the client library they drive a broker with, and its errors.

A leaf of the CLI: the command modules import it; it imports none of them.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
from collections.abc import Callable, Iterator
from types import ModuleType
from typing import Any

import click

from logstore.errors import LogstoreError


class ConsoleError(LogstoreError):
    """A console command (topics, produce, consume, reassign-partitions) cannot go on; the message says what to do."""


def stderr_line(line: str) -> None:
    """Print one line to stderr at once (progress and warnings of the tools)."""
    print(line, file=sys.stderr, flush=True)


def import_confluent_kafka(tool: str, error: type[LogstoreError]) -> ModuleType:
    """The confluent_kafka module, or ``error`` saying how to install it.

    The tools drive a broker with confluent-kafka (the ``clients`` extra),
    imported only when a command runs.
    """
    try:
        import confluent_kafka as module  # deferred: an optional extra, and slow to import
    except ImportError as e:
        raise error(
            f"{tool} needs confluent-kafka ({e}); install it with: pip install 'logstore[clients]'"
        ) from None
    return module


def kafka_reason(exc: BaseException) -> str:
    """The text of a KafkaException (whose first argument is a KafkaError) or any exception."""
    first = exc.args[0] if exc.args else exc
    return str(first.str() if hasattr(first, "str") else first)


def client_call(what: str, fn: Callable[[], Any]) -> Any:
    """``fn()``; the library's KafkaException, or a bad argument, as ConsoleError("what: reason")."""
    try:
        return fn()
    except Exception as e:  # the library's KafkaException, or a bad argument
        raise ConsoleError(f"{what}: {kafka_reason(e)}") from None


def unreachable(bootstrap: str, seconds: float, error: object) -> str:
    """What to say when no broker answered at ``bootstrap``."""
    return (
        f"cannot reach a broker at {bootstrap} within {seconds:g} s ({error}); "
        f"start one (logstore broker --listeners PLAINTEXT://{bootstrap}) "
        "or pass --bootstrap-server HOST:PORT"
    )


CLIENTS = ("logstore", "confluent")
"""The client libraries the tools can drive a broker with: one API, two implementations."""


def kafka_module(name: str, tool: str, error: type[LogstoreError]) -> ModuleType:
    """``logstore.client`` (the default) or confluent_kafka: modules with the same API."""
    if name == "confluent":
        return import_confluent_kafka(tool, error)
    if name != "logstore":
        raise error(f"{tool}: --client is one of {', '.join(CLIENTS)}, not {name!r}")
    import logstore.client as module  # deferred: ~0.3 s to import, which `logstore --help` need not wait for

    return module


def admin_module(kafka: ModuleType) -> ModuleType:
    """The library's ``admin`` module (``confluent_kafka.admin`` is not an attribute of ``confluent_kafka``)."""
    return importlib.import_module(f"{kafka.__name__}.admin")


_SELECTED = ["logstore"]


def select_client(name: str) -> None:
    """Which library :func:`selected_module` gives the tools (``--client``)."""
    _SELECTED[0] = name


def selected_module(tool: str, error: type[LogstoreError]) -> ModuleType:
    """The client library chosen with :func:`select_client`."""
    return kafka_module(_SELECTED[0], tool, error)


@contextlib.contextmanager
def logstore_admin(bootstrap_server: str) -> Iterator[Any]:
    """logstore's AdminClient on the broker; an error ends the command with the broker's message."""
    # deferred: logstore.client takes ~0.3 s to import, which `logstore --help` need not wait for
    from logstore.client.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap_server})
    try:
        yield admin
    except Exception as e:
        raise click.ClickException(kafka_reason(e)) from None
    finally:
        admin.close()
