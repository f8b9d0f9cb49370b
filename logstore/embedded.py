"""The in-process transport: logstore's client against a Store in this process, with no sockets.

``bootstrap.servers = "embedded:///path/to/data"`` (or ``logstore.store``
set to an open :class:`~logstore.storage.store.Store`) gives a client an
:class:`EmbeddedTransport`. Behind it stands one :class:`EmbeddedBroker` per
data directory in the process, shared by every client that names it and
closed when the last one closes: the broker's own request handlers and group
coordinator, on an event loop of its own thread, with no listener. A
request is the same frame a socket would carry, handed to
``Broker.handle``; the answer is the same frame, file regions read with
``pread`` instead of ``sendfile``. So the client code above the transport
is the TCP client's, byte for byte, and so are the semantics: groups,
commits, idempotence, long-polling fetches.

One directory, many processes: the process that takes the directory's lock
serves it (an :class:`EmbeddedBroker`) to its own clients in-process and to
other processes on a Unix-domain socket in the directory (``.logstore.sock``,
owner-only); in a process that cannot take the lock, ``embedded:///path``
connects there (a :class:`UnixConnection`: the TCP client's connection over
AF_UNIX, every node id the serving broker) and a thread tries the lock every
:data:`LOCK_POLL_S`. When the serving process exits or dies, one of the
waiting processes takes the lock, opens the Store (recovering it as after a
crash) and serves; the clients' connections fail and their normal
reconnect-and-retry path finds the new server. docs/embedded.md says more.

This module is the one place that sees both the client and the broker. The
client never imports it: it registers itself as the ``embedded`` transport
(``logstore.client.cluster.register_transport``) when imported, and the
package names it in its ``logstore.transports`` entry points, which the client
loads when a config first asks for ``embedded://``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import os
import socket
import threading
import time
from concurrent.futures import Future
from typing import Any, ClassVar

from logstore.broker.apis import registry
from logstore.broker.broker import Broker, unix_address
from logstore.broker.config.broker_config import BrokerConfig
from logstore.client.cluster import EMBEDDED, register_transport
from logstore.client.config import ClientConfig, ConfigError
from logstore.client.connection import BrokerConnection, Connection, decode_response, negotiated
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.protocol import DeferredFrame, FileRegion
from logstore.protocol.requests import encode_request
from logstore.storage.log_manager import try_lock_directory
from logstore.storage.store import Store

_log = logging.getLogger("logstore.embedded")

PREFIX = "embedded://"
# The embedded broker's settings where they differ from a broker's defaults. A group's first
# join waits group.initial.rebalance.delay.ms for more members (3 s in Kafka, to spare a
# rebalance when a fleet of consumers starts); in one process that is a 3 s stall at the
# first subscribe, and Kafka's own advice outside production is 0.
EMBEDDED_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}
# The serving process's socket, inside the data directory.
SOCKET_NAME = ".logstore.sock"
# How often a process that does not serve its directory tries to take the lock (the takeover's
# wait after the serving process is gone, before the Store's recovery).
LOCK_POLL_S = 0.05
# Between two attempts to reach the serving process (one is starting, or taking over).
CONNECT_RETRY_S = 0.02
# Incremented in a forked child: connections made before it refuse to serve there.
_forks = 0


class _Peer:
    """What a handler reads of its connection: the peer's name, and whether it has gone."""

    peer = "embedded:0"
    client_host = "localhost"
    closed = False
    listener_name = "PLAINTEXT"  # Metadata answers with this listener's endpoints


