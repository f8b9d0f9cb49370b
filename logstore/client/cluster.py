"""What a client knows of the cluster, and its connections: Kafka's ``Metadata`` and ``NetworkClient``.

:class:`Cluster` keeps one connection per broker (opened on first use, with
``reconnect.backoff.ms`` growing to ``reconnect.backoff.max.ms`` between
failed attempts), the metadata cache (brokers, topics, partition leaders;
refreshed when older than ``metadata.max.age.ms`` or when a request is
answered NOT_LEADER / UNKNOWN_TOPIC), and the group coordinators found with
FindCoordinator. It is shared by the threads of one client and is
thread-safe: a lock guards the maps, never a request in flight.

Every call keeps its timeout, also where it has to open a connection first: a caller sets
a deadline for its thread (:meth:`Cluster.deadline`, e.g. ``consume(timeout)`` or the
producer's nearest delivery timeout), and opening a connection (connect, ApiVersions, SASL),
waiting out a reconnect backoff and waiting for an answer are all cut at it, except that a
connection always gets :data:`CALL_FLOOR_S` to be set up and a request as long to be answered
(the calling thread does this I/O: ``poll(0)`` must still be able to connect and learn metadata). Without a deadline, each step has
its own bound (``socket.connection.setup.timeout.ms``, ``request.timeout.ms``).

A transport opens connections: :class:`TcpTransport` over sockets, or the
in-process one of ``logstore.embedded`` (``bootstrap.servers =
"embedded:///path"``, or ``logstore.store`` set to a Store), which is looked
up by name so that the client never imports the broker.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any, Protocol

from logstore.client.config import ClientConfig, ConfigError
from logstore.client.connection import BrokerConnection, Connection
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.sasl import SaslSettings

METADATA = 3
FIND_COORDINATOR = 10
_ZERO_UUID = uuid.UUID(int=0)
BOOTSTRAP_ID_BASE = -1  # bootstrap servers get ids -1, -2, ... until metadata names them
# A coordinator's own connection has id BASE - node id (Java's Integer.MAX_VALUE - id).
COORDINATOR_LINK_BASE = 2**31 - 1
# The least time a connection gets to be set up, and a request to be answered, when the calling
# thread's deadline is nearer (the client's I/O runs in the calling thread: poll(0) must progress).
CALL_FLOOR_S = 0.2


def coordinator_link(node_id: int) -> int:
    """The id of a second connection to broker ``node_id``, kept for group coordination.

    A broker answers one request of a connection at a time, in order; a JoinGroup it holds for
    a rebalance, or a long-polling Fetch, must not delay heartbeats and commits (Kafka's
    consumer does the same).
    """
    return COORDINATOR_LINK_BASE - node_id


class Transport(Protocol):
    """Opens connections to brokers."""

    def bootstrap(self) -> list[tuple[str, int]]: ...

    def open(self, node_id: int, host: str, port: int, setup_timeout: float | None = None) -> Connection:
        """A connection to the broker, set up within ``setup_timeout`` seconds (None: the
        transport's own bound); KafkaException when it cannot be."""
        ...

    def close(self) -> None: ...


class TcpTransport:
    """Connections over TCP to ``bootstrap.servers``' brokers and those metadata names."""

    def __init__(self, config: ClientConfig) -> None:
        self.config = config
        self._bootstrap = parse_bootstrap(config["bootstrap.servers"])

    def bootstrap(self) -> list[tuple[str, int]]:
        return list(self._bootstrap)

    def open(self, node_id: int, host: str, port: int, setup_timeout: float | None = None) -> Connection:
        setup = self.config.seconds("socket.connection.setup.timeout.ms")
        return BrokerConnection(
            node_id,
            host,
            port,
            self.config["client.id"],
            setup if setup_timeout is None else min(setup, setup_timeout),
            self.config.seconds("request.timeout.ms"),
            SaslSettings.from_config(self.config),
        )

    def close(self) -> None:
        pass


def parse_bootstrap(value: Any) -> list[tuple[str, int]]:
    """``host:port,host:port`` (a ``PLAINTEXT://`` prefix allowed) as a list of pairs.

    >>> parse_bootstrap("PLAINTEXT://127.0.0.1:9092, [::1]:9093")
    [('127.0.0.1', 9092), ('::1', 9093)]
    """
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"bootstrap.servers must be 'host:port[,host:port...]', not {value!r}")
    out = []
    for item in value.split(","):
        text = item.strip()
        if "://" in text:
            text = text.split("://", 1)[1]
        host, sep, port = text.rpartition(":")
        if not sep or not port.isdigit() or not host:
            raise ConfigError(f"bootstrap.servers: {item.strip()!r} is not host:port")
        out.append((host.strip("[]"), int(port)))
    return out


