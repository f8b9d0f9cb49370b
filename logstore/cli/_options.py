"""The options and KEY=VALUE parsing several command groups share, and their error handling.

A leaf of the CLI: the command modules import it; it imports none of them.

>>> parse_props(["a=1", "b=x=y"], "--property")
{'a': '1', 'b': 'x=y'}
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from types import ModuleType
from typing import Any

import click

from logstore.cli._clients import CLIENTS, ConsoleError, kafka_module
from logstore.errors import LogstoreError

Decorator = Callable[[Any], Any]

BOOTSTRAP_OPTION = click.option(
    "--bootstrap-server", default="127.0.0.1:9092", show_default=True, help="HOST:PORT of a broker."
)

TIMEOUT_OPTION = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=15,
    show_default=True,
    help="Seconds to wait for each answer from the broker.",
)


def client_option(help_text: str) -> Decorator:
    """``--client logstore|confluent``: the library a command drives the broker with."""
    return click.option(
        "--client",
        "client_name",
        type=click.Choice(list(CLIENTS)),
        default="logstore",
        show_default=True,
        help=help_text,
    )


CONSOLE_CLIENT_OPTION = client_option(
    "The client library: logstore's own, or confluent-kafka (pip install 'logstore[clients]')."
)
"""``--client`` of the console tools (topics, produce, consume)."""


def command_config_option(help_text: str) -> Decorator:
    """``--command-config KEY=VALUE`` (repeatable): client settings."""
    return click.option("--command-config", multiple=True, metavar="KEY=VALUE", help=help_text)


def with_options(*options: Decorator) -> Decorator:
    """One decorator for several options, listed in ``--help`` in the order given."""

    def decorate(fn: Any) -> Any:
        for option in reversed(options):
            fn = option(fn)
        return fn

    return decorate


@contextlib.contextmanager
def click_errors() -> Iterator[None]:
    """A LogstoreError (whose message says what to do) ends the command as click's "Error: ...", exit 1."""
    try:
        yield
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None


def parse_props(items: Iterable[str], option: str, hint: str = "") -> dict[str, str]:
    """``["a=1", "b=x=y"]`` -> ``{"a": "1", "b": "x=y"}``; anything else is a ConsoleError naming ``option``."""
    props: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConsoleError(f"{option} takes KEY=VALUE{hint}, got {item!r}")
        props[key.strip()] = value
    return props


def props_option_value(items: tuple[str, ...], option: str) -> dict[str, str]:
    """:func:`parse_props` of an option's values, a bad one a usage error of that option."""
    try:
        return parse_props(items, option)
    except LogstoreError as e:
        raise click.BadParameter(str(e)) from None


def client_library(client_name: str, tool: str) -> ModuleType:
    """The ``--client`` library of a console command (``tool`` names it in the errors)."""
    with click_errors():
        return kafka_module(client_name, tool, ConsoleError)