class EmbeddedBroker:
    """A broker with no listener on an event loop thread, for the clients of one process."""

    _registry: ClassVar[dict[str, EmbeddedBroker]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self,
        key: str,
        data_dir: str | None,
        store: Store | None,
        overrides: dict[str, Any],
        *,
        lock_fd: int | None = None,
        unix_path: str | None = None,
    ) -> None:
        """``lock_fd``: the directory's lock, taken by the caller; ``unix_path``: also serve other
        processes on a Unix-domain socket there."""
        self.key = key
        self.users = 0
        self.closing = False
        self.forked = False
        self.unix_path = unix_path
        config = BrokerConfig.from_dict(
            {"listeners": "PLAINTEXT://127.0.0.1:0", **EMBEDDED_DEFAULTS, **overrides}
        )
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(
            config, data_dir=data_dir if store is None else store.data_dir, store=store, lock_fd=lock_fd
        )
        self.peer = _Peer()
        ready: Future[None] = Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"logstore-embedded-{key}", daemon=True
        )
        self._thread.start()
        ready.result()
        self.ranges = {api.key: (api.min_version, api.max_version) for api in _registry().values()}

    def _run(self, ready: Future[None]) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.broker.start(listen=False))
            if self.unix_path is not None:
                self.loop.run_until_complete(self.broker.listen_unix(self.unix_path))
        except BaseException as e:
            with contextlib.suppress(BaseException):
                self.loop.run_until_complete(self.broker.close())  # the Store and its lock go
            ready.set_exception(e)
            return
        ready.set_result(None)
        self.loop.run_forever()

    @classmethod
    def acquire(
        cls, key: str, data_dir: str | None, store: Store | None, overrides: dict[str, Any]
    ) -> EmbeddedBroker:
        with cls._registry_lock:
            embedded = cls._registry.get(key)
            if embedded is None:
                embedded = cls._registry[key] = cls(key, data_dir, store, overrides)
            embedded.users += 1
            return embedded

    def release(self) -> None:
        with self._registry_lock:
            self.users -= 1
            if self.users > 0:
                return
            del self._registry[self.key]
        self.close()

    def close(self) -> None:
        """Stop serving: the broker, its socket and the Store close, the directory's lock goes."""
        if self.forked:
            return
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)
        self.loop.close()

    async def _shutdown(self) -> None:
        """Close the broker, then settle every request still being served (a parked long-poll
        Fetch, say) before the loop stops: cancelled, so none runs on against the closed Store."""
        self.closing = True
        await self.broker.close()
        current = asyncio.current_task()
        pending = [task for task in asyncio.all_tasks() if task is not current]
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)

    def submit(self, frame: bytes) -> Future[memoryview | None]:
        return asyncio.run_coroutine_threadsafe(self._serve(frame), self.loop)

    async def _serve(self, frame: bytes) -> memoryview | None:
        """The answer to ``frame`` without its size (correlation id, header, body), read-only.

        Built in one buffer: file regions are read straight into their place (one copy of the
        segment's bytes, where a socket would have had sendfile).
        """
        if self.closing:
            raise ConnectionError("the embedded broker is closing")
        chunks = await self.broker.handle(memoryview(frame)[4:], self.peer)
        if chunks is None:
            return None
        parts: list[bytes | bytearray | FileRegion] = []
        for chunk in chunks:
            if isinstance(chunk, DeferredFrame):
                await asyncio.sleep(0)  # the batched append this answer waits on runs first
                parts.append(chunk.resolve())
            else:
                parts.append(chunk)
        out = bytearray(sum(len(part) for part in parts))
        view = memoryview(out)
        at = 0
        for part in parts:
            size = len(part)
            if isinstance(part, FileRegion):
                try:
                    read = os.preadv(part.fd, [view[at : at + size]], part.position)
                finally:
                    part.close()
                if read != size:
                    raise ConnectionError(f"segment shrank while reading ({read} of {size} bytes)")
            else:
                view[at : at + size] = part
            at += size
        return view[4:].toreadonly()


