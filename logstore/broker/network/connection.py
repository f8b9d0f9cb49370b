"""One client connection: request frames in, answers out in request order, requests pipelined.

Frames are read as they arrive (protocol/framing.py) and served one after
another by :meth:`Connection._serve` through the broker's dispatcher
(dispatch.py). A request is *started* in arrival order, and whatever it
changes (an append, a join, a commit) is changed before the next one starts;
a request whose handler then waits (acks=all replication, a long-poll Fetch,
a JoinGroup's rebalance; context.py's ``Deferred``) no longer holds the ones
behind it: its answer is a task, queued in :attr:`Connection._answers`, and
:meth:`Connection._send_answers` writes the answers in request order as the
protocol requires (Redpanda pipelines the same way; Kafka mutes the channel
until each answer is sent). docs/broker.md, "Pipelining", says which requests
overlap and why ordering still holds.

Bounds: at most :data:`PIPELINED_MAX` answers (and :data:`QUEUED_BYTES_MAX`
bytes of their requests) wait per connection; past either the connection
reads no further request until the oldest is answered. A frame larger than
``socket.request.max.bytes``, a negative size, an unknown API or version,
or a body kio cannot decode closes that connection with a log line; other
connections are not affected. A connection idle for
``connections.max.idle.ms`` (a client stalled mid-frame included) is closed.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import logging
import os
import socket
import struct
import time
import typing
from collections.abc import MutableSet
from typing import Any, Protocol

from logstore.broker.config.broker_config import BrokerConfig
from logstore.broker.dispatch import Answer, Dispatcher
from logstore.broker.metrics.broker_metrics import BrokerMetrics
from logstore.broker.quotas.connection_limits import ConnectionLimits
from logstore.protocol import DeferredFrame, FileRegion, ProtocolError
from logstore.protocol.framing import Frame, FrameReader, FrameSizeError
from logstore.security import ANONYMOUS, KafkaPrincipal
from logstore.security.listeners import BrokerSecurity
from logstore.security.sasl import SaslSession
from logstore.storage.log_manager import LogManager

_log = logging.getLogger("logstore.broker")

_QUEUEABLE = (bytes, bytearray, DeferredFrame)  # bytearrays: fresh ResponseBuffer frames

# Pause reading from a client once this many request bytes wait unserved (and start no more
# requests while this many bytes of requests wait for their answers).
QUEUED_BYTES_MAX = 64 * 1024 * 1024

# At most this many answers wait per connection (Kafka's queued.max.requests is 500 per broker).
PIPELINED_MAX = 1000

# Why a connection's reading is paused (Connection._holds, a bit set): too many request
# bytes queued, muted by a quota (KIP-219), parked by a connection limit (connection_limits.py).
_QUEUE_FULL, _MUTED, _PARKED = 1, 2, 4


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


def unix_peer_pid(transport: asyncio.BaseTransport) -> int:
    """The process id at the other end of a Unix-domain socket (SO_PEERCRED; -1 if unknown)."""
    sock = transport.get_extra_info("socket")
    try:
        creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        return int(struct.unpack("3i", creds)[0])
    except (AttributeError, OSError, struct.error):
        return -1


class LoopSendfile:
    """Whether the broker's event loop has a zero-copy ``loop.sendfile``: asyncio's own loops
    have it; uvloop raises NotImplementedError, learnt at the first fetch and kept."""

    def __init__(self) -> None:
        self.works = True

    def lacking(self) -> None:
        self.works = False


class Host(Protocol):
    """What a connection uses of the broker that accepted it (the Broker)."""

    @property
    def sendfile(self) -> LoopSendfile: ...

    @property
    def config(self) -> BrokerConfig: ...

    @property
    def connections(self) -> MutableSet[Connection]:
        """The open connections (the idle reaper and close walk them)."""
        ...

    @property
    def metrics(self) -> BrokerMetrics: ...

    @property
    def security(self) -> BrokerSecurity: ...

    @property
    def connection_limits(self) -> ConnectionLimits: ...

    @property
    def dispatcher(self) -> Dispatcher: ...

    @property
    def log_manager(self) -> LogManager:
        """The logs (a segment that cannot be read for a fetch fails its log directory)."""
        ...


class Connection(asyncio.BufferedProtocol):
    """One client connection: frames in (see framing.py), responses out in request order."""

    def __init__(
        self, broker: Host, listener_name: str = "PLAINTEXT", security_protocol: str = "PLAINTEXT"
    ) -> None:
        self.broker = broker
        self.transport: asyncio.Transport | None = None
        self.peer = "?"
        self.client_host = "?"
        self.listener_name = listener_name
        self.security_protocol = security_protocol
        self.principal: KafkaPrincipal = ANONYMOUS
        self.tls = False  # no zero-copy sendfile through TLS
        self.sasl: SaslSession | None = None  # set on SASL listeners (logstore/security/sasl.py)
        self.closed = False
        self.last_active = time.monotonic()
        self._serving = False  # a request is being started (decoded, handled up to its wait)
        self._reader = FrameReader(broker.config.socket_request_max_bytes)
        # Frames not yet served, oldest first. A list, not a deque: an idle connection's empty
        # list is 56 bytes where a deque allocates a 600-byte block (docs/quotas.md, idle cost).
        self._frames: list[Frame] = []
        self._queued = 0
        self._holds = 0  # _QUEUE_FULL | _MUTED | _PARKED
        # Quotas (client_quotas.py): the throttle of the request being served, and the mute's end.
        self._throttle_ms = 0
        self._throttle_after = True
        self._unmute: asyncio.Future[None] | None = None
        # The serving task's wait for frames: a future made only while it waits (an Event
        # would hold a waiter deque on every idle connection).
        self._waiter: asyncio.Future[None] | None = None
        # The transport's write buffer is over its high-water mark (pause_writing); a sender
        # waits for resume_writing on a future made only then.
        self._write_paused = False
        self._drained: asyncio.Future[None] | None = None
        # Responses not yet written (see _flush_pending); a DeferredFrame is encoded then.
        self._pending: list[bytes | bytearray | DeferredFrame] = []
        self._task: asyncio.Task[None] | None = None
        # Answers not yet written, in request order, each with its request's frame (released once
        # the answer is out) while a deferred answer is among them; None when there are none (an
        # idle connection holds no deque). :meth:`_send_answers` writes them.
        self._answers: collections.deque[tuple[Answer, Frame]] | None = None
        self._answers_bytes = 0
        self._sender: asyncio.Task[None] | None = None
        self._room: asyncio.Future[None] | None = None  # the serving task waits for a slot

    @property
    def busy(self) -> bool:
        """A request is being served or answered (the idle reaper leaves the connection alone)."""
        return self._serving or self._answers is not None

    # -- asyncio.Protocol --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = typing.cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        if isinstance(peer, tuple):
            self.peer, self.client_host = f"{peer[0]}:{peer[1]}", peer[0]
        else:  # a Unix-domain socket (the embedded store's other processes): named by their pid
            self.peer, self.client_host = f"localhost:pid={unix_peer_pid(transport)}", "localhost"
        self.broker.connections.add(self)
        self.broker.metrics.connection_opened(self.listener_name)
        if self.security_protocol != "PLAINTEXT":
            self.broker.security.on_connect(self, transport)
        self._task = asyncio.get_running_loop().create_task(self._serve())
        self.broker.connection_limits.on_connect(self)

    def get_buffer(self, sizehint: int) -> memoryview:
        return self._reader.get_buffer()

    def buffer_updated(self, nbytes: int) -> None:
        self.last_active = time.monotonic()
        try:
            frames = self._reader.buffer_updated(nbytes)
        except FrameSizeError as e:
            self.close(str(e), abort=True)
            return
        for frame in frames:
            self._frames.append(frame)
            self._queued += len(frame)
        if frames and self._waiter is not None:
            _resolve(self._waiter)
        if self._queued > QUEUED_BYTES_MAX and not self._holds & _QUEUE_FULL:
            self._hold(_QUEUE_FULL)

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.broker.connections.discard(self)
        self.broker.metrics.connection_closed(self.listener_name)
        self.broker.connection_limits.on_close(self)
        if self._unmute is not None:
            _resolve(self._unmute)
        if self._waiter is not None:
            _resolve(self._waiter)
        self._write_paused = False
        if self._drained is not None:
            _resolve(self._drained)
        self._drop_answers()

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None:
            _resolve(self._drained)

    # -- serving -----------------------------------------------------------

    async def _serve(self) -> None:
        """Start each request in arrival order; answer at once, or queue a deferred answer."""
        frame: Frame | None = None
        answer: Answer = None
        dispatch = self.broker.dispatcher.dispatch
        loop = asyncio.get_running_loop()
        try:
            while not self.closed:
                if not self._frames:
                    frame = answer = None  # an idle connection keeps neither its last request nor answer
                    waiter = self._waiter = loop.create_future()
                    try:
                        await waiter
                    finally:
                        self._waiter = None
                    continue
                if self._unmute is not None:  # a quota's mute holds the next request too
                    await self._unmute
                    continue
                frame = self._frames.pop(0)
                self._queued -= len(frame)
                if self._holds & _QUEUE_FULL and self._queued <= QUEUED_BYTES_MAX // 2:
                    self._release(_QUEUE_FULL)
                self._serving = True
                try:
                    if self.sasl is None:
                        answer = await dispatch(frame.data, self)
                    else:
                        answer = await self.sasl.serve(frame.data, self, dispatch)
                finally:
                    self._serving = False
                    self.last_active = time.monotonic()
                if self._answers is None and (answer is None or type(answer) is list):
                    try:
                        await self._answer_now(answer)
                    finally:
                        self._reader.release(frame)
                else:
                    await self._enqueue(answer, frame)
        except BaseException as e:
            self._closed_by(e)

    def _closed_by(self, e: BaseException) -> None:
        """Close the connection as the exception that ended its serving (or answering) calls for."""
        if isinstance(e, ProtocolError):
            self.close(str(e))
        elif isinstance(e, (ConnectionError, OSError)):
            self.close(f"connection error: {e}", abort=True)
        elif isinstance(e, asyncio.CancelledError):
            self.close("broker shutting down", abort=True, quiet=True)
        elif isinstance(e, Exception):
            _log.exception("unexpected error serving %s; closing the connection", self.peer, exc_info=e)
            self.close("internal error", abort=True, quiet=True)
        else:
            raise e

    async def _answer_now(self, chunks: list[Any] | None) -> None:
        """Write an answer with nothing queued before it, then apply a quota's throttle."""
        throttle_ms = self._throttle_ms
        if throttle_ms:
            self._throttle_ms = 0
            if not self._throttle_after:  # a client before KIP-219: the answer waits
                await self._mute(throttle_ms)
                throttle_ms = 0
        if chunks is None or self.closed:
            pass
        elif len(chunks) == 1 and type(chunks[0]) in _QUEUEABLE and not self._write_paused:
            chunk = chunks[0]
            if self._frames or self._pending or self._answers is not None or type(chunk) is DeferredFrame:
                self._queue(chunk)  # the common small answer, without _send's coroutine
            elif self.transport is not None and not self.transport.is_closing():
                # No request waits behind it to share a send: out now, without a loop pass.
                self.transport.write(chunk)
        else:
            await self._send(chunks)
        if throttle_ms:  # KIP-219: answered at once, then not read for the throttle time
            await self._mute(throttle_ms)

    async def _enqueue(self, answer: Answer, frame: Frame) -> None:
        """Queue ``answer`` behind the answers still waiting; wait while too many wait."""
        answers = self._answers
        if answers is None:
            answers = self._answers = collections.deque()
        if type(answer) is list:  # ready, behind a deferred one: keep no view of a reused buffer
            answer = [bytes(chunk) if isinstance(chunk, memoryview) else chunk for chunk in answer]
        answers.append((answer, frame))
        self._answers_bytes += len(frame)
        if self._sender is None:
            self._sender = asyncio.get_running_loop().create_task(self._send_answers())
        while (len(answers) >= PIPELINED_MAX or self._answers_bytes > QUEUED_BYTES_MAX) and not self.closed:
            room = self._room = asyncio.get_running_loop().create_future()
            try:
                await room
            finally:
                self._room = None

    async def _send_answers(self) -> None:
        """Write the queued answers in request order, each once it is ready."""
        answers = self._answers
        assert answers is not None
        try:
            while answers and not self.closed:
                answer, frame = answers[0]
                if isinstance(answer, asyncio.Future):
                    answer = await answer  # the deferred handler's wait, encoded
                try:
                    await self._answer_now(answer)
                finally:
                    answers.popleft()
                    self._answers_bytes -= len(frame)
                    self._reader.release(frame)
                    if self._room is not None:
                        _resolve(self._room)
        except BaseException as e:
            self._closed_by(e)
        finally:
            self._sender = None
            if not answers:
                self._answers = None
            self.last_active = time.monotonic()

    # -- quotas and connection limits ----------------------------------------

    def throttle(self, throttle_ms: int, client_throttles: bool) -> None:
        """Quotas: mute this connection for ``throttle_ms`` once the request being served is
        answered (``client_throttles``: KIP-219 versions), or hold its answer that long."""
        self._throttle_ms = max(self._throttle_ms, throttle_ms)
        self._throttle_after = client_throttles

    async def _mute(self, throttle_ms: int) -> None:
        loop = asyncio.get_running_loop()
        self._hold(_MUTED)
        waiter = self._unmute = loop.create_future()
        timer = loop.call_later(throttle_ms / 1000, _resolve, waiter)
        try:
            await waiter
        finally:
            timer.cancel()
            self._unmute = None
            self._release(_MUTED)

    def park(self) -> None:
        """Connection limits: accepted, but not read until :meth:`unpark`."""
        self._hold(_PARKED)

    def unpark(self) -> None:
        self._release(_PARKED)

    def _hold(self, reason: int) -> None:
        if not self._holds and self.transport is not None and not self.transport.is_closing():
            self.transport.pause_reading()
        self._holds |= reason

    def _release(self, reason: int) -> None:
        if self._holds & reason:
            self._holds &= ~reason
            if not self._holds and self.transport is not None and not self.transport.is_closing():
                self.transport.resume_reading()

    async def _send(self, chunks: list[Any]) -> None:
        transport = self.transport
        assert transport is not None
        loop = asyncio.get_running_loop()
        try:
            for chunk in chunks:
                if isinstance(chunk, FileRegion):
                    self._flush_pending()  # what went before goes first
                    await self._send_region(loop, transport, chunk)
                elif chunk:
                    # A view may point into a buffer reused once this returns: keep a copy.
                    self._queue(bytes(chunk) if isinstance(chunk, memoryview) else chunk)
        finally:
            for chunk in chunks:
                if isinstance(chunk, FileRegion):
                    chunk.close()
        if self._write_paused:
            waiter = self._drained = loop.create_future()
            try:
                await waiter
            finally:
                self._drained = None

    def write_now(self, chunks: list[Any]) -> None:
        """Write a response at once, after those queued (a last answer before a close)."""
        self._flush_pending()
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(b"".join(bytes(chunk) for chunk in chunks))

    def _queue(self, chunk: bytes | bytearray | DeferredFrame) -> None:
        """Queue a response for the next :meth:`_flush_pending` (scheduled with the first)."""
        if not self._pending:
            asyncio.get_running_loop().call_soon(self._flush_pending)
        self._pending.append(chunk)

    def _flush_pending(self) -> None:
        """Write the responses queued since the loop last ran, with one send.

        Responses to pipelined requests that are served without waiting
        (OffsetCommit, Heartbeat, small Produce...) queue here until the serving
        coroutine yields to the loop; one write then carries them all, instead
        of one system call per response. A :class:`DeferredFrame` (a batched
        OffsetCommit's answer) is encoded here, once its batch has settled.
        """
        pending = self._pending
        if not pending:
            return
        self._pending = []
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        frames = [chunk.resolve() if isinstance(chunk, DeferredFrame) else chunk for chunk in pending]
        transport.write(frames[0] if len(frames) == 1 else b"".join(frames))

    async def _send_region(
        self, loop: asyncio.AbstractEventLoop, transport: asyncio.Transport, region: FileRegion
    ) -> None:
        try:
            await send_region(loop, transport, region, self.broker.sendfile, self.tls)
        except OSError as e:
            if e.errno == errno.EIO and not isinstance(e, ConnectionError):  # the segment's read, not the socket
                self.broker.log_manager.report_file_error(region.fd, e)
            raise

    def trim(self) -> None:
        """Give back memory an idle connection does not need (recycled read buffers)."""
        self._reader.trim()

    @property
    def frame_limit(self) -> int:
        """The largest request frame read from this client (larger: the connection closes)."""
        return self._reader.size_max

    @frame_limit.setter
    def frame_limit(self, size: int) -> None:
        """SASL caps frames until the client has authenticated (``sasl.server.max.receive.size``)."""
        self._reader.limit(size)

    def _drop_answers(self) -> None:
        """The connection is gone: the deferred answers' waits end (cancelled), none is written."""
        if self._room is not None:
            _resolve(self._room)
        if self._answers is not None:
            for answer, _ in self._answers:
                if isinstance(answer, asyncio.Future):
                    answer.cancel()

    def close(self, reason: str, abort: bool = False, quiet: bool = False) -> None:
        if not quiet:
            _log.warning("closing connection from %s: %s", self.peer, reason)
        self.closed = True
        if self._waiter is not None:
            _resolve(self._waiter)
        if self._unmute is not None:
            _resolve(self._unmute)
        self._drop_answers()
        if self.transport is not None and not self.transport.is_closing():
            if abort:
                self.transport.abort()
            else:
                self._flush_pending()  # answers already made still go out before the close
                self.transport.close()


