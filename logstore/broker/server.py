"""The broker: asyncio connections, request dispatch, and the state the APIs share.

Each connection reads frames as they arrive and serves them one at a time,
in order (Kafka mutes a channel while its request is processed, so a
response never overtakes an earlier one). A frame larger than
``socket.request.max.bytes``, a negative size, an unknown API or version,
or a body kio cannot decode closes that connection with a log line; other
connections are not affected. A connection idle for
``connections.max.idle.ms`` (a client stalled mid-frame included) is closed.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import time
import typing
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from logstore.broker.apis import registry
from logstore.broker.config import BrokerConfig
from logstore.broker.connection_limits import ConnectionLimits
from logstore.broker.controller import ClusterLink, LocalController, NotJoined, TopicController
from logstore.broker.dynamic_config import DynamicBrokerConfig, FileConfigStore
from logstore.broker.fetch_session import FetchSessionCache
from logstore.broker.legacy_topic_configs import LegacyTopicConfigs
from logstore.broker.metadata_cache import BrokerEndpoint, MetadataCache
from logstore.broker.metrics import BrokerMetrics
from logstore.broker.metrics_http import MetricsServer, parse_metrics_listener
from logstore.broker.producers import ProducerIds
from logstore.broker.quotas import ClientQuotas, FileQuotaStore
from logstore.broker.replica_fetcher import FetcherSettings
from logstore.broker.replica_manager import ReplicaManager
from logstore.broker.txn_verification import TransactionVerifier
from logstore.errors import InvalidConfigError
from logstore.protocol import (
    API_VERSIONS_KEY,
    HEADER,
    DeferredFrame,
    FileRegion,
    ProtocolError,
    RequestHeader,
    codec,
    encode_response,
    parse_header,
)
from logstore.protocol.framing import Frame, FrameReader, FrameSizeError
from logstore.security import ANONYMOUS, KafkaPrincipal
from logstore.security.authorizer import Authorizer, build_authorizer
from logstore.security.listeners import BrokerSecurity
from logstore.storage.checkpoints import write_atomically
from logstore.storage.log_manager import LogManager
from logstore.storage.manager import Store

if typing.TYPE_CHECKING:
    from logstore.broker.groups import OffsetsAppender
    from logstore.broker.transactions import BrokerTransactionIO
    from logstore.coordinator.group.group_coordinator import GroupCoordinator
    from logstore.coordinator.txn.transaction_coordinator import TransactionCoordinator
    from logstore.security.credentials import CredentialStore
    from logstore.security.sasl import SaslSession

_log = logging.getLogger("logstore.broker")

# Response chunks that can wait in Connection._pending as they are.
_QUEUEABLE = (bytes, bytearray, DeferredFrame)  # bytearrays: fresh ResponseBuffer frames

# Pause reading from a client once this many request bytes wait unserved.
QUEUED_BYTES_MAX = 64 * 1024 * 1024

# Why a connection's reading is paused (Connection._holds, a bit set): too many request
# bytes queued, muted by a quota (KIP-219), parked by a connection limit (connection_limits.py).
_QUEUE_FULL, _MUTED, _PARKED = 1, 2, 4


def _resolve(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_result(None)


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


class Connection(asyncio.BufferedProtocol):
    """One client connection: frames in (see framing.py), responses out in request order."""

    def __init__(
        self, broker: Broker, listener_name: str = "PLAINTEXT", security_protocol: str = "PLAINTEXT"
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
        self.busy = False
        self._reader = FrameReader(broker.config.socket_request_max_bytes)
        # Frames not yet served, oldest first. A list, not a deque: an idle connection's empty
        # list is 56 bytes where a deque allocates a 600-byte block (docs/quotas.md, idle cost).
        self._frames: list[Frame] = []
        self._queued = 0
        self._holds = 0  # _QUEUE_FULL | _MUTED | _PARKED
        # Quotas (quotas.py): the throttle of the request being served, and the mute's end.
        self._throttle_ms = 0
        self._throttle_after = True
        self._unmute: asyncio.Future[None] | None = None
        # Connection limits (connection_limits.py): the IP counted, and whether a slot was taken.
        self.limit_ip: str | None = None
        self.admitted = False
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

    # -- asyncio.Protocol --------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports implement asyncio.Transport without subclassing it.
        self.transport = typing.cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self.peer = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) else str(peer)
        self.client_host = peer[0] if isinstance(peer, tuple) else str(peer)
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

    def pause_writing(self) -> None:
        self._write_paused = True

    def resume_writing(self) -> None:
        self._write_paused = False
        if self._drained is not None:
            _resolve(self._drained)

    # -- serving -----------------------------------------------------------

    async def _serve(self) -> None:
        frame: Frame | None = None
        chunks: list[Any] | None = None
        try:
            while not self.closed:
                if not self._frames:
                    frame = chunks = None  # an idle connection keeps neither its last request nor answer
                    waiter = self._waiter = asyncio.get_running_loop().create_future()
                    try:
                        await waiter
                    finally:
                        self._waiter = None
                    continue
                frame = self._frames.pop(0)
                self._queued -= len(frame)
                if self._holds & _QUEUE_FULL and self._queued <= QUEUED_BYTES_MAX // 2:
                    self._release(_QUEUE_FULL)
                self.busy = True
                try:
                    if self.sasl is None:
                        chunks = await self.broker.handle(frame.data, self)
                    else:
                        chunks = await self.sasl.serve(frame.data, self)
                    throttle_ms = self._throttle_ms
                    if throttle_ms:
                        self._throttle_ms = 0
                        if not self._throttle_after:  # a client before KIP-219: the answer waits
                            await self._mute(throttle_ms)
                            throttle_ms = 0
                    if chunks is None or self.closed:
                        pass
                    elif len(chunks) == 1 and type(chunks[0]) in _QUEUEABLE and not self._write_paused:
                        self._queue(chunks[0])  # the common small answer, without _send's coroutine
                    else:
                        await self._send(chunks)
                    if throttle_ms:  # KIP-219: answered at once, then not read for the throttle time
                        await self._mute(throttle_ms)
                finally:
                    self._reader.release(frame)
                    self.busy = False
                    self.last_active = time.monotonic()
        except ProtocolError as e:
            self.close(str(e))
        except (ConnectionError, OSError) as e:
            self.close(f"connection error: {e}", abort=True)
        except asyncio.CancelledError:
            self.close("broker shutting down", abort=True, quiet=True)
        except Exception:
            _log.exception("unexpected error serving %s; closing the connection", self.peer)
            self.close("internal error", abort=True, quiet=True)

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
        """Segment bytes to the socket: ``loop.sendfile`` (zero copy), or pread where the loop lacks it
        (uvloop) or the bytes must be encrypted (a TLS connection)."""
        if not region.size:
            return
        if self.broker.native_sendfile and not self.tls:
            try:
                sent = await loop.sendfile(transport, region, region.position, region.size)  # type: ignore[arg-type]
            except NotImplementedError:
                self.broker.native_sendfile = False
            else:
                if sent != region.size:
                    raise ConnectionError(f"segment shrank while sending ({sent} of {region.size} bytes)")
                return
        data = os.pread(region.fd, region.size, region.position)
        if len(data) != region.size:
            raise ConnectionError(f"segment shrank while sending ({len(data)} of {region.size} bytes)")
        transport.write(data)

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
        assert size > 0
        self._reader.size_max = size

    def close(self, reason: str, abort: bool = False, quiet: bool = False) -> None:
        if not quiet:
            _log.warning("closing connection from %s: %s", self.peer, reason)
        self.closed = True
        if self._waiter is not None:
            _resolve(self._waiter)
        if self._unmute is not None:
            _resolve(self._unmute)
        if self.transport is not None and not self.transport.is_closing():
            if abort:
                self.transport.abort()
            else:
                self._flush_pending()  # answers already made still go out before the close
                self.transport.close()


class Broker:
    """A Kafka-protocol broker over a :class:`Store`.

    >>> import asyncio, tempfile
    >>> async def main():
    ...     config = BrokerConfig.from_dict({"listeners": "PLAINTEXT://127.0.0.1:0"})
    ...     broker = Broker(config, data_dir=tempfile.mkdtemp())
    ...     await broker.start()
    ...     port = broker.bound[0][1]
    ...     await broker.close()
    ...     return port > 0
    >>> asyncio.run(main())
    True
    """

    def __init__(
        self,
        config: BrokerConfig,
        data_dir: str | None = None,
        store: Store | None = None,
        join: Callable[[Broker, tuple[str, int]], ClusterLink] | None = None,
    ) -> None:
        """``join``: how to join a cluster when ``zookeeper.connect`` is set (the cluster layer's
        :func:`logstore.cluster.zk_broker.join`; the broker layer does not import it)."""
        self.config = config
        self.node_id = config.node_id
        self.data_dir = os.path.abspath(data_dir or config.data_dir)
        self.owns_store = store is None  # a Store handed in is its owner's to close
        os.makedirs(self.data_dir, exist_ok=True)
        # Dynamic broker configs (AlterConfigs on BROKER; dynamic_config.py) over the static ones.
        self.dynamic_config = DynamicBrokerConfig(config, self.node_id, FileConfigStore(self.data_dir))
        config = self.config = self.dynamic_config.config
        self.security = BrokerSecurity(config)  # listeners' TLS and SASL (logstore/security/listeners.py)
        if config.zookeeper_connect:
            self.security.check_cluster()
        self.legacy_topic_configs = LegacyTopicConfigs(self.data_dir)  # message.format.version, ...
        # ACLs (logstore/security): None without authorizer.class.name; checks: security/operations.py.
        self.authorizer: Authorizer | None = build_authorizer(config, self.data_dir)
        self.cluster_id = config.cluster_id or self._load_cluster_id()
        self.metadata = MetadataCache(self.cluster_id)
        # Kafka's shape: handlers read the MetadataCache, append and read through the
        # ReplicaManager, and send topic changes to the controller; none touches the Store.
        # Alone, the Store's topics feed the cache and a LocalController changes them; in a
        # ZooKeeper cluster (zookeeper.connect) the ZkBroker does both, at start().
        self.store: Store | None = None
        self.cluster_link: ClusterLink | None = None
        self._join = join
        intervals = {
            "scheduler_interval_ms": config.log_flush_scheduler_interval_ms,
            "retention_check_interval_ms": config.log_retention_check_interval_ms,
            "checkpoint_interval_ms": config.log_flush_offset_checkpoint_interval_ms,
        }
        if config.zookeeper_connect:
            if store is not None:
                raise InvalidConfigError(
                    "zookeeper.connect: an embedded broker runs alone; run `logstore broker`"
                )
            self.log_manager = LogManager(self.data_dir, **intervals)
            self.controller: TopicController = NotJoined()
        else:
            self.store = store or Store(self.data_dir, config.log_defaults(), **intervals)
            self.log_manager = self.store.log_manager
            self.metadata.track_store(self.store, self.node_id)
            self.controller = LocalController(self.store)
        self.replica_manager = ReplicaManager(
            self.log_manager, self.metadata, self.node_id, config.producer_id_expiration_ms
        )
        # Prometheus metrics (metrics.py; served by metrics_http.py when metrics.listener is set).
        self.metrics = self.replica_manager.metrics = BrokerMetrics(self)
        self.metrics_server: MetricsServer | None = None
        self.producer_ids = ProducerIds(self.data_dir)
        # Client quotas (quotas.py) and connection limits (connection_limits.py).
        self.quotas = ClientQuotas(
            FileQuotaStore(self.data_dir), config.quota_window_num, config.quota_window_size_seconds
        )
        self.connection_limits = ConnectionLimits(self)
        self.quotas.on_ip_quotas = self.connection_limits.set_ip_quotas
        self.quotas.on_throttle = self.metrics.throttled
        self.connection_limits.set_ip_quotas(self.quotas.ip_quotas())
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self.connections: set[Connection] = set()
        self.bound: list[tuple[str, int]] = []
        self.bound_listeners: list[tuple[str, str, int]] = []  # (listener name, host, port)
        # loop.sendfile works on asyncio's own loops; uvloop raises NotImplementedError.
        self.native_sendfile = True
        self._servers: list[asyncio.AbstractServer] = []
        self.loop: asyncio.AbstractEventLoop | None = None  # set by start()
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False
        # Consumer groups over __consumer_offsets (see groups.py); built by start().
        self.coordinator: GroupCoordinator | None = None
        self.offsets_appender: OffsetsAppender | None = None
        # Transactions over __transaction_state (see transactions.py); built by start().
        self.transactions: TransactionCoordinator | None = None
        self.transaction_io: BrokerTransactionIO | None = None
        self.txn_verifier = TransactionVerifier(self)  # KIP-890 part 1 (txn_verification.py)

    def _load_cluster_id(self) -> str:
        path = os.path.join(self.data_dir, "cluster.id")
        with contextlib.suppress(FileNotFoundError), open(path, encoding="ascii") as f:
            value = f.read().strip()
            if value:
                return value
        # Kafka's form: a random UUID as 22 characters of URL-safe base64.
        import base64

        value = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        write_atomically(path, f"{value}\n".encode("ascii"))
        return value

    # -- lifecycle -----------------------------------------------------------

    async def start(self, listen: bool = True) -> None:
        """Join the cluster (with ``zookeeper.connect``), start the group coordinator (alone)
        and, when ``listen``, the listeners (the embedded broker has none)."""
        loop = self.loop = asyncio.get_running_loop()
        from logstore.broker.groups import on_transactions_completed, start_coordinator
        from logstore.broker.transactions import start_transactions

        self.replica_manager.on_transactions_completed = functools.partial(on_transactions_completed, self)

        protocols = self.security.protocols
        for name, host, port in self.config.listeners if listen else ():
            server = await loop.create_server(
                functools.partial(Connection, self, name, protocols[name]), host, port,
                reuse_address=True, backlog=1024, start_serving=False, ssl=self.security.context(name),
            )  # fmt: skip
            self._servers.append(server)
            for sock in server.sockets:
                address = sock.getsockname()
                self.bound.append((address[0], address[1]))
                self.bound_listeners.append((name, address[0], address[1]))
        host, port = self.advertised
        if self.config.zookeeper_connect:
            # In a cluster the coordinator serves the groups of the __consumer_offsets partitions
            # this broker leads, loaded and dropped as leadership comes and goes.
            self.coordinator = start_coordinator(self, distributed=True)
            self.transactions = start_transactions(self, distributed=True)
            self.replica_manager.on_leadership = self._on_leadership
            self.replica_manager.start_replication(
                self._fetcher_settings(), self.config.replica_lag_time_max_ms
            )
            await loop.run_in_executor(None, self._join_cluster, (host, port))
            for name in self.metadata.topic_names():  # states seen while joining, applied once more
                self.replica_manager.apply_states(name)
        else:
            self.metadata.set_brokers(
                [BrokerEndpoint(self.node_id, host, port, self.config.broker_rack, self.advertised_endpoints)]
            )
            self.coordinator = start_coordinator(self)  # alone, this broker leads every partition
            self.transactions = start_transactions(self)
        metrics_address = parse_metrics_listener(self.config.values["metrics.listener"])
        if metrics_address is not None:
            self.metrics_server = MetricsServer(self.metrics)
            await self.metrics_server.start(*metrics_address)
        self.security.use_credentials(self.credential_store())
        for listening in self._servers:
            await listening.start_serving()
        self._reaper = loop.create_task(self._reap_idle())

    def _on_leadership(self, topic: str, index: int, leader: bool) -> None:
        from logstore.broker.groups import on_offsets_leadership
        from logstore.broker.transactions import on_transaction_state_leadership

        on_offsets_leadership(self, topic, index, leader)
        on_transaction_state_leadership(self, topic, index, leader)

    def _fetcher_settings(self) -> FetcherSettings:
        config = self.config
        return FetcherSettings(
            wait_max_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_max_bytes,
            response_max_bytes=config.replica_fetch_response_max_bytes,
            backoff_ms=config.replica_fetch_backoff_ms,
            socket_timeout_ms=config.replica_socket_timeout_ms,
        )

    def _join_cluster(self, endpoint: tuple[str, int]) -> None:
        if self._join is None:
            raise InvalidConfigError(
                "zookeeper.connect is set but this broker was built without a way to join a cluster; "
                "run it with `logstore broker`"
            )
        link = self._join(self, endpoint)
        self.cluster_link = link
        self.controller = link

    @property
    def advertised(self) -> tuple[str, int]:
        """The inter-broker listener's advertised host and port (other brokers, the cluster's registry)."""
        wanted = self.security.inter_broker_listener
        endpoints = self.advertised_endpoints
        for name, host, port in endpoints:
            if name == wanted:
                return host, port
        return endpoints[0][1], endpoints[0][2]

    @property
    def advertised_endpoints(self) -> tuple[tuple[str, str, int], ...]:
        """Every listener's advertised (name, host, port): ``advertised.listeners`` for the listeners
        it names, else where the listener is bound (0.0.0.0 advertised as 127.0.0.1)."""
        given = {name: (host, port) for name, host, port in (
            self.config.advertised_listeners if self.config.values["advertised.listeners"] else ())}  # fmt: skip
        bound = self.bound_listeners or self.config.listeners
        result = []
        for name, host, port in bound:
            if name in given:
                host, port = given[name]
            result.append((name, "127.0.0.1" if host in ("0.0.0.0", "") else host, port))
        for name, (host, port) in given.items():  # advertised names no listener binds: as given
            if all(name != n for n, _, _ in result):
                result.append((name, host, port))
        return tuple(result)

    def advertised_for(self, listener: str) -> tuple[str, int]:
        """This broker's host and port as clients of ``listener`` must use them."""
        for name, host, port in self.advertised_endpoints:
            if name == listener:
                return host, port
        return self.advertised

    def credential_store(self) -> CredentialStore:
        """The SCRAM credentials: ZooKeeper's ``/config/users`` in a cluster, else a file in the data dir."""
        store = self.security.credentials
        if store is None:
            from logstore.security.credentials import FileCredentialStore, ZkCredentialStore

            zk = getattr(getattr(self.cluster_link, "zk", None), "zk", None)
            store = ZkCredentialStore(zk) if zk is not None else FileCredentialStore(self.data_dir)
            self.security.use_credentials(store)
        return store

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.cluster_link is not None:  # Kafka's controlled shutdown: leaderships move first
            loop = asyncio.get_running_loop()
            started = time.monotonic()
            try:
                kept = await loop.run_in_executor(None, self.cluster_link.controlled_shutdown, 10.0)
            except Exception:  # the rest of close must run: listeners, logs, the session
                _log.exception("controlled shutdown failed; stopping without it")
            else:
                _log.info(
                    "controlled shutdown: leaderships moved in %.2f s; %d kept (no other replica in sync)",
                    time.monotonic() - started, len(kept),
                )  # fmt: skip
        for server in self._servers:
            server.close()
        if self.metrics_server is not None:
            await self.metrics_server.close()
        if self._reaper is not None:
            self._reaper.cancel()
        for connection in list(self.connections):
            connection.close("broker shutting down", abort=True, quiet=True)
        self.replica_manager.wake_all()
        await self.replica_manager.close()
        if self.coordinator is not None:
            self.coordinator.close()  # parked joins and syncs answer NOT_COORDINATOR
        if self.transactions is not None:
            await self.transactions.close()  # markers in flight resume at the next coordinator
        if self.transaction_io is not None:
            self.transaction_io.close()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(server.wait_closed(), 5)
        if self.offsets_appender is not None:
            self.offsets_appender.flush()  # commits staged in the last pass
        if self.security.credentials is not None:
            self.security.credentials.close()
        if self.cluster_link is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.cluster_link.close)
        if self.store is None:
            self.log_manager.close()
        elif self.owns_store:
            self.store.close()

    async def _reap_idle(self) -> None:
        idle_ms = self.config.connections_max_idle_ms
        interval = min(idle_ms / 1000 / 4, 10)
        reauth_ms = [s.reauth_ms for s in self.security.sasl.values() if s.reauth_ms > 0]
        if reauth_ms:  # expired SASL sessions close within about half their lifetime
            interval = min(interval, max(min(reauth_ms) / 1000 / 2, 0.05))
        while True:
            await asyncio.sleep(interval)
            now = time.monotonic()
            for connection in list(self.connections):
                if not connection.busy and (now - connection.last_active) * 1000 > idle_ms:
                    connection.close(f"idle for more than connections.max.idle.ms={idle_ms}")
                elif connection.sasl is not None and not connection.busy and connection.sasl.expired(now):
                    connection.close("SASL session expired: not re-authenticated (connections.max.reauth.ms)")
                elif now - connection.last_active > 10:
                    connection.trim()  # quiet: drop its recycled large-frame buffers
            self.quotas.expire(now * 1000)

    # -- dispatch ------------------------------------------------------------

    async def handle(self, frame: bytes | memoryview, connection: Connection) -> list[Any] | None:
        """Serve one request frame; returns the response frame's chunks, or None."""
        started = time.perf_counter()
        api_key, version, correlation_id = HEADER.unpack_from(frame, 0)
        api = registry().get(api_key)
        if api is None:
            raise ProtocolError(f"unknown API key {api_key}")
        if not api.min_version <= version <= api.max_version:
            if api_key == API_VERSIONS_KEY:
                from logstore.broker.apis.api_versions import unsupported_version

                return unsupported_version(correlation_id)
            raise ProtocolError(
                f"{api.name} v{version} is not supported (this broker serves v{api.min_version}-v{api.max_version})"
            )
        codec_ = codec(api_key, version)
        header = parse_header(frame, codec_.flexible)
        try:
            if api.decode is not None:
                request, _ = api.decode(frame, header.body_offset, version)
            else:  # kio reads only read-only buffers
                readonly = frame if isinstance(frame, bytes) else frame.toreadonly()
                request, _ = codec_.read(readonly, header.body_offset)  # type: ignore[arg-type]
        except Exception as e:
            raise ProtocolError(
                f"cannot decode {api.name} v{version} from {header.client_id!r}: {e}"
            ) from None
        if self.quotas.active:  # quotas.py: measured, throttled, throttle_time_ms set
            return await self.quotas.serve(
                api, codec_, RequestContext(self, connection, header), request, len(frame)
            )
        response = await api.handle(RequestContext(self, connection, header), request)
        if response is None:
            self.metrics.observe(api, version, time.perf_counter() - started, None)
            return None
        chunks = encode_response(codec_, correlation_id, response, header_v0=api_key == API_VERSIONS_KEY)
        self.metrics.observe(api, version, time.perf_counter() - started, response)
        return chunks
