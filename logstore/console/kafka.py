"""The console's side of the cluster: logstore's client for one principal, and its errors as pages.

:class:`Clients` holds an AdminClient and (made on first use) a Producer for one
client config; consumers for a search or an export are made per request and
closed after it. Every blocking call runs off the event loop through
:func:`blocking`, bounded by :data:`CALL_TIMEOUT_S`. A failed call becomes a
:class:`ConsoleError` whose message names what was asked, the broker's error
and what to do, and whose status says who is at fault (403 for the
principal's ACLs, 404 for a topic or group that does not exist, 400 for a bad
value, 502 for a cluster that does not answer).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from logstore.client import Consumer, KafkaException, Producer
from logstore.client.admin import AdminClient
from logstore.errors import LogstoreError

T = TypeVar("T")

CALL_TIMEOUT_S = 15.0
"""The longest the console waits for one answer of the cluster."""


class ConsoleError(LogstoreError):
    """A request the console cannot serve: ``status`` for the HTTP answer, the message for the page."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


_STATUS_BY_NAME = {
    "UNKNOWN_TOPIC_OR_PART": 404,
    "UNKNOWN_TOPIC_OR_PARTITION": 404,
    "GROUP_ID_NOT_FOUND": 404,
    "_UNKNOWN_TOPIC": 404,
    "_UNKNOWN_PARTITION": 404,
    "_AUTHENTICATION": 401,
    "SASL_AUTHENTICATION_FAILED": 401,
    "_TIMED_OUT": 502,
    "_TRANSPORT": 502,
    "_ALL_BROKERS_DOWN": 502,
    "REQUEST_TIMED_OUT": 502,
    "NON_EMPTY_GROUP": 409,
    "TOPIC_ALREADY_EXISTS": 409,
    "UNKNOWN_MEMBER_ID": 409,
}

_HINTS = {
    403: "ask an administrator for an ACL that allows it (logstore acls add ...), or log in as another user",
    404: "check the name, or reload the list",
    502: "check that the cluster is up and reachable from the console (--bootstrap-server)",
    409: "",
}


def status_of(name: str) -> int:
    """The HTTP status for a Kafka error name."""
    if name.endswith("_AUTHORIZATION_FAILED"):
        return 403
    return _STATUS_BY_NAME.get(name, 400)


def from_exception(what: str, exc: BaseException) -> ConsoleError:
    """``exc`` (a KafkaException, a bad argument, a timeout) as a ConsoleError about ``what``."""
    if isinstance(exc, ConsoleError):
        return exc
    if isinstance(exc, KafkaException) and exc.args and hasattr(exc.args[0], "name"):
        error = exc.args[0]
        name = error.name()
        status = status_of(name)
        hint = _HINTS.get(status, "")
        reason = error.str()
        message = f"{what}: the cluster answered {name} ({reason})"
        if status == 403:
            message = f"{what}: not allowed: the broker answered {name} ({reason})"
        return ConsoleError(message + (f"; {hint}" if hint else ""), status)
    if isinstance(exc, TimeoutError | asyncio.TimeoutError):
        return ConsoleError(f"{what}: no answer within {CALL_TIMEOUT_S:g} s; {_HINTS[502]}", 502)
    if isinstance(exc, ValueError | TypeError):
        return ConsoleError(f"{what}: {exc}", 400)
    return ConsoleError(f"{what}: {type(exc).__name__}: {exc}", 500)


WORKERS = 16
"""Threads for the client's blocking calls (the event loop never waits on the cluster)."""
_EXECUTOR = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="logstore-console")


async def blocking(what: str, fn: Callable[[], T], timeout: float = CALL_TIMEOUT_S) -> T:
    """``fn()`` on a worker thread, at most ``timeout`` seconds; its failure as a ConsoleError."""
    try:
        return await asyncio.wait_for(asyncio.get_running_loop().run_in_executor(_EXECUTOR, fn), timeout)
    except Exception as e:
        raise from_exception(what, e) from None


def result(future: Future[T], timeout: float = CALL_TIMEOUT_S) -> T:
    """An admin future's result (on a worker thread: see :func:`blocking`)."""
    return future.result(timeout)


class Clients:
    """logstore's client for one principal: an AdminClient, a Producer made on first use, consumers on demand."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.config = dict(config)
        self.config.setdefault("socket.timeout.ms", int(CALL_TIMEOUT_S * 1000))
        self.admin = AdminClient(dict(self.config))
        self._producer: Producer | None = None
        self._lock = threading.Lock()
        self._cache: dict[str, tuple[float, Any]] = {}

    def cached(self, key: str, ttl: float, fn: Callable[[], T]) -> T:
        """``fn()``, or its answer of less than ``ttl`` seconds ago (per principal: what one may see,
        another may not). For figures a page may show a few seconds old (log directory sizes)."""
        now = time.monotonic()
        with self._lock:
            hit = self._cache.get(key)
        if hit is not None and now - hit[0] < ttl:
            value: T = hit[1]
            return value
        value = fn()
        with self._lock:
            self._cache[key] = (time.monotonic(), value)
        return value

    def producer(self) -> Producer:
        with self._lock:
            if self._producer is None:
                self._producer = Producer({**self.config, "linger.ms": 0, "message.timeout.ms": 10_000})
            return self._producer

    def consumer(self) -> Consumer:
        """A consumer with no group (assign only; nothing committed); the caller closes it."""
        return Consumer({**self.config, "enable.auto.commit": False, "enable.partition.eof": False})

    def close(self) -> None:
        with self._lock:
            producer, self._producer = self._producer, None
        if producer is not None:
            producer.close(5)
        self.admin.close()