class EmbeddedConnection:
    """The Connection protocol over an :class:`EmbeddedBroker`: every node id is the same broker."""

    stale = False  # no session to renew

    def __init__(self, embedded: EmbeddedBroker, node_id: int, client_id: str) -> None:
        self.embedded = embedded
        self.node_id = node_id
        self.client_id = client_id
        self.closed = False
        self._correlation = itertools.count(1)
        self._chosen: dict[int, int] = {}

    def version(self, api_key: int) -> int:
        chosen = self._chosen.get(api_key)
        if chosen is None:
            chosen = self._chosen[api_key] = negotiated(api_key, self.embedded.ranges, "the embedded broker")
        return chosen

    def supports(self, api_key: int) -> bool:
        return api_key in self.embedded.ranges

    def send(
        self,
        api_key: int,
        fields: dict[str, Any],
        *,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Future[Any]:
        result: Future[Any] = Future()
        if self.closed:
            result.set_exception(KafkaException(local("_DESTROY", "the client is closed")))
            return result
        if self.embedded.forked:
            result.set_exception(KafkaException(local("_FATAL", FORKED)))
            return result
        version = self.version(api_key)
        frame = encode_request(api_key, version, next(self._correlation) & 0x7FFFFFFF, self.client_id, fields)

        def settle(done: Future[memoryview | None]) -> None:
            try:
                answer = done.result()
            except BaseException as e:  # the broker closed under us, or a handler failed
                result.set_exception(KafkaException(local("_TRANSPORT", f"embedded broker: {e}")))
                return
            if answer is None or not expect_response:
                result.set_result(None)
                return
            try:
                result.set_result(decode_response(api_key, version, answer, "the embedded broker"))
            except KafkaException as e:
                result.set_exception(e)

        self.embedded.submit(frame).add_done_callback(settle)
        return result

    def close(self, error: Any = None) -> None:
        self.closed = True

    def retire(self) -> None:
        self.close()


FORKED = (
    "this client was opened before the process was forked; its threads and connections stayed in "
    "the parent: make a new client in the child (or start children with multiprocessing's 'spawn')"
)


class UnixConnection(BrokerConnection):
    """The TCP client's connection (:class:`~logstore.client.connection.BrokerConnection`) over
    the Unix-domain socket of the process serving a data directory (``host`` is its path)."""

    def _connect(self, timeout: float) -> socket.socket:
        self.where = f"unix:{self.host}"
        self.forks = _forks
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(max(timeout, 0.001))
            with unix_address(self.host) as name:
                sock.connect(name)
        except OSError as e:
            sock.close()
            raise KafkaException(
                local(
                    "_TRANSPORT",
                    f"{self.where}: connect failed ({e}): the process serving this data directory "
                    "is gone or starting; another takes it over within about a second",
                )
            ) from None
        sock.settimeout(None)
        return sock

    def send(
        self,
        api_key: int,
        fields: dict[str, Any],
        *,
        expect_response: bool = True,
        timeout: float | None = None,
    ) -> Future[Any]:
        if self.forks != _forks:
            failed: Future[Any] = Future()
            failed.set_exception(KafkaException(local("_FATAL", FORKED)))
            return failed
        return super().send(api_key, fields, expect_response=expect_response, timeout=timeout)


class SharedDirectory:
    """One data directory as this process sees it (see the module's docstring): served here by an
    :class:`EmbeddedBroker` while this process holds the directory's lock, else reached through
    the serving process's socket while a thread waits to take the lock over."""

    _registry: ClassVar[dict[str, SharedDirectory]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        self.socket_path = os.path.join(data_dir, SOCKET_NAME)
        self.users = 0
        self.serving: EmbeddedBroker | None = None
        self.forked = False
        self._stop = threading.Event()
        self._waiter: threading.Thread | None = None
        os.makedirs(data_dir, exist_ok=True)
        if not self._try_serve():
            self._waiter = threading.Thread(
                target=self._wait, name=f"logstore-takeover-{data_dir}", daemon=True
            )
            self._waiter.start()

    def _try_serve(self) -> bool:
        """Take the directory's lock if it is free, and serve the directory: True if this process
        now serves it."""
        fd = try_lock_directory(self.data_dir)
        if fd is None:
            return False
        started = time.monotonic()
        _log.info("took the lock of %s; opening it", self.data_dir)
        serving = EmbeddedBroker(
            self.data_dir, self.data_dir, None, {}, lock_fd=fd, unix_path=self.socket_path
        )
        with EmbeddedBroker._registry_lock:  # for the tests and tools that look a broker up
            EmbeddedBroker._registry[self.data_dir] = serving
        self.serving = serving
        _log.info("serving %s to other processes (opened in %.3f s)", self.data_dir, time.monotonic() - started)
        return True

    def _wait(self) -> None:
        while not self._stop.wait(LOCK_POLL_S):
            try:
                if self._try_serve():
                    return
            except Exception:  # the Store failed to open: said, and tried again
                _log.exception("taking over %s failed; trying again", self.data_dir)
                self._stop.wait(1.0)

    @classmethod
    def acquire(cls, data_dir: str) -> SharedDirectory:
        with cls._registry_lock:
            shared = cls._registry.get(data_dir)
            if shared is None:
                shared = cls._registry[data_dir] = cls(data_dir)
            shared.users += 1
            return shared

    def release(self) -> None:
        with self._registry_lock:
            self.users -= 1
            if self.users > 0:
                return
            del self._registry[self.data_dir]
        self._stop.set()
        if self._waiter is not None:
            self._waiter.join(60)  # a takeover under way ends first (the Store opened, then closed)
        serving = self.serving
        if serving is not None:
            with EmbeddedBroker._registry_lock:
                if EmbeddedBroker._registry.get(self.data_dir) is serving:
                    del EmbeddedBroker._registry[self.data_dir]
            serving.close()

    def open(self, node_id: int, client_id: str, config: ClientConfig, setup_timeout: float) -> Connection:
        """A connection to whoever serves the directory: in-process here, else the socket, tried
        until ``setup_timeout`` while the serving process starts or is being replaced."""
        deadline = time.monotonic() + setup_timeout
        for _ in range(1 << 20):  # each pass waits CONNECT_RETRY_S, or returns, or raises
            if self.forked:
                raise KafkaException(local("_FATAL", FORKED))
            serving = self.serving
            if serving is not None:
                return EmbeddedConnection(serving, node_id, client_id)
            try:
                return UnixConnection(
                    node_id, self.socket_path, 0, client_id, max(deadline - time.monotonic(), 0.05),
                    config.seconds("request.timeout.ms"), None,
                )  # fmt: skip
            except KafkaException as e:
                if e.error.code() != KafkaError._TRANSPORT or time.monotonic() >= deadline:  # type: ignore[attr-defined]
                    raise
            time.sleep(CONNECT_RETRY_S)
        raise KafkaException(local("_TRANSPORT", f"{self.socket_path}: no serving process"))


class EmbeddedTransport:
    """Connections to the embedded broker of one data directory (or of a Store handed in): see
    :class:`SharedDirectory` for a directory several processes share."""

    def __init__(self, config: ClientConfig) -> None:
        store = config["logstore.store"]
        servers = config["bootstrap.servers"]
        self.config = config
        self.client_id = config["client.id"]
        self.embedded: EmbeddedBroker | None = None
        self.shared: SharedDirectory | None = None
        if store is not None:
            if not isinstance(store, Store):
                raise ConfigError(f"logstore.store must be a logstore Store, not {type(store).__name__}")
            self.embedded = EmbeddedBroker.acquire(f"store:{id(store)}", None, store, {})
        else:
            self.shared = SharedDirectory.acquire(embedded_path(servers))
        self._closed = False

    def bootstrap(self) -> list[tuple[str, int]]:
        return [("embedded", 0)]

    def open(self, node_id: int, host: str, port: int, setup_timeout: float | None = None) -> Connection:
        if self.embedded is not None:
            return EmbeddedConnection(self.embedded, node_id, self.client_id)
        assert self.shared is not None
        setup = self.config.seconds("socket.connection.setup.timeout.ms")
        return self.shared.open(
            node_id, self.client_id, self.config, setup if setup_timeout is None else min(setup, setup_timeout)
        )

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            if self.embedded is not None:
                self.embedded.release()
            if self.shared is not None:
                self.shared.release()


def embedded_path(servers: str) -> str:
    """The data directory an ``embedded:///path`` address names.

    >>> embedded_path("embedded:///tmp/data")
    '/tmp/data'
    """
    if not servers.startswith(PREFIX) or len(servers) <= len(PREFIX):
        raise ConfigError(f"an embedded address is 'embedded:///absolute/path/to/data', not {servers!r}")
    path = servers[len(PREFIX) :]
    return os.path.abspath(path)


def transport(config: ClientConfig) -> EmbeddedTransport:
    return EmbeddedTransport(config)


def _registry() -> dict[int, Any]:
    return registry()


# Kept for ever in a forked child: dropping them would run finalizers on the parent's objects.
_forked_copies: list[Any] = []


def _after_fork_in_child() -> None:
    """In a forked child: the parent's brokers, sockets and waiting threads are not here. Their
    copies refuse all use (:data:`FORKED`); the inherited sockets close (a child holding the
    listening socket, or a connection, would keep clients waiting on a parent that died); a new
    client in the child starts afresh (and reaches the parent through the socket). The Store's
    own handler (storage/log_manager.py) closes the inherited lock."""
    global _forks
    _forks += 1
    for shared in list(SharedDirectory._registry.values()):
        shared.forked = True
        _forked_copies.append(shared)
    for embedded in list(EmbeddedBroker._registry.values()):
        embedded.forked = True
        _forked_copies.append(embedded)
        for fd in embedded.broker.socket_fds():
            with contextlib.suppress(OSError):
                os.close(fd)
    SharedDirectory._registry = {}
    EmbeddedBroker._registry = {}
    SharedDirectory._registry_lock = threading.Lock()
    EmbeddedBroker._registry_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
register_transport(EMBEDDED, transport)


__all__ = [
    "EmbeddedBroker", "EmbeddedConnection", "EmbeddedTransport", "SharedDirectory", "UnixConnection", "transport",
]  # fmt: skip
