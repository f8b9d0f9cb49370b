"""The broker: the state the APIs share, its listeners and its lifecycle.

Connections (network/connection.py) read request frames and hand them to
the :class:`~logstore.broker.dispatch.Dispatcher` this broker builds (the one
path of every request: decode, quota, handle, encode, metrics).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from logstore.broker.apis import registry, unsupported_version
from logstore.broker.cluster_member import ClusterLink, LocalController, NotJoined, TopicController
from logstore.broker.config.broker_config import BrokerConfig, parse_metrics_listener
from logstore.broker.config.dynamic_config import DynamicBrokerConfig, FileConfigStore
from logstore.broker.config.legacy_topic_configs import LegacyTopicConfigs
from logstore.broker.dispatch import Dispatcher
from logstore.broker.groups.offsets_appender import OffsetsAppender
from logstore.broker.groups.offsets_topic import (
    on_offsets_leadership,
    on_transactions_completed,
    start_coordinator,
)
from logstore.broker.groups.share_groups import start_share_coordinator
from logstore.broker.metadata_cache import BrokerEndpoint, MetadataCache
from logstore.broker.metrics.broker_metrics import BrokerMetrics
from logstore.broker.metrics.live_metrics import broker_state
from logstore.broker.metrics.metrics_http import MetricsServer
from logstore.broker.network.connection import Connection, LoopSendfile
from logstore.broker.quotas.client_quotas import ClientQuotas, FileQuotaStore
from logstore.broker.quotas.connection_limits import ConnectionLimits
from logstore.broker.replication.fetch_session import FetchSessionCache
from logstore.broker.replication.replica_fetcher import FetcherSettings
from logstore.broker.replication.replica_manager import ReplicaManager
from logstore.broker.schema_registry import start_schema_registry
from logstore.broker.schema_validation import SchemaIdCheck
from logstore.broker.transactions.producer_ids import ProducerIds
from logstore.broker.transactions.state_topic import on_transaction_state_leadership, start_transactions
from logstore.broker.transactions.transaction_io import BrokerTransactionIO
from logstore.broker.transactions.txn_verification import TransactionVerifier
from logstore.coordinator.clock import Repeating
from logstore.coordinator.group.group_coordinator import GroupCoordinator
from logstore.coordinator.share.share_coordinator import ShareCoordinator
from logstore.coordinator.txn.transaction_coordinator import TransactionCoordinator
from logstore.errors import InvalidConfigError
from logstore.schemas.http import RegistryServer
from logstore.security.authorizer import Authorizer, build_authorizer
from logstore.security.credentials import CredentialStore, FileCredentialStore, ZkCredentialStore
from logstore.storage.checkpoints import write_atomically
from logstore.storage.disk_space import LogDirSpace
from logstore.storage.log_manager import LogManager
from logstore.storage.store import Store

_log = logging.getLogger("logstore.broker")


def _move_rate(config: BrokerConfig) -> int:
    """replica.alter.log.dirs.io.max.bytes.per.second as a LogManager's move_rate (0: unbounded)."""
    rate = int(config.values["replica.alter.log.dirs.io.max.bytes.per.second"])
    return 0 if rate >= (1 << 63) - 1 else rate


# sun_path holds 108 bytes: a longer socket path is reached through the directory's descriptor.
UNIX_PATH_MAX = 100