async def send_region(
    loop: asyncio.AbstractEventLoop,
    transport: asyncio.Transport,
    region: FileRegion,
    sendfile: LoopSendfile,
    tls: bool,
) -> None:
    """Segment bytes to the socket: ``loop.sendfile`` (zero copy), or pread where the loop lacks it
    (uvloop), the bytes must be encrypted (a TLS connection), or the kernel's sendfile refused this
    socket before sending a byte (asyncio's SendfileNotAvailableError, e.g. a peer that reset the
    connection: asyncio's own fallback would read the region as a file object, which it is not).
    A peer that went away surfaces as the transport's connection loss, not as an error here; a
    transport already closing (a reset seen while the answer was read) is a ConnectionError, which
    closes the connection quietly (it was a RuntimeError and a traceback; found by
    ``bench/chaos.py``'s flaky-connection fault)."""
    if not region.size:
        return
    if transport.is_closing():  # asyncio's sendfile would raise RuntimeError("Transport is closing")
        raise ConnectionError("the connection closed before its answer was sent")
    if sendfile.works and not tls:
        try:
            sent = await loop.sendfile(transport, region, region.position, region.size, fallback=False)  # type: ignore[arg-type]
        except NotImplementedError:
            sendfile.lacking()
        except asyncio.SendfileNotAvailableError:
            pass  # this region only: pread and write below
        else:
            if sent != region.size:
                raise ConnectionError(f"segment shrank while sending ({sent} of {region.size} bytes)")
            return
    data = os.pread(region.fd, region.size, region.position)
    if len(data) != region.size:
        raise ConnectionError(f"segment shrank while sending ({len(data)} of {region.size} bytes)")
    transport.write(data)
