"""The record every module in ``apis/`` exports as ``API``: one Kafka API as the broker serves it.

A leaf of the broker (it sees only the request context), so the dispatcher, the metrics and each
API module can name it without importing the registry.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from logstore.broker.context import RequestContext

Handler = Callable[[RequestContext, Any], Awaitable[Any]]


@dataclass(frozen=True)
class Api:
    """One API: its key, name, served version range and handler.

    The handler returns the response entity, or None to send nothing
    (Produce with acks=0).
    """

    key: int
    name: str
    min_version: int
    max_version: int
    handle: Handler
    # A decoder used instead of kio's: (frame, body offset, version) -> (request, size).
    decode: Callable[[bytes | memoryview, int, int], tuple[Any, int]] | None = None
