"""A broker's part in a ZooKeeper cluster (the ZooKeeper half of Kafka's ``KafkaServer``).

With ``zookeeper.connect`` set, a broker at start:

1. connects to ZooKeeper (retrying with backoff; a clear error after
   ``zookeeper.connection.timeout.ms``), takes the cluster's id from
   ``/cluster/id`` (making it from its own if it is the first), and registers
   ``/brokers/ids/<broker.id>`` (ephemeral; a duplicate id is refused);
2. runs for controller (:class:`~logstore.cluster.controller.ZkController`),
   and again whenever ``/controller`` goes;
3. watches ``/brokers/ids``, ``/brokers/topics``, each topic's assignment and
   each partition's state, and from them keeps its MetadataCache whole
   (brokers, topics, leaders, epochs, ISR) and its logs: it creates the log of
   every replica assigned to it and deletes the logs of topics that are gone;
4. reports each of its log dirs that fails (an I/O error: the LogManager's
   LogDirFailureChannel) in ``/admin/offline_log_dirs``, so that the
   controller moves leadership and ISR membership off the replicas in it.

Brokers learn of the controller's decisions by these watches, not by
LeaderAndIsr and UpdateMetadata requests (docs/cluster.md): after each change
of a topic's states the broker's ``on_topic_changed`` hook runs (the broker
hands it to its ReplicaManager, which becomes leader or follower). The active
controller, on the same watches, initializes the state of new partitions,
elects leaders when brokers go, and deletes topics marked in
``/admin/delete_topics``.

Threads: ZooKeeper's watches only queue an event; one worker thread handles
events in order (so the controller is single-threaded) and touches the
MetadataCache (thread-safe) and the LogManager (thread-safe). Each event
handler re-reads ZooKeeper, so a lost or merged event costs nothing but a
later pass.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import logging
import queue
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from kazoo.exceptions import NodeExistsError
from kazoo.protocol.states import KazooState
from kio.schema.errors import ErrorCode

from logstore.broker.broker import Broker
from logstore.broker.config.dynamic_config import DEFAULT_ENTITY
from logstore.broker.metadata_cache import (
    NO_LEADER,
    BrokerEndpoint,
    MetadataCache,
    PartitionState,
    TopicMetadata,
)
from logstore.cluster.assignment import assign_replicas
from logstore.cluster.controller import ControllerMovedError, ElectionResult, ZkController
from logstore.cluster.zk import (
    BROKER_IDS,
    BROKER_TOPICS,
    CONFIG_BROKERS,
    CONFIG_TOPICS,
    CONTROLLED_SHUTDOWN,
    CONTROLLER,
    DELETE_TOPICS,
    OFFLINE_LOG_DIRS,
    BrokerRegistration,
    KafkaZkClient,
    TopicAssignment,
    ZkError,
)
from logstore.cluster.zk_acls import follow_acls
from logstore.cluster.zk_quotas import follow_client_quotas
from logstore.errors import InvalidArgumentError, TopicExistsError, UnknownTopicError
from logstore.storage.config import LogConfig
from logstore.storage.log_manager import LogManager

_log = logging.getLogger("logstore.cluster")

_STOP = object()


def _coalescable(event: Any) -> bool:
    """A notice that a pass re-reads everything for: a name (brokers, topics, ...) or ("topic", t)."""
    return isinstance(event, str) or (isinstance(event, tuple) and len(event) == 2 and event[0] == "topic")


_T = TypeVar("_T")


@dataclass(frozen=True, slots=True)
class ClusterSettings:
    """What the link needs of the broker's config (Kafka's key names, as attributes)."""

    zookeeper_connect: str
    zookeeper_session_timeout_ms: int = 18_000
    zookeeper_connection_timeout_ms: int = 18_000
    broker_rack: str | None = None
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_check_interval_seconds: int = 300
    leader_imbalance_per_broker_percentage: int = 10

    @classmethod
    def of(cls, config: Any) -> ClusterSettings:
        """From a BrokerConfig (``zookeeper.connection.timeout.ms`` defaults to the session's)."""
        session = int(config.zookeeper_session_timeout_ms)
        return cls(
            str(config.zookeeper_connect),
            session,
            int(config.zookeeper_connection_timeout_ms or session),
            config.broker_rack,
            bool(config.unclean_leader_election_enable),
            bool(config.auto_leader_rebalance_enable),
            int(config.leader_imbalance_check_interval_seconds),
            int(config.leader_imbalance_per_broker_percentage),
        )


def join(broker: Broker, endpoint: tuple[str, int]) -> ZkBroker:
    """Join ``broker`` to the cluster of its ``zookeeper.connect`` (Broker's ``join``; see the module doc).

    Runs off the event loop (ZooKeeper calls block). The link's ``cluster_id`` is the cluster's.
    """
    loop = broker.loop
    apply = broker.replica_manager.apply_states

    def on_topic_changed(name: str) -> None:
        if loop is not None:
            loop.call_soon_threadsafe(apply, name)

    link = ZkBroker(
        broker.node_id,
        endpoint,
        ClusterSettings.of(broker.config),
        broker.metadata,
        broker.log_manager,
        broker.config.log_defaults(),
        listeners=broker.advertised_endpoints,
        protocols=broker.security.protocols,
        on_topic_changed=on_topic_changed,
    )
    broker.producer_ids.use_blocks_from(lambda size: link.zk.allocate_producer_id_block(broker.node_id, size))
    link.start(broker.cluster_id)
    follow_broker_configs(broker, link)
    follow_acls(broker.authorizer, link.zk.zk, link.run_on_worker)  # /kafka-acl* with an authorizer
    # /config/users, /config/clients, /config/ips
    follow_client_quotas(broker.quotas, broker.node_id, broker.loop, link.zk, link.run_on_worker)
    return link


class ZkConfigStore:
    """The dynamic broker configs in Kafka's znodes: ``/config/brokers/<id>`` and
    ``/config/brokers/<default>`` (dynamic_config.py's ConfigStore)."""

    def __init__(self, zk: KafkaZkClient, node_id: int) -> None:
        self.zk = zk
        self.node_id = node_id

    def load(self) -> dict[str, dict[str, str]]:
        entities = (DEFAULT_ENTITY, str(self.node_id))
        return {entity: props for entity in entities if (props := self.zk.broker_config(entity))}

    def save(self, entity: str, props: Mapping[str, str]) -> None:
        self.zk.set_broker_config(entity, props)


def follow_broker_configs(broker: Broker, link: ZkBroker) -> None:
    """Keep the broker's dynamic configs in ZooKeeper from now on, and apply every change to
    its two znodes (made through any broker) on the link's worker thread."""
    broker.dynamic_config.use_store(ZkConfigStore(link.zk, broker.node_id))

    def reload() -> None:
        try:
            broker.use_config(broker.dynamic_config.reload(), link)
        except Exception:  # a bad znode must not stop the worker; the next change retries
            _log.exception("broker %d: applying the dynamic broker configs failed", broker.node_id)

    def changed(*_: Any) -> None:
        link.run_on_worker(reload)

    for entity in (DEFAULT_ENTITY, str(broker.node_id)):
        link.zk.zk.DataWatch(f"{CONFIG_BROKERS}/{entity}", changed)  # also fires once now


class ZkBroker:
    """This broker in a ZooKeeper cluster (see the module doc)."""

    def __init__(
        self,
        node_id: int,
        endpoint: tuple[str, int],
        settings: ClusterSettings,
        metadata: MetadataCache,
        logs: LogManager,
        defaults: Mapping[str, Any],
        listeners: tuple[tuple[str, str, int], ...] = (),
        protocols: Mapping[str, str] | None = None,
        on_topic_changed: Callable[[str], None] | None = None,
    ) -> None:
        """``listeners``, ``protocols``: every listener's advertised endpoint and security
        protocol (registered; Metadata per listener); ``on_topic_changed``: told the name of each
        topic whose znodes changed (from the worker thread)."""
        self.node_id = node_id
        self.endpoint = endpoint
        self.listeners = tuple(listeners)
        self.protocols: dict[str, str] = dict(protocols or {})
        self.settings = settings
        self.metadata = metadata
        self.logs = logs
        self.defaults = dict(defaults)
        self.zk = KafkaZkClient(
            settings.zookeeper_connect,
            session_timeout_ms=settings.zookeeper_session_timeout_ms,
            connection_timeout_ms=settings.zookeeper_connection_timeout_ms,
        )
        self.controller = ZkController(
            self.zk, node_id, unclean_leader_election=settings.unclean_leader_election_enable
        )
        self._events: queue.Queue[Any] = queue.Queue()
        self._pending: set[Any] = set()  # coalescable events queued and not yet begun
        self._pending_lock = threading.Lock()
        self._worker: threading.Thread | None = None
        self._watched_topics: set[str] = set()
        self._watched_states: set[tuple[str, int]] = set()
        self._closed = False
        self._stopping = False  # in controlled shutdown: no re-registration after a lost session
        self._session_lost = False
        self._suspended = False
        self._failed_dirs: dict[str, tuple[tuple[str, int], ...]] = {}  # log dir -> its partitions
        self._lost: dict[tuple[str, int], set[int]] = {}  # partition -> brokers whose replica's dir failed
        self.changed = threading.Condition()  # notified after each handled event (tests, create_topic)
        self.on_topic_changed: Callable[[str], None] = on_topic_changed or (lambda name: None)

    # -- lifecycle -----------------------------------------------------------

    def registration(self) -> BrokerRegistration:
        """This broker's ``/brokers/ids/<id>``: every listener (the inter-broker one, at
        ``self.endpoint``, first) with its security protocol, as Kafka registers them."""
        host, port = self.endpoint
        inter = ("PLAINTEXT", host, port)
        others = tuple(e for e in self.listeners if (e[1], e[2]) != (host, port))
        named = next((e for e in self.listeners if (e[1], e[2]) == (host, port)), inter)
        return BrokerRegistration(
            self.node_id, (named, *others), self.settings.broker_rack, tuple(self.protocols.items())
        )

    def start(self, cluster_id: str) -> str:
        """Join the cluster; returns its id (``cluster_id`` if this broker made it)."""
        self.logs.dir_failures.add_listener(self._on_dir_failure)  # queued until the worker runs
        self.zk.start()
        cluster = self.zk.get_or_create_cluster_id(cluster_id)
        self._load_local_logs()
        self.zk.register_broker(self.registration())
        self.metadata.set_cluster_id(cluster)
        self.zk.add_state_listener(self._on_session)
        self._worker = threading.Thread(target=self._run, name=f"logstore-zk-{self.node_id}", daemon=True)
        self._worker.start()
        zk = self.zk.zk
        zk.DataWatch(CONTROLLER, lambda *_: self._queue("controller"))
        zk.ChildrenWatch(BROKER_IDS, lambda *_: self._queue("brokers"))
        zk.ChildrenWatch(BROKER_TOPICS, lambda *_: self._queue("topics"))
        zk.ChildrenWatch(DELETE_TOPICS, lambda *_: self._queue("deletions"))
        zk.ensure_path(CONTROLLED_SHUTDOWN)
        zk.ChildrenWatch(CONTROLLED_SHUTDOWN, lambda *_: self._queue("shutdowns"))
        zk.ensure_path(OFFLINE_LOG_DIRS)
        zk.ChildrenWatch(OFFLINE_LOG_DIRS, lambda *_: self._queue("offline"))
        self.wait_idle(30)
        return cluster

    def _load_local_logs(self) -> None:
        """Open the logs on disk of replicas still assigned here; delete the rest (a topic
        deleted, or a replica moved, while this broker was down)."""
        assert self.logs.replicated, "a cluster broker's LogManager keeps replicated high watermarks"
        configs: dict[tuple[str, int], LogConfig] = {}
        stale: list[tuple[str, int]] = []
        assignments: dict[str, TopicAssignment | None] = {}
        for topic, partition in self.logs.log_dirs_on_disk():
            if topic not in assignments:
                assignments[topic] = self.zk.topic_assignment(topic)
            found = assignments[topic]
            if found is not None and self.node_id in found.partitions.get(partition, ()):
                configs[(topic, partition)] = LogConfig.from_dict(
                    self.zk.topic_config(topic), defaults=self.defaults
                )
            else:
                stale.append((topic, partition))
                configs[(topic, partition)] = LogConfig.from_dict({}, defaults=self.defaults)
        self.logs.load(configs)
        if stale:
            _log.info(
                "deleting %d log(s) no longer assigned to broker %d: %s", len(stale), self.node_id, stale
            )
            self.logs.delete_logs(stale)

    def _on_session(self, state: KazooState) -> None:
        """Kazoo's session states. After LOST (the session expired: the registration and any
        controllership are gone) kazoo connects again with a new session; only then, at
        CONNECTED, can the broker register again and run for controller."""
        if self._closed or self._stopping:
            return
        if state == KazooState.LOST:
            self._session_lost = True
            _log.warning(
                "broker %d lost its ZooKeeper session; it re-registers on reconnection", self.node_id
            )
        elif state == KazooState.SUSPENDED:
            self._suspended = True
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = self._suspended = False
            self._queue("session")
            self._resync()
        elif state == KazooState.CONNECTED and self._suspended:
            # The same session, back: an event whose handling the disconnection cut off (its
            # ZooKeeper reads failed) would wait for the next change; go over everything now.
            self._suspended = False
            self._resync()

    def _resync(self) -> None:
        for event in ("controller", "brokers", "topics", "shutdowns"):
            self._queue(event)
        for name in sorted(self._watched_topics):
            self._queue(("topic", name))

    def close(self) -> None:
        """Leave the cluster: resign as controller, end the session (the registration goes)."""
        if self._closed:
            return
        self._closed = True
        with self.changed:
            self.changed.notify_all()
        self._events.put(_STOP)
        if self._worker is not None:
            self._worker.join(30)
        if self.zk.zk.connected:  # else the session's end frees /controller anyway
            with contextlib.suppress(Exception):  # ZkError, or kazoo's on a lost connection
                self.controller.resign()
        self.zk.close()

    def run_on_worker(self, call: Callable[[], None]) -> None:
        """Run ``call`` on the worker thread, after the changes queued before it (its errors are
        the caller's to catch: the worker goes on)."""
        self._queue(("call", call, concurrent.futures.Future()))

    def _queue(self, event: Any) -> None:
        """Queue a change to handle. A change already queued and not yet begun is not queued
        again: each handler re-reads ZooKeeper, so one pass covers every notice before it began
        (a burst of ISR changes on the 50 partitions of ``__consumer_offsets`` was 50 passes
        over the topic each, and held up the news of new topics and leaders by seconds)."""
        if self._closed:
            if isinstance(event, tuple) and event[0] == "call" and not event[2].done():
                event[2].set_exception(ControllerMovedError(f"broker {self.node_id} is stopping"))
            return
        if _coalescable(event):
            with self._pending_lock:
                if event in self._pending:
                    return
                self._pending.add(event)
        self._events.put(event)

    def wait_idle(self, timeout: float) -> bool:
        """Wait until every queued event is handled (True), or ``timeout`` seconds (False)."""
        done = threading.Event()
        self._events.put(done)
        return done.wait(timeout)

    # -- the worker ----------------------------------------------------------

    def _run(self) -> None:
        interval = self.settings.leader_imbalance_check_interval_seconds
        next_check = time.monotonic() + interval
        while True:
            try:
                event = self._events.get(timeout=max(0.0, next_check - time.monotonic()))
            except queue.Empty:
                next_check = time.monotonic() + interval
                event = "rebalance"
            if event is _STOP:
                self._drain_stopped()
                return
            if _coalescable(event):  # from now on, a new notice queues another pass
                with self._pending_lock:
                    self._pending.discard(event)
            if isinstance(event, threading.Event):
                event.set()
                continue
            if isinstance(event, tuple) and event[0] == "call":
                _, call, future = event
                try:
                    future.set_result(call())
                except BaseException as e:  # the caller raises it
                    future.set_exception(e)
                continue
            try:
                self._handle(event)
            except ControllerMovedError as e:
                _log.warning("%s", e)
            except Exception:  # one bad pass must not stop the broker's view of the cluster
                _log.exception("broker %d: handling %r failed; the next change retries", self.node_id, event)
            with self.changed:
                self.changed.notify_all()

    def _drain_stopped(self) -> None:
        """The worker stops: calls still queued for the controller fail at once (their callers,
        request handlers on executor threads, would otherwise wait out their timeout and hold up
        the event loop's shutdown), and idle waits end. Calls queued later fail in ``_queue``."""
        while True:  # bounded: nothing is queued once closed (``_queue`` refuses)
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return
            if isinstance(event, threading.Event):
                event.set()
            elif isinstance(event, tuple) and event[0] == "call" and not event[2].done():
                event[2].set_exception(ControllerMovedError(f"broker {self.node_id} is stopping"))

    def _handle(self, event: Any) -> None:
        if event == "session":
            self.controller.session_lost()
            if self._stopping:
                return
            self.zk.register_broker(self.registration())
            for log_dir, partitions in sorted(self._failed_dirs.items()):  # gone with the old session
                self._report_failed_dir(log_dir, partitions)
            event = "controller"
        if event == "controller":
            self.metadata.set_controller(self.zk.controller_id() or NO_LEADER)
            if self.metadata.controller_id == NO_LEADER or self.controller.active:
                if self.controller.elect():
                    self.metadata.set_controller(self.node_id)
                    self._apply_own(self.controller.on_brokers_changed())
                    self._delete_marked()
                else:
                    self.metadata.set_controller(self.zk.controller_id() or NO_LEADER)
        elif event == "brokers":
            live = self.zk.live_brokers()
            self.metadata.set_brokers(
                BrokerEndpoint(b, reg.endpoints[0][1], reg.endpoints[0][2], reg.rack, reg.endpoints)
                for b, reg in live.items()
            )
            if self.controller.active:
                self._apply_own(self.controller.on_brokers_changed())
            for name in self.metadata.topic_names():  # a leader's endpoint may be known only now
                self.on_topic_changed(name)
        elif event == "topics":
            self._sync_topics()
        elif event == "offline":  # a broker's log dir failed (or its broker's session ended)
            lost = self.zk.offline_replicas()
            moved = {key[0] for key in set(lost) | set(self._lost) if lost.get(key) != self._lost.get(key)}
            self._lost = lost
            if self.controller.active:
                self._apply_own(self.controller.on_brokers_changed())
            for name in sorted(moved & set(self.metadata.topic_names())):  # offline_replicas in Metadata
                self._sync_topic(name)
        elif event == "shutdowns":
            if self.controller.active:
                self._apply_own(self.controller.on_brokers_changed(self.zk.controlled_shutdowns()))
        elif event == "deletions":
            if self.controller.active:
                self._delete_marked()
        elif isinstance(event, tuple) and event[0] == "dir-failed":
            self._failed_dirs[event[1]] = event[2]
            self._report_failed_dir(event[1], event[2])
        elif isinstance(event, tuple) and event[0] == "topic":
            self._sync_topic(event[1])
        elif event == "rebalance" and self.controller.active and self.settings.auto_leader_rebalance_enable:
            self.controller.rebalance_leaders(self.settings.leader_imbalance_per_broker_percentage)

    def _on_dir_failure(self, log_dir: str, partitions: list[tuple[str, int]]) -> None:
        """The LogManager's notice that ``log_dir`` failed (from the thread that found it)."""
        self._queue(("dir-failed", log_dir, tuple(partitions)))

    def _report_failed_dir(self, log_dir: str, partitions: Sequence[tuple[str, int]]) -> None:
        try:
            self.zk.report_offline_log_dir(self.node_id, log_dir, partitions)
        except ZkError as e:  # said again with the next session
            _log.warning("broker %d: %s; the controller learns of it with the next session", self.node_id, e)
            return
        _log.warning(
            "broker %d: log dir %s is offline; the controller moves its %d replica(s) elsewhere",
            self.node_id, log_dir, len(partitions),
        )  # fmt: skip

    def _apply_own(self, result: ElectionResult) -> None:
        """The controller's new states, taken by this broker at once rather than when its own
        watches' notices come round in the queue: a leadership given to this broker starts
        now (the failover's first acknowledgement waits for it)."""
        for topic in sorted({t for t, _ in result.changed}):
            self._sync_topic(topic)

    # -- topics --------------------------------------------------------------

    def _sync_topics(self) -> None:
        names = set(self.zk.topics())
        for gone in sorted(set(self.metadata.topic_names()) - names):
            self._forget(gone)
        for name in sorted(names - self._watched_topics):
            self._watched_topics.add(name)
            for path in (f"{BROKER_TOPICS}/{name}", f"{CONFIG_TOPICS}/{name}"):
                self.zk.zk.DataWatch(path, lambda *_, n=name: self._queue(("topic", n)))
        if self.controller.active:
            self._apply_own(self.controller.on_brokers_changed())  # states for new partitions

    def _forget(self, name: str) -> None:
        self.metadata.remove_topic(name)
        self.on_topic_changed(name)
        self._watched_topics.discard(name)
        mine = [key for key in self.logs.logs() if key[0] == name]
        if mine:
            self.logs.delete_logs(mine)
            _log.info("deleted the logs of topic %s (%d partitions)", name, len(mine))

    def _sync_topic(self, name: str) -> None:
        assignment = self.zk.topic_assignment(name)
        if assignment is None:
            self._forget(name)
            return
        config = LogConfig.from_dict(self.zk.topic_config(name), defaults=self.defaults)
        states = []
        for partition, replicas in sorted(assignment.partitions.items()):
            if (name, partition) not in self._watched_states:
                self._watched_states.add((name, partition))
                self.zk.zk.DataWatch(
                    f"{BROKER_TOPICS}/{name}/partitions/{partition}/state",
                    lambda *_, n=name: self._queue(("topic", n)),
                )
            state = self.zk.partition_state(name, partition)
            if state is None:
                states.append(PartitionState(NO_LEADER, -1, replicas, ()))
                continue
            lost = self._lost.get((name, partition), set())
            offline = tuple(b for b in replicas if self.metadata.broker(b) is None or b in lost)
            states.append(
                PartitionState(
                    state.leader, state.leader_epoch, replicas, state.isr, offline, state.zk_version
                )
            )
        self.metadata.put_topic(TopicMetadata(name, assignment.topic_id, config, tuple(states)))
        missing = {
            (name, p): config
            for p, replicas in assignment.partitions.items()
            if self.node_id in replicas and self.logs.find_log(name, p) is None
            and self.logs.offline_dir_of(name, p) is None  # in a failed log dir: offline, not made anew
        }
        if missing:
            self.logs.create_logs(missing)
        self.logs.set_config(name, config)
        self.on_topic_changed(name)

    # -- controlled shutdown ---------------------------------------------------------

    def controlled_shutdown(self, timeout: float) -> list[tuple[str, int]]:
        """Ask the controller to move this broker's leaderships elsewhere (and take it out of every
        ISR), and wait until the metadata shows it done or ``timeout`` s. Returns the partitions it
        still leads: those with no other live replica in sync (they stay until it goes). With
        ZooKeeper unreachable the request cannot be made: the broker stops without it (as Kafka's
        does once its retries are spent), and the controller moves the leaderships when its
        session ends."""
        self._stopping = True
        try:
            self.zk.request_controlled_shutdown(self.node_id, timeout)
        except ZkError as e:
            _log.warning("broker %d stops without a controlled shutdown: %s", self.node_id, e)
            return self._led()
        self._wait_for(lambda: not self._movable_leaderships(), timeout)
        return self._led()

    def _led(self) -> list[tuple[str, int]]:
        led = []
        for name in self.metadata.topic_names():
            topic = self.metadata.topic(name)
            for p, state in enumerate(topic.partitions if topic is not None else ()):
                if state.leader == self.node_id:
                    led.append((name, p))
        return led

    def _movable_leaderships(self) -> bool:
        live = {b.node_id for b in self.metadata.brokers()}
        for name, p in self._led():
            state = self.metadata.partition_state(name, p)
            if state is not None and any(b != self.node_id and b in live for b in state.isr):
                return True
        return False

    # -- ISR changes (AlterPartition, when this broker is the controller) -------

    @property
    def is_controller(self) -> bool:
        return self.controller.active

    def alter_partition(
        self,
        topic: str,
        partition: int,
        leader: int,
        leader_epoch: int,
        isr: tuple[int, ...],
        partition_epoch: int,
    ) -> tuple[ErrorCode, PartitionState | None]:
        """A leader's ISR change, made by the controller on the worker thread (the controller is
        single-threaded); blocks until done. (error, the partition's state after it or None)."""
        try:
            error, state = self.on_controller(
                lambda: self.controller.alter_partition(
                    topic, partition, leader, leader_epoch, isr, partition_epoch
                )
            )
        except ControllerMovedError:
            return ErrorCode.not_controller, None
        if state is None:
            return error, None
        replicas = self.metadata.partition_state(topic, partition)
        assigned = replicas.replicas if replicas is not None else tuple(state.isr)
        return error, PartitionState(
            state.leader, state.leader_epoch, assigned, state.isr, (), state.zk_version
        )

    def on_controller(self, call: Callable[[], _T], timeout: float = 30.0) -> _T:
        """Run ``call`` on the worker thread, where the controller runs (it is single-threaded),
        and return its result; blocks. ControllerMovedError if this broker is not the controller
        (or stops being it, or the worker does not get to it within ``timeout`` s)."""
        future: concurrent.futures.Future[Any] = concurrent.futures.Future()
        self._queue(("call", call, future))
        deadline = time.monotonic() + timeout
        while True:  # bounded by the deadline
            try:
                return cast(_T, future.result(min(0.5, max(deadline - time.monotonic(), 0.0))))
            except concurrent.futures.TimeoutError:
                # A call queued just as the worker drained its queue and stopped: nobody will run it.
                stopped = self._closed and (self._worker is None or not self._worker.is_alive())
                if stopped or time.monotonic() >= deadline:
                    what = "is stopping" if stopped else f"got no answer from its controller in {timeout} s"
                    raise ControllerMovedError(f"broker {self.node_id} {what}") from None

    def elect_leaders(
        self, election_type: int, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """ElectLeaders on the controller (ControllerMovedError if this broker is not it)."""
        return self.on_controller(lambda: self.controller.elect_leaders(election_type, partitions))

    def alter_reassignments(
        self, changes: Mapping[tuple[str, int], Sequence[int] | None]
    ) -> dict[tuple[str, int], tuple[ErrorCode, str | None]]:
        """AlterPartitionReassignments on the controller (ControllerMovedError if not it)."""
        return self.on_controller(lambda: self.controller.alter_reassignments(changes))

    def list_reassignments(
        self, partitions: list[tuple[str, int]] | None
    ) -> dict[tuple[str, int], tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]]:
        """ListPartitionReassignments on the controller (ControllerMovedError if not it)."""
        return self.on_controller(lambda: self.controller.list_reassignments(partitions))

    def _delete_marked(self) -> None:
        for name in self.zk.topics_to_delete():
            self.zk.delete_topic_znodes(name)
            _log.info("deleted topic %s", name)

    # -- topic changes (any broker: written to ZooKeeper, acted on by the controller) ----------

    def create_topic(
        self,
        name: str,
        partitions: int,
        config: Mapping[str, Any],
        replication_factor: int = 1,
        assignment: Mapping[int, Sequence[int]] | None = None,
        timeout: float = 30.0,
    ) -> None:
        """Write the topic's assignment and config; return once this broker's metadata has it
        with a leader for each partition (or ``timeout`` s)."""
        LogConfig.from_dict(dict(config), defaults=self.defaults)  # a bad config: refused before writing
        if assignment is None:
            racks = {b.node_id: b.rack for b in self.metadata.brokers()}
            assignment = assign_replicas(racks, partitions, replication_factor)
        made = TopicAssignment(uuid.uuid4(), {p: tuple(r) for p, r in assignment.items()})
        try:
            self.zk.create_topic(name, made, {k: str(v) for k, v in config.items()})
        except NodeExistsError:
            raise TopicExistsError(f"topic {name!r} already exists") from None
        self._wait_for(lambda: self._ready(name, len(made.partitions)), timeout)

    def _ready(self, name: str, partitions: int) -> bool:
        topic = self.metadata.topic(name)
        return (
            topic is not None
            and len(topic.partitions) == partitions
            and all(p.leader != NO_LEADER for p in topic.partitions)
        )

    def _wait_for(self, ready: Callable[[], bool], timeout: float) -> None:
        """Wait until ``ready()``, ``timeout`` s, or this broker leaves (a caller on an executor
        thread must not hold up the broker's exit)."""
        deadline = time.monotonic() + timeout
        with self.changed:
            while not ready() and not self._closed:
                left = deadline - time.monotonic()
                if left <= 0:
                    return
                self.changed.wait(min(left, 0.5))

    def delete_topic(self, name: str, timeout: float = 5.0) -> None:
        """Mark ``name`` for deletion; return once it is gone from this broker's metadata."""
        if self.zk.topic_assignment(name) is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        self.zk.mark_for_deletion(name)
        self._wait_for(lambda: not self.metadata.has_topic(name), timeout)

    def set_defaults(self, defaults: Mapping[str, Any]) -> None:
        """New log defaults of this broker (a dynamic broker config changed): every topic is
        read again and its logs take the new config (the worker thread does it)."""
        LogConfig.from_dict({}, defaults=defaults)  # fail before changing anything
        self.defaults = dict(defaults)
        for name in self.metadata.topic_names():
            self._queue(("topic", name))

    def set_topic_overrides(self, name: str, config: Mapping[str, Any]) -> LogConfig:
        """Make ``config`` the topic's overrides (in ``/config/topics``); every broker applies it."""
        if self.zk.topic_assignment(name) is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        new = LogConfig.from_dict(dict(config), defaults=self.defaults)
        self.zk.set_topic_config(name, {k: str(v) for k, v in config.items()})
        self._wait_for(
            lambda: not self.metadata.has_topic(name) or self.metadata.topic_config(name) == new, 10
        )
        return new

    def add_partitions(self, name: str, total: int, timeout: float = 5.0) -> None:
        """Grow ``name`` to ``total`` partitions, new replicas assigned as Kafka does."""
        current = self.zk.topic_assignment(name)
        if current is None:
            raise UnknownTopicError(f"unknown topic {name!r}")
        count = len(current.partitions)
        if total <= count:
            raise InvalidArgumentError(f"topic {name!r} has {count} partitions; ask for more than that")
        racks = {b.node_id: b.rack for b in self.metadata.brokers()}
        extra = assign_replicas(racks, total - count, len(current.partitions[0]), start_partition=count)
        grown = dataclasses.replace(
            current, partitions={**current.partitions, **{p: tuple(r) for p, r in extra.items()}}
        )
        self.zk.set_topic_assignment(name, grown)
        self._wait_for(lambda: self._ready(name, total), timeout)