@contextlib.contextmanager
def unix_address(path: str) -> Iterator[str]:
    """``path``, or when it is too long for a Unix socket address, the same file named through
    ``/proc/self/fd/<directory's descriptor>`` (Linux), for the duration of a bind or connect."""
    if len(os.fsencode(path)) <= UNIX_PATH_MAX:
        yield path
        return
    directory = os.open(os.path.dirname(path) or ".", os.O_RDONLY | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{directory}/{os.path.basename(path)}"
    finally:
        os.close(directory)


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
        data_dir: str | Sequence[str] | None = None,
        store: Store | None = None,
        join: Callable[[Broker, tuple[str, int]], ClusterLink] | None = None,
        lock_fd: int | None = None,
    ) -> None:
        """``join``: how to join a cluster when ``zookeeper.connect`` is set (the cluster layer's
        :func:`logstore.cluster.zk_broker.join`; the broker layer does not import it). ``lock_fd``:
        the data directory's ``.lock``, already taken by the caller (the embedded store's takeover),
        handed to the Store this broker opens."""
        self.config = config
        self.node_id = config.node_id
        given = data_dir or config.log_dirs
        # log.dirs (Kafka's JBOD): partitions spread over them; the broker's own files in the first.
        # A string is comma-separated, as log.dirs is.
        named = [d.strip() for d in given.split(",") if d.strip()] if isinstance(given, str) else list(given)
        self.log_dirs = [os.path.abspath(d) for d in named]
        self.data_dir = self.log_dirs[0]
        self.owns_store = store is None  # a Store handed in is its owner's to close
        os.makedirs(self.data_dir, exist_ok=True)
        # Dynamic broker configs (AlterConfigs on BROKER; dynamic_config.py) over the static ones.
        self.dynamic_config = DynamicBrokerConfig(config, self.node_id, FileConfigStore(self.data_dir))
        config = self.config = self.dynamic_config.config
        self.security = config.listener_security()  # listeners' TLS and SASL (logstore/security/listeners.py)
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
            self.log_manager = LogManager(self.log_dirs, replicated=True, **intervals)
            self.controller: TopicController = NotJoined()
        else:
            self.store = store or Store(self.log_dirs, config.log_defaults(), **intervals, lock_fd=lock_fd)
            self.log_manager = self.store.log_manager
            self.log_dirs = list(self.log_manager.log_dirs)
            self.metadata.track_store(self.store, self.node_id)
            self.controller = LocalController(self.store)
        self.log_manager.move_rate = _move_rate(config)  # AlterReplicaLogDirs' copy rate
        # Prometheus metrics (broker_metrics.py; served by metrics_http.py when metrics.listener is set);
        # the scrape-time families of this broker's state first (live_metrics.py).
        self.metrics = BrokerMetrics()
        self.metrics.add_collector(functools.partial(broker_state, self))
        # Each log dir's free space against log.dir.min.free.bytes (storage/disk_space.py).
        self.disk_spaces = {d: LogDirSpace(d, config.log_dir_min_free_bytes) for d in self.log_dirs}
        self.disk_space = self.disk_spaces[self.data_dir]
        self.replica_manager = ReplicaManager(
            self.log_manager,
            self.metadata,
            self.node_id,
            config.producer_id_expiration_ms,
            self.metrics,
            on_transactions_completed=functools.partial(on_transactions_completed, self),
            space=self.disk_space,
            spaces=self.disk_spaces,
        )
        self.metrics_server: MetricsServer | None = None
        self.schema_registry: RegistryServer | None = None  # schema.registry.listeners (schema_registry.py)
        # Topics with confluent.{key,value}.schema.validation: their records' schema ids (schema_validation.py).
        self.replica_manager.record_check = SchemaIdCheck(self)
        self.producer_ids = ProducerIds(self.data_dir)
        # Client quotas (client_quotas.py) and connection limits (connection_limits.py).
        self.connection_limits = ConnectionLimits(lambda: self.config)
        self.quotas = ClientQuotas(
            FileQuotaStore(self.data_dir),
            config.quota_window_num,
            config.quota_window_size_seconds,
            on_ip_quotas=self.connection_limits.set_ip_quotas,
            on_throttle=self.metrics.throttled,
        )
        self.fetch_sessions = FetchSessionCache(config.max_incremental_fetch_session_cache_slots)
        self.connections: set[Connection] = set()
        self.bound: list[tuple[str, int]] = []
        self.bound_listeners: list[tuple[str, str, int]] = []  # (listener name, host, port)
        self.sendfile = LoopSendfile()  # loop.sendfile: asyncio's own loops, not uvloop
        self._servers: list[asyncio.AbstractServer] = []
        self._unix_paths: list[tuple[str, int]] = []  # listen_unix's sockets (path, inode)
        self.loop: asyncio.AbstractEventLoop | None = None  # set by start()
        self._reaper: asyncio.Task[None] | None = None
        self._closed = False
        # Consumer groups over __consumer_offsets (see offsets_topic.py); built by start().
        self.coordinator: GroupCoordinator | None = None
        self.offsets_appender: OffsetsAppender | None = None
        # Share groups (KIP-932; groups/share_groups.py), in memory; built by start().
        self.share_coordinator: ShareCoordinator | None = None
        self._share_ticker: Repeating | None = None
        # Transactions over __transaction_state (see state_topic.py); built by start().
        self.transactions: TransactionCoordinator | None = None
        self.transaction_io: BrokerTransactionIO | None = None
        self.txn_verifier = TransactionVerifier(self)  # KIP-890 part 1 (txn_verification.py)
        # Every request's one path (dispatch.py); quotas and metrics plug in there.
        self.dispatcher = Dispatcher(self, registry(), self.quotas, self.metrics, unsupported_version)

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
            self.coordinator, self.offsets_appender = start_coordinator(self, distributed=True)
            self.transactions, self.transaction_io = start_transactions(self, distributed=True)
            self.replica_manager.start_replication(
                self._fetcher_settings(), self.config.replica_lag_time_max_ms, self._on_leadership
            )
            await loop.run_in_executor(None, self._join_cluster, (host, port))
            for name in self.metadata.topic_names():  # states seen while joining, applied once more
                self.replica_manager.apply_states(name)
        else:
            self.metadata.set_brokers(
                [BrokerEndpoint(self.node_id, host, port, self.config.broker_rack, self.advertised_endpoints)]
            )
            # Alone, this broker leads every partition.
            self.coordinator, self.offsets_appender = start_coordinator(self)
            self.transactions, self.transaction_io = start_transactions(self)
        self.share_coordinator, self._share_ticker = start_share_coordinator(self)
        metrics_address = parse_metrics_listener(self.config.values["metrics.listener"])
        if metrics_address is not None:
            self.metrics_server = MetricsServer(self.metrics)
            await self.metrics_server.start(*metrics_address)
        self.schema_registry = await start_schema_registry(self)
        self.security.use_credentials(self.credential_store())
        for listening in self._servers:
            await listening.start_serving()
        self._reaper = loop.create_task(self._reap_idle())
        self.replica_manager.watch_space()

    async def listen_unix(self, path: str) -> None:
        """Serve clients on a Unix-domain socket at ``path`` too (PLAINTEXT, the same connections
        as TCP): the embedded store's other processes. Owner-only (0600: the mode is set on the
        socket before it is bound, and on the file); bound under a temporary name and renamed over
        ``path``, so a stale file (a killed owner's) is replaced at once; :meth:`close` removes it."""
        loop = asyncio.get_running_loop()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        temporary = f"{path}.{os.getpid()}"
        try:
            os.fchmod(sock.fileno(), 0o600)  # Linux binds with the socket's own mode
            with contextlib.suppress(FileNotFoundError):
                os.unlink(temporary)
            with unix_address(temporary) as name:
                sock.bind(name)
            os.chmod(temporary, 0o600)
            os.rename(temporary, path)
            server = await loop.create_unix_server(
                functools.partial(Connection, self, "PLAINTEXT", "PLAINTEXT"), sock=sock, backlog=1024,
            )  # fmt: skip
        except BaseException:
            sock.close()
            with contextlib.suppress(OSError):
                os.unlink(temporary)
            raise
        self._servers.append(server)
        self._unix_paths.append((path, os.stat(path).st_ino))

    def socket_fds(self) -> list[int]:
        """The descriptors of its listening sockets and client connections (a forked child closes
        its copies: one kept open would hold the parent's clients after the parent died)."""
        fds = [sock.fileno() for server in self._servers for sock in getattr(server, "sockets", ())]
        for connection in self.connections:
            sock = None if connection.transport is None else connection.transport.get_extra_info("socket")
            if sock is not None:
                fds.append(sock.fileno())
        return [fd for fd in fds if fd >= 0]

    def _on_leadership(self, topic: str, index: int, leader: bool) -> None:
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
        self.cluster_id = self.metadata.cluster_id  # the cluster's: the link's start set it there

    def use_config(self, new: BrokerConfig, controller: TopicController | None = None) -> None:
        """Make ``new`` this broker's config (a dynamic config changed: dynamic_config.py); changed
        log defaults go to ``controller`` (this broker's own by default) for every topic."""
        before = self.config.log_defaults()
        self.config = new
        self.log_manager.move_rate = _move_rate(new)
        after = new.log_defaults()
        if after != before:
            (controller or self.controller).set_defaults(after)

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
        for path, inode in self._unix_paths:  # ours still (not a later owner's): removed
            with contextlib.suppress(OSError):
                if os.stat(path).st_ino == inode:
                    os.unlink(path)
        if self.metrics_server is not None:
            await self.metrics_server.close()
        if self.schema_registry is not None:
            await self.schema_registry.close()
        if self._reaper is not None:
            self._reaper.cancel()
        if self._share_ticker is not None:
            self._share_ticker.stop()
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

    async def handle(self, frame: bytes | memoryview, connection: Any) -> list[Any] | None:
        """Serve one request frame to its end (a deferred answer awaited): the response frame's
        chunks, or None. The in-process transport and tests use it; a connection pipelines
        through :attr:`dispatcher` instead."""
        answer = await self.dispatcher.dispatch(frame, connection)
        if answer is None or type(answer) is list:
            return answer
        return await answer  # type: ignore[misc]
