"""Connection limits (Kafka's ConnectionQuotas: KIP-402, KIP-612), as near as asyncio allows.

Broker configs (Kafka's names and defaults, read live, so a dynamic change applies to the
next connection):

- ``max.connections`` (Integer.MAX): connections the broker serves at once. Kafka's acceptor
  blocks once the limit is reached and accepts again when a connection closes; the kernel
  backlog holds the clients meanwhile. asyncio accepts by itself, so a connection over the
  limit is *parked* instead: accepted but not read (the client sees a connected socket whose
  requests are not answered, as with Kafka's blocked acceptor), in arrival order, and served
  when a slot frees. At most :data:`PARKED_MAX` (the listen backlog) wait; beyond that the
  newest is closed at once (a full kernel backlog drops the connection attempt in Kafka).
- ``max.connections.per.ip`` (Integer.MAX) and ``max.connections.per.ip.overrides``
  (``host:count,...``; a host name is resolved once per value): a connection over its IP's
  limit is closed at once (Kafka: ``TooManyConnectionsException``, the socket closed).
- ``max.connection.creation.rate`` (Integer.MAX, per second, broker-wide): each admitted
  connection is recorded on a rate measured like the client quotas (``quota.window.num`` x
  ``quota.window.size.seconds``); over the rate, admission waits the throttle time (capped
  at one window, Kafka's ``maxThrottleTimeMs``) and the connections behind it wait in turn,
  as Kafka's acceptor does. Waiting costs only a parked socket: nothing is refused.
- ``connection_creation_rate`` on an IP entity (AlterClientQuotas ``ip``, or ``<default>``
  for every IP): over it, the connection is closed after the throttle time, unserved (Kafka's
  ``ConnectionThrottledException``: a delayed close).

State: per-IP counts of open (admitted or parked) connections, the admitted count, the FIFO
of parked connections, one rate for the broker and one per throttled IP. O(1) per connection
but the FIFO drain (each parked connection once).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import logging
import socket
import time
from collections.abc import Callable
from typing import Protocol

from logstore.broker.config.broker_config import BrokerConfig
from logstore.broker.quotas.client_quotas import DEFAULT, Rate
from logstore.errors import InvalidConfigError

_log = logging.getLogger("logstore.broker")

INT_MAX = 2**31 - 1
PARKED_MAX = 1024  # the listen backlog the broker asks for


def parse_overrides(value: str) -> dict[str, int]:
    """``host:count,...`` -> {ip: count} (Kafka's max.connections.per.ip.overrides).

    >>> parse_overrides("127.0.0.1:2, 10.0.0.1:0")
    {'127.0.0.1': 2, '10.0.0.1': 0}
    """
    out: dict[str, int] = {}
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        host, sep, count = item.rpartition(":")
        if not sep or not host or not count.strip().isdigit():
            raise InvalidConfigError(
                f"max.connections.per.ip.overrides: {item!r} is not host:count (e.g. 127.0.0.1:100)"
            )
        try:
            address = socket.gethostbyname(host.strip().strip("[]"))
        except OSError:
            address = host.strip().strip("[]")
        out[address] = int(count)
    return out


class Connection(Protocol):
    """What the limits read of a client connection and ask of it (network/connection.py's).

    Hashable by identity: the limits keep their own per-connection state (the IP counted, the
    slot held) in maps keyed by it and never write to the connection.
    """

    @property
    def client_host(self) -> str: ...

    def park(self) -> None:
        """Stop reading from it (it waits for a slot)."""
        ...

    def unpark(self) -> None: ...

    def close(self, reason: str, abort: bool = False) -> None: ...


class ConnectionLimits:
    """The connection limits of one broker (see the module doc)."""

    def __init__(self, config: Callable[[], BrokerConfig]) -> None:
        """``config``: the broker's config now (dynamic configs change it)."""
        self._current = config
        self.per_ip: collections.Counter[str] = collections.Counter()
        self.admitted = 0
        self._counted: dict[Connection, str] = {}  # the IP each counted connection was counted under
        self._holding: set[Connection] = set()  # the connections holding one of max.connections' slots
        self.parked: collections.deque[Connection] = collections.deque()
        self._rate: Rate | None = None
        self._ip_rates: dict[str, Rate] = {}
        self.ip_quotas: dict[str, float] = {}
        self._overrides: tuple[str, dict[str, int]] = ("", {})
        self._head_until = 0.0  # when the head of the FIFO may be admitted (the rate's wait)
        self._head: Connection | None = None
        self._timer: asyncio.TimerHandle | None = None

    def _config(self, key: str) -> int:
        return int(self._current().values[key])

    def _window(self) -> tuple[int, int]:
        values = self._current().values
        return int(values["quota.window.num"]), int(values["quota.window.size.seconds"]) * 1000

    def limit_for(self, ip: str) -> int:
        raw = str(self._current().values["max.connections.per.ip.overrides"] or "")
        if raw != self._overrides[0]:
            self._overrides = (raw, parse_overrides(raw))
        return self._overrides[1].get(ip, self._config("max.connections.per.ip"))

    # -- the connection's life ----------------------------------------------------------------

    def on_connect(self, connection: Connection) -> None:
        """A new connection: admitted now, parked, or closed (before it is read)."""
        ip = connection.client_host
        limit = self.limit_for(ip)
        if self.per_ip[ip] >= limit:
            connection.close(
                f"{ip} already has the maximum of {limit} connections (max.connections.per.ip)", abort=True
            )
            return
        self.per_ip[ip] += 1
        self._counted[connection] = ip
        if not self.parked and self.admitted < self._config("max.connections") and not self._rate_limited():
            self._admit(connection)
            return
        if len(self.parked) >= PARKED_MAX:
            connection.close(
                f"{PARKED_MAX} connections already wait for max.connections; try later", abort=True
            )
            return
        connection.park()
        self.parked.append(connection)
        self._drain()

    def on_close(self, connection: Connection) -> None:
        ip = self._counted.pop(connection, None)
        if ip is None:
            return
        self.per_ip[ip] -= 1
        if self.per_ip[ip] <= 0:
            del self.per_ip[ip]
        if connection in self._holding:
            self._holding.discard(connection)
            self.admitted -= 1
        else:
            with contextlib.suppress(ValueError):
                self.parked.remove(connection)
        if self.parked:
            self._drain()

    # -- admission ----------------------------------------------------------------------------

    def _rate_limited(self) -> bool:
        """Whether the broker-wide creation rate makes the next connection wait (recorded if not)."""
        bound = self._config("max.connection.creation.rate")
        if bound >= INT_MAX:
            return False
        wait = self._record(bound)
        if wait:
            self._head_until = time.monotonic() + wait / 1000
            return True
        return False

    def _record(self, bound: float) -> int:
        samples, window_ms = self._window()
        if self._rate is None or (self._rate.n, self._rate.window_ms) != (samples, window_ms):
            self._rate = Rate(samples, window_ms)
        now_ms = time.monotonic() * 1000
        self._rate.record(1.0, now_ms)
        return self._rate.throttle_ms(bound, now_ms, window_ms)

    def _drain(self) -> None:
        """Admit parked connections in order while a slot is free and the rate allows."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        while self.parked:
            if self.admitted >= self._config("max.connections"):
                return  # a close calls again
            head = self.parked[0]
            now = time.monotonic()
            if head is not self._head:
                self._head = head
                bound = self._config("max.connection.creation.rate")
                if bound < INT_MAX and self._head_until <= now:
                    wait = self._record(bound)
                    self._head_until = now + wait / 1000
            if self._head_until > now:
                loop = asyncio.get_running_loop()
                self._timer = loop.call_later(self._head_until - now, self._drain)
                return
            self.parked.popleft()
            self._head = None
            self._admit(head)

    def _admit(self, connection: Connection) -> None:
        self.admitted += 1
        self._holding.add(connection)
        assert self.admitted == len(self._holding), "the admitted count is the slots held"
        ip = self._counted.get(connection, "")
        rate = self.ip_quotas.get(ip, self.ip_quotas.get(DEFAULT))
        if rate is not None:
            wait = self._record_ip(ip, rate)
            if wait:
                # Kafka: ConnectionThrottledException, the socket closed after the throttle time.
                connection.park()
                asyncio.get_running_loop().call_later(
                    wait / 1000,
                    connection.close,
                    f"connection_creation_rate={rate:g}/s exceeded for {ip}",
                    True,
                )
                return
        connection.unpark()

    def _record_ip(self, ip: str, bound: float) -> int:
        samples, window_ms = self._window()
        rate = self._ip_rates.get(ip)
        if rate is None:
            if len(self._ip_rates) > 100_000:
                self._ip_rates.clear()
            rate = self._ip_rates[ip] = Rate(samples, window_ms)
        now_ms = time.monotonic() * 1000
        rate.record(1.0, now_ms)
        return rate.throttle_ms(bound, now_ms, window_ms)

    def set_ip_quotas(self, quotas: dict[str, float]) -> None:
        self.ip_quotas = dict(quotas)
