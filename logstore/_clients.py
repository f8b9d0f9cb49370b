"""What the client-side tools (``logstore perf``, ``logstore groups``) share."""

from __future__ import annotations

import sys
from types import ModuleType

from logstore.errors import LogstoreError


def stderr_line(line: str) -> None:
    """Print one line to stderr at once (progress and warnings of the tools)."""
    print(line, file=sys.stderr, flush=True)


def import_confluent_kafka(tool: str, error: type[LogstoreError]) -> ModuleType:
    """The confluent_kafka module, or ``error`` saying how to install it.

    The tools drive a broker with confluent-kafka (the ``clients`` extra),
    imported only when a command runs.
    """
    try:
        import confluent_kafka as module
    except ImportError as e:
        raise error(
            f"{tool} needs confluent-kafka ({e}); install it with: pip install 'logstore[clients]'"
        ) from None
    return module


def kafka_reason(exc: BaseException) -> str:
    """The text of a KafkaException (whose first argument is a KafkaError) or any exception."""
    first = exc.args[0] if exc.args else exc
    return str(first.str() if hasattr(first, "str") else first)


CLIENTS = ("logstore", "confluent")
"""The client libraries the tools can drive a broker with: one API, two implementations."""


def kafka_module(name: str, tool: str, error: type[LogstoreError]) -> ModuleType:
    """``logstore.client`` (the default) or confluent_kafka: modules with the same API."""
    if name == "confluent":
        return import_confluent_kafka(tool, error)
    if name != "logstore":
        raise error(f"{tool}: --client is one of {', '.join(CLIENTS)}, not {name!r}")
    import logstore.client as module

    return module


_SELECTED = ["logstore"]


def select_client(name: str) -> None:
    """Which library :func:`selected_module` gives the tools (``--client``)."""
    _SELECTED[0] = name


def selected_module(tool: str, error: type[LogstoreError]) -> ModuleType:
    """The client library chosen with :func:`select_client`."""
    return kafka_module(_SELECTED[0], tool, error)