def find_coordinator_fields(key: str, key_type: int = 0) -> dict[str, Any]:
    """A FindCoordinator request for ``key`` at any version (v4 names keys in a list):
    ``key_type`` 0 a consumer group, 1 a transactional id."""
    return {"key": key, "key_type": key_type, "coordinator_keys": [key]}


# Transports other than TCP, by name: (config) -> Transport. The in-process one lives beside the
# broker, which the client never imports: ``logstore.embedded`` registers it when imported, and
# names itself in the package's ``logstore.transports`` entry points (pyproject.toml), which are
# loaded the first time a config asks for a transport not registered yet.
_TRANSPORTS: dict[str, Callable[[ClientConfig], Transport]] = {}
EMBEDDED = "embedded"


def register_transport(name: str, factory: Callable[[ClientConfig], Transport]) -> None:
    """Make ``name`` a transport (``embedded``: ``bootstrap.servers=embedded:///path``)."""
    _TRANSPORTS[name] = factory


def _transport(name: str) -> Callable[[ClientConfig], Transport]:
    if name not in _TRANSPORTS:
        for entry in importlib.metadata.entry_points(group="logstore.transports", name=name):
            entry.load()  # the module registers itself
    factory = _TRANSPORTS.get(name)
    if factory is None:
        raise ConfigError(
            f"no {name!r} transport is installed: reinstall logstore (pip install logstore) so that its "
            f"entry points are known, or import logstore.{name} before making the client"
        )
    return factory


def metadata_fields(
    topics: Iterable[str] | None, *, auto_create: bool = False, topic_operations: bool = False
) -> dict[str, Any]:
    """A Metadata request for ``topics`` (None: every topic), creating none unless
    ``auto_create``; ``topic_operations`` asks for each topic's authorized operations."""
    return {
        "topics": None if topics is None else [{"name": n, "topic_id": _ZERO_UUID} for n in topics],
        "allow_auto_topic_creation": bool(auto_create),
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": topic_operations,
    }


def transport_for(config: ClientConfig) -> Transport:
    """The transport ``config`` asks for: TCP, or in-process (``embedded://`` or ``logstore.store``)."""
    servers = config["bootstrap.servers"]
    if config["logstore.store"] is not None or (isinstance(servers, str) and servers.startswith("embedded:")):
        return _transport(EMBEDDED)(config)
    return TcpTransport(config)


@dataclass
class PartitionMeta:
    partition: int
    leader: int
    leader_epoch: int
    error: int
    replicas: list[int] = field(default_factory=list)
    isr: list[int] = field(default_factory=list)


@dataclass
class TopicMeta:
    name: str
    error: int
    partitions: dict[int, PartitionMeta]
    topic_id: uuid.UUID = _ZERO_UUID
    internal: bool = False


@dataclass(frozen=True)
class BrokerMeta:
    node_id: int
    host: str
    port: int
    rack: str | None


