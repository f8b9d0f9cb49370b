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

This module is the one place that sees both the client and the broker. The
client never imports it: it registers itself as the ``embedded`` transport
(``logstore.client.cluster.register_transport``) when imported, and the
package names it in its ``logstore.transports`` entry points, which the client
loads when a config first asks for ``embedded://``.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import threading
from concurrent.futures import Future
from typing import Any, ClassVar

from logstore.broker.apis import registry
from logstore.broker.broker import Broker
from logstore.broker.config.broker_config import BrokerConfig
from logstore.client.cluster import EMBEDDED, register_transport
from logstore.client.config import ClientConfig, ConfigError
from logstore.client.connection import decode_response, negotiated
from logstore.client.errors import KafkaException, local
from logstore.protocol import DeferredFrame, FileRegion
from logstore.protocol.requests import encode_request
from logstore.storage.store import Store

PREFIX = "embedded://"
# The embedded broker's settings where they differ from a broker's defaults. A group's first
# join waits group.initial.rebalance.delay.ms for more members (3 s in Kafka, to spare a
# rebalance when a fleet of consumers starts); in one process that is a 3 s stall at the
# first subscribe, and Kafka's own advice outside production is 0.
EMBEDDED_DEFAULTS = {"group.initial.rebalance.delay.ms": "0"}


class _Peer:
    """What a handler reads of its connection: the peer's name, and whether it has gone."""

    peer = "embedded:0"
    closed = False
    listener_name = "PLAINTEXT"  # Metadata answers with this listener's endpoints


class EmbeddedBroker:
    """A broker with no listener on an event loop thread, for the clients of one process."""

    _registry: ClassVar[dict[str, EmbeddedBroker]] = {}
    _registry_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(
        self, key: str, data_dir: str | None, store: Store | None, overrides: dict[str, Any]
    ) -> None:
        self.key = key
        self.users = 0
        self.closing = False
        config = BrokerConfig.from_dict(
            {"listeners": "PLAINTEXT://127.0.0.1:0", **EMBEDDED_DEFAULTS, **overrides}
        )
        self.loop = asyncio.new_event_loop()
        self.broker = Broker(config, data_dir=data_dir if store is None else store.data_dir, store=store)
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
        except BaseException as e:
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


class EmbeddedTransport:
    """Connections to the embedded broker of one data directory (or of a Store handed in)."""

    def __init__(self, config: ClientConfig) -> None:
        store = config["logstore.store"]
        servers = config["bootstrap.servers"]
        if store is not None:
            if not isinstance(store, Store):
                raise ConfigError(f"logstore.store must be a logstore Store, not {type(store).__name__}")
            key, data_dir = f"store:{id(store)}", None
        else:
            data_dir = embedded_path(servers)
            key = data_dir
        self.client_id = config["client.id"]
        self.embedded = EmbeddedBroker.acquire(key, data_dir, store, {})
        self._closed = False

    def bootstrap(self) -> list[tuple[str, int]]:
        return [("embedded", 0)]

    def open(self, node_id: int, host: str, port: int, setup_timeout: float | None = None) -> EmbeddedConnection:
        return EmbeddedConnection(self.embedded, node_id, self.client_id)

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.embedded.release()


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


register_transport(EMBEDDED, transport)


__all__ = ["EmbeddedBroker", "EmbeddedConnection", "EmbeddedTransport", "transport"]
