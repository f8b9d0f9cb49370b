"""What an API handler sees of the request it serves, and how it hands back an answer that waits.

:class:`RequestContext` is the handler's view: the broker's services, the
connection the request came on, and its header.

:class:`Deferred` is how a handler lets the requests behind its own go on
while it waits (Redpanda's two stages, "dispatched" and "produced"). A
handler does, in arrival order, everything that changes state (the append of
a Produce, the join of a JoinGroup, the session update of a Fetch), then
returns ``Deferred(coroutine)`` where it would otherwise await a wait
(replication to the ISR, a long poll, the rebalance). The connection then
starts the next request at once; the coroutine runs on as a task and
returns the response entity, which leaves the connection in request order
(docs/broker.md, "Pipelining"). A handler with nothing to wait for returns
its response as before and costs nothing more.
"""

from __future__ import annotations

import typing
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

from logstore.protocol import RequestHeader
from logstore.security import KafkaPrincipal

if typing.TYPE_CHECKING:  # interim: the Services protocol replaces the whole Broker (issue 23)
    from logstore.broker.network.connection import Connection
    from logstore.broker.server import Broker


@dataclass(slots=True)
class RequestContext:
    """What a handler knows about the request it serves."""

    broker: Broker
    connection: Connection
    header: RequestHeader

    @property
    def version(self) -> int:
        return self.header.api_version

    @property
    def principal(self) -> KafkaPrincipal:
        """Who sent the request: ``User:ANONYMOUS`` until TLS or SASL authenticates the connection."""
        return self.connection.principal


class Deferred:
    """A handler's answer still to come: ``waiting`` returns the response entity (or None).

    Invariant: whatever the request changes has been changed when the handler
    returns this; ``waiting`` only waits and then reads, so the requests the
    connection serves meanwhile see the same state as if it had been awaited.
    """

    __slots__ = ("waiting",)

    def __init__(self, waiting: Coroutine[Any, Any, Any]) -> None:
        self.waiting = waiting