class Cluster:
    """The metadata cache and the connections of one client (see the module's docstring)."""

    def __init__(self, config: ClientConfig, transport: Transport | None = None) -> None:
        self.config = config
        self.transport = transport or transport_for(config)
        self.brokers: dict[int, BrokerMeta] = {}
        self.topics: dict[str, TopicMeta] = {}
        self.cluster_id: str | None = None
        self.controller_id = -1
        self.updated = 0.0
        self._lock = threading.RLock()
        self._connections: dict[int, Connection] = {}
        self._backoff: dict[int, tuple[float, float]] = {}  # node -> (next attempt, current backoff)
        self._coordinators: dict[tuple[int, str], int] = {}
        self._closed = False
        self._refresh_lock = threading.Lock()
        self._calls = threading.local()  # .deadline: the calling thread's (time.monotonic()), or None

    # -- the calling thread's deadline ----------------------------------------

    @contextlib.contextmanager
    def deadline(self, when: float | None) -> Iterator[None]:
        """Cut every wait of this thread's calls at ``when`` (``time.monotonic()``; None: no cut)
        until the block ends; nested blocks keep the earlier deadline."""
        outer = getattr(self._calls, "deadline", None)
        self._calls.deadline = when if outer is None else (outer if when is None else min(outer, when))
        try:
            yield
        finally:
            self._calls.deadline = outer

    def remaining(self, limit: float) -> float:
        """``limit`` seconds, cut at this thread's deadline (0.0 once it has passed)."""
        when = getattr(self._calls, "deadline", None)
        return limit if when is None else max(0.0, min(limit, when - time.monotonic()))

    # -- connections ---------------------------------------------------------

    def connection(self, node_id: int) -> Connection:
        """The open connection to ``node_id``, opened now if need be (KafkaException if it cannot be)."""
        with self._lock:
            conn = self._connections.get(node_id)
            if conn is not None and not conn.closed and not conn.stale:
                return conn
            if self._closed:
                raise KafkaException(local("_DESTROY", "the client is closed"))
            address = self._address(node_id)
            wait_until, backoff = self._backoff.get(node_id, (0.0, 0.0))
        delay = wait_until - time.monotonic()
        if delay > 0:
            time.sleep(self.remaining(min(delay, 1.0)))
        # A call whose deadline is near still gets a short try (poll(0) must be able to connect).
        setup = max(self.remaining(float("inf")), CALL_FLOOR_S)
        try:
            conn = self.transport.open(node_id, *address, setup if setup != float("inf") else None)
        except KafkaException:
            low = self.config.seconds("reconnect.backoff.ms")
            high = self.config.seconds("reconnect.backoff.max.ms")
            backoff = min(max(backoff * 2, low), high)
            with self._lock:
                self._backoff[node_id] = (time.monotonic() + backoff, backoff)
            raise
        with self._lock:
            self._backoff.pop(node_id, None)
            old = self._connections.get(node_id)
            if old is not None and not old.closed and old is not conn and not old.stale:
                conn.close()  # another thread opened one first
                return old
            self._connections[node_id] = conn
        if old is not None and old is not conn and not old.closed:
            old.retire()  # stale: its answers still come; no new request goes to it
        return conn

    def _address(self, node_id: int) -> tuple[str, int]:
        broker = self.brokers.get(node_id)
        if broker is None and node_id > COORDINATOR_LINK_BASE // 2:
            broker = self.brokers.get(COORDINATOR_LINK_BASE - node_id)
        if broker is not None:
            return broker.host, broker.port
        bootstrap = self.transport.bootstrap()
        index = BOOTSTRAP_ID_BASE - node_id
        if 0 <= index < len(bootstrap):
            return bootstrap[index]
        raise KafkaException(local("_TRANSPORT", f"no address known for broker {node_id}"))

    def any_connection(self) -> Connection:
        """A connection to some broker: an open one, else a known broker, else a bootstrap server."""
        with self._lock:
            for conn in self._connections.values():
                if not conn.closed:
                    return conn
            candidates = list(self.brokers) + [
                BOOTSTRAP_ID_BASE - i for i in range(len(self.transport.bootstrap()))
            ]
        errors = []
        for node_id in candidates:
            try:
                return self.connection(node_id)
            except KafkaException as e:
                if e.error.code() == KafkaError._AUTHENTICATION:  # type: ignore[attr-defined]
                    raise  # the brokers answer, and refuse: what to fix is the credentials
                errors.append(e.error.str())
        raise KafkaException(
            local("_ALL_BROKERS_DOWN", "no broker could be reached: " + "; ".join(errors[-3:]))
        )

    def send(self, node_id: int | None, api_key: int, fields: dict[str, Any], **kw: Any) -> Future[Any]:
        """Send a request to ``node_id`` (any broker when None); connection failures settle the future."""
        try:
            conn = self.any_connection() if node_id is None else self.connection(node_id)
        except KafkaException as e:
            failed: Future[Any] = Future()
            failed.set_exception(e)
            return failed
        return conn.send(api_key, fields, **kw)

    def request(
        self, node_id: int | None, api_key: int, fields: dict[str, Any], timeout: float | None = None
    ) -> Any:
        """Send and wait: the response, or KafkaException (``_TIMED_OUT`` after ``timeout`` seconds)."""
        limit = self.config.seconds("request.timeout.ms") if timeout is None else timeout
        with self.deadline(time.monotonic() + limit):
            future = self.send(node_id, api_key, fields)
            limit = max(self.remaining(limit), min(limit, CALL_FLOOR_S))
        try:
            return future.result(limit)
        except TimeoutError:
            raise KafkaException(
                local("_TIMED_OUT", f"API {api_key}: no answer within {limit:.1f} s")
            ) from None

    def version(self, api_key: int, node_id: int | None = None) -> int:
        conn = self.any_connection() if node_id is None else self.connection(node_id)
        return conn.version(api_key)

    # -- metadata ------------------------------------------------------------

    def refresh(
        self,
        topics: Iterable[str] | None = None,
        *,
        auto_create: bool | None = None,
        timeout: float | None = None,
    ) -> Any:
        """Ask a broker for metadata (all topics when ``topics`` is None) and update the cache.

        ``timeout`` (seconds) bounds the wait for the answer (default ``request.timeout.ms``).
        """
        names = None if topics is None else sorted(set(topics))
        create = self.config["allow.auto.create.topics"] if auto_create is None else auto_create
        response = self.request(None, METADATA, metadata_fields(names, auto_create=create), timeout)
        self._update(response, names)
        return response

    def _update(self, response: Any, names: list[str] | None) -> None:
        brokers = {
            int(b.node_id): BrokerMeta(int(b.node_id), b.host, int(b.port), getattr(b, "rack", None))
            for b in response.brokers
        }
        topics = {}
        for t in response.topics:
            partitions = {
                int(p.partition_index): PartitionMeta(
                    int(p.partition_index),
                    int(p.leader_id),
                    int(getattr(p, "leader_epoch", -1)),
                    int(p.error_code),
                    [int(r) for r in p.replica_nodes],
                    [int(r) for r in p.isr_nodes],
                )
                for p in t.partitions
            }
            topics[t.name] = TopicMeta(t.name, int(t.error_code), partitions, getattr(t, "topic_id", _ZERO_UUID),
                                       bool(getattr(t, "is_internal", False)))  # fmt: skip
        with self._lock:
            self.brokers = brokers
            self.cluster_id = getattr(response, "cluster_id", None)
            self.controller_id = int(getattr(response, "controller_id", -1))
            if names is None:
                self.topics = topics
            else:
                self.topics.update(topics)
            self.updated = time.monotonic()

    def stale(self) -> bool:
        return time.monotonic() - self.updated > self.config.seconds("metadata.max.age.ms")

    def topic(self, name: str, *, refresh: bool = True) -> TopicMeta | None:
        """The cached metadata of ``name``, asked for once if unknown (None: it does not exist)."""
        meta = self.topics.get(name)
        if (meta is None or meta.error) and refresh:
            self.refresh([name])
            meta = self.topics.get(name)
        if meta is None or meta.error:
            return None
        return meta

    def leader(self, topic: str, partition: int) -> int:
        meta = self.topics.get(topic)
        if meta is None:
            return -1
        p = meta.partitions.get(partition)
        return -1 if p is None else p.leader

    # -- coordinators --------------------------------------------------------

    def coordinator(self, key: str, key_type: int = 0, *, refresh: bool = False) -> int:
        """The node id of the coordinator of group ``key`` (FindCoordinator, cached)."""
        cache_key = (key_type, key)
        with self._lock:
            node = self._coordinators.get(cache_key)
        if node is not None and not refresh:
            return node
        response = self.request(None, FIND_COORDINATOR, find_coordinator_fields(key, key_type))
        return self.coordinator_answer(key, key_type, response)

    def coordinator_answer(self, key: str, key_type: int, response: Any) -> int:
        """Take in a FindCoordinator answer for ``key`` (sent with :func:`find_coordinator_fields`,
        by a caller that does not wait, as the producer's transactions do): the coordinator's
        node id, now cached and dialable; KafkaException with the answer's error code if it
        names none. O(1)."""
        if hasattr(response, "coordinators") and response.coordinators:
            entry = response.coordinators[0]
        else:
            entry = response
        if entry.error_code:
            raise KafkaException(
                KafkaError(
                    int(entry.error_code),
                    f"FindCoordinator({key!r}): {entry.error_message or ''}".rstrip(": "),
                )
            )
        node = int(entry.node_id)
        with self._lock:
            self.brokers.setdefault(node, BrokerMeta(node, entry.host, int(entry.port), None))
            self._coordinators[(key_type, key)] = node
        return node

    def forget_coordinator(self, key: str, key_type: int = 0) -> None:
        with self._lock:
            self._coordinators.pop((key_type, key), None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            connections = list(self._connections.values())
            self._connections.clear()
        for conn in connections:
            conn.close()
        self.transport.close()
