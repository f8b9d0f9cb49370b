"""The ``/metrics`` endpoint: a minimal HTTP/1.1 server on the broker's event loop.

``metrics.listener=http://host:port`` (empty: off, the default) serves
``GET /metrics`` with :meth:`BrokerMetrics.exposition` (Prometheus text format
0.0.4); ``GET /`` answers a one-line pointer, other paths 404, other methods
405. Each connection serves one request and closes (``Connection: close``):
Prometheus reconnects at each scrape, which at one scrape per second or
slower costs nothing worth a keep-alive implementation. A request's head must
arrive within :data:`READ_TIMEOUT_S` and fit :data:`HEAD_MAX_BYTES`, else the
connection is dropped (400 for an oversized or malformed head). The metric
families are read on the event loop, so they see the broker's state between
two requests' handling, never in the middle of one; the text is formatted in
the default executor (:meth:`BrokerMetrics.exposition_async`).

Not prometheus_client's ``start_http_server``: that one serves from a thread,
which would read the broker's state while the loop changes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging

from logstore.broker.metrics.broker_metrics import BrokerMetrics
from logstore.errors import InvalidConfigError

_log = logging.getLogger("logstore.broker")

READ_TIMEOUT_S = 10.0
HEAD_MAX_BYTES = 16 * 1024
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

class MetricsServer:
    """Serves ``/metrics`` of one :class:`BrokerMetrics` (see the module doc)."""

    def __init__(self, metrics: BrokerMetrics) -> None:
        self.metrics = metrics
        self.bound: tuple[str, int] | None = None
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int) -> None:
        """Listen; InvalidConfigError naming the key when the address cannot be bound."""
        try:
            self._server = await asyncio.start_server(
                self._serve, host, port, reuse_address=True, limit=HEAD_MAX_BYTES
            )
        except OSError as e:
            raise InvalidConfigError(
                f"metrics.listener: cannot listen on http://{host}:{port}: {e.strerror or e}; "
                "pick another port or leave metrics.listener empty"
            ) from None
        address = self._server.sockets[0].getsockname()
        self.bound = (address[0], address[1])
        _log.info("serving metrics on http://%s:%d/metrics", *self.bound)

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._clients):
                task.cancel()
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 5)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._clients.add(task)
        try:
            status, body, content_type = await self._answer(reader)
            head = (
                f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
            )
            writer.write(head.encode("ascii") + body)
            await asyncio.wait_for(writer.drain(), READ_TIMEOUT_S)
        except (TimeoutError, ConnectionError, OSError, asyncio.IncompleteReadError):
            pass
        except asyncio.CancelledError:
            pass
        except Exception:
            _log.exception("metrics endpoint: answering a request failed")
        finally:
            if task is not None:
                self._clients.discard(task)
            writer.close()

    async def _answer(self, reader: asyncio.StreamReader) -> tuple[str, bytes, str]:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), READ_TIMEOUT_S)
        except asyncio.LimitOverrunError:
            return "400 Bad Request", b"request head too large\n", "text/plain"
        if len(head) > HEAD_MAX_BYTES:
            return "400 Bad Request", b"request head too large\n", "text/plain"
        parts = head.split(b"\r\n", 1)[0].split()
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/"):
            return "400 Bad Request", b"malformed request line\n", "text/plain"
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if method != b"GET":
            return "405 Method Not Allowed", b"only GET is served\n", "text/plain"
        if target == b"/metrics":
            return "200 OK", await self.metrics.exposition_async(), CONTENT_TYPE
        if target == b"/":
            return "200 OK", b"logstore broker metrics: GET /metrics\n", "text/plain"
        return "404 Not Found", b"not found; metrics are at /metrics\n", "text/plain"
