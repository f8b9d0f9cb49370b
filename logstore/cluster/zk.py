"""Kafka's znodes, read and written with kazoo (Kafka's ``KafkaZkClient`` and ``ZkData``).

The paths and JSON are Kafka's own, so Kafka's tools would read them::

    /cluster/id                                {"version":"1","id":"<cluster id>"}
    /brokers/ids/<id>            ephemeral     {"version":5,"host":..,"port":..,"endpoints":["PLAINTEXT://h:p"],
                                                "listener_security_protocol_map":{..},"jmx_port":-1,
                                                "timestamp":"<ms>","rack":..(when set),"features":{}}
    /controller                  ephemeral     {"version":1,"brokerid":<id>,"timestamp":"<ms>"}
    /controller_epoch                          "<epoch>"
    /brokers/topics/<t>                        {"version":3,"topic_id":"<base64>","partitions":{"0":[1,2,3]},
                                                "adding_replicas":{},"removing_replicas":{}}
    /brokers/topics/<t>/partitions/<p>/state   {"version":1,"controller_epoch":..,"leader":..,
                                                "leader_epoch":..,"isr":[..]}
    /config/topics/<t>                         {"version":1,"config":{"retention.ms":"1000"}}
    /config/brokers/<id>                       {"version":1,"config":{"log.retention.ms":"60000"}}
    /config/brokers/<default>                  (the same: the cluster-wide dynamic broker configs)
    /admin/delete_topics/<t>                   (empty: the topic is marked for deletion)

And logstore's own, where Kafka's ZooKeeper mode had a request instead::

    /admin/controlled_shutdown/<id>          ephemeral  (empty: the broker asks to shut down)
    /admin/offline_log_dirs/<id>-<seq>      ephemeral  {"version":1,"broker":<id>,"log_dir":"/data/b",
                                                        "partitions":[{"topic":"t","partition":0}]}

An offline log dir's znode stands for Kafka's ``/log_dir_event_notification``
plus the KAFKA_STORAGE_ERROR a LeaderAndIsr answer would carry: it names the
replicas the broker lost. Ephemeral, so a restarted broker (which tries the
directory again) has none.

Fencing: a controller's writes to partition state are conditional on the
znode version it last read (``zkVersion``) and carry its controller epoch;
the controller znode and the epoch bump are one ZooKeeper transaction, so
two brokers can never both win the same epoch.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError
from kazoo.protocol.connection import ConnectionHandler
from kazoo.protocol.serialization import Connect
from kazoo.protocol.states import KazooState
from kazoo.retry import KazooRetry

from logstore.errors import LogstoreError

HANDSHAKE_MIN_S = 1.0


class _QuickHandshake(ConnectionHandler):
    """kazoo's connection, with the session handshake's wait cut to ``handshake_s`` seconds."""

    handshake_s = HANDSHAKE_MIN_S

    def _invoke(self, timeout: float, request: Any, xid: int | None = None) -> Any:
        if isinstance(request, Connect):
            timeout = min(timeout, self.handshake_s)
        return super()._invoke(timeout, request, xid)


_log = logging.getLogger("logstore.cluster")

BROKER_IDS = "/brokers/ids"
BROKER_TOPICS = "/brokers/topics"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
CLUSTER_ID = "/cluster/id"
CONFIG_TOPICS = "/config/topics"
CONFIG_CHANGES = "/config/changes"
CONFIG_BROKERS = "/config/brokers"
DELETE_TOPICS = "/admin/delete_topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
CONTROLLED_SHUTDOWN = "/admin/controlled_shutdown"
OFFLINE_LOG_DIRS = "/admin/offline_log_dirs"
PERSISTENT_PATHS = (BROKER_IDS, BROKER_TOPICS, CONFIG_TOPICS, CONFIG_CHANGES, DELETE_TOPICS, "/cluster")


class ZkError(LogstoreError):
    """ZooKeeper could not be reached, or holds what this broker cannot accept."""


class FencedControllerError(ZkError):
    """A controller's write was refused: ``/controller_epoch`` moved on (a newer controller)."""


class DuplicateBrokerIdError(ZkError):
    """Another live broker holds this ``broker.id``."""


def _json(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":")).encode()


def _load(data: bytes, path: str) -> Any:
    try:
        return json.loads(data.decode())
    except (UnicodeDecodeError, ValueError) as e:
        raise ZkError(f"{path} does not hold JSON ({e}); was it written by something else?") from None


def topic_id_text(topic_id: uuid.UUID) -> str:
    """Kafka's text form of a topic ID: 22 characters of URL-safe base64, unpadded."""
    return base64.urlsafe_b64encode(topic_id.bytes).decode("ascii").rstrip("=")


def topic_id_from_text(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


@dataclass(frozen=True, slots=True)
class BrokerRegistration:
    """A broker as ``/brokers/ids/<id>`` holds it: its endpoints (listener name -> host, port) and rack."""

    broker_id: int
    endpoints: tuple[tuple[str, str, int], ...]  # (listener name, host, port); the inter-broker one first
    rack: str | None = None
    protocols: tuple[tuple[str, str], ...] = ()  # listener name -> security protocol (default: the name)

    def encode(self) -> bytes:
        _name, host, port = self.endpoints[0]
        data: dict[str, Any] = {
            "features": {},
            "listener_security_protocol_map": {
                n: dict(self.protocols).get(n, n) for n, _, _ in self.endpoints
            },
            "endpoints": [f"{n}://{h}:{p}" for n, h, p in self.endpoints],
            "jmx_port": -1,
            "port": port,
            "host": host,
            "version": 5,
            "timestamp": str(int(time.time() * 1000)),
        }
        if self.rack is not None:
            data["rack"] = self.rack
        return _json(data)

    @classmethod
    def decode(cls, broker_id: int, data: bytes) -> BrokerRegistration:
        value = _load(data, f"{BROKER_IDS}/{broker_id}")
        endpoints = []
        for endpoint in value.get("endpoints") or [f"PLAINTEXT://{value['host']}:{value['port']}"]:
            name, rest = endpoint.split("://", 1)
            host, port = rest.rsplit(":", 1)
            endpoints.append((name, host.strip("[]"), int(port)))
        return cls(broker_id, tuple(endpoints), value.get("rack"))


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    """A partition's state znode: leader, leader epoch, ISR, the controller epoch that wrote it,
    and the znode version it was read at (for conditional updates; -1 if not read)."""

    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    zk_version: int = field(default=-1, compare=False)

    def encode(self) -> bytes:
        return _json(
            {
                "controller_epoch": self.controller_epoch,
                "leader": self.leader,
                "version": 1,
                "leader_epoch": self.leader_epoch,
                "isr": list(self.isr),
            }
        )

    @classmethod
    def decode(cls, data: bytes, version: int, path: str) -> LeaderAndIsr:
        value = _load(data, path)
        return cls(
            int(value["leader"]),
            int(value["leader_epoch"]),
            tuple(int(b) for b in value["isr"]),
            int(value["controller_epoch"]),
            version,
        )


@dataclass(frozen=True, slots=True)
class TopicAssignment:
    """``/brokers/topics/<t>``: the topic's ID and each partition's replicas (the first preferred).

    During a reassignment (KIP-455) a partition's replicas are the target
    replicas followed by the original ones not in the target; ``adding`` holds
    the target's new replicas and ``removing`` the originals that will go.
    """

    topic_id: uuid.UUID
    partitions: dict[int, tuple[int, ...]]
    adding: dict[int, tuple[int, ...]] = field(default_factory=dict)
    removing: dict[int, tuple[int, ...]] = field(default_factory=dict)

    def encode(self) -> bytes:
        return _json(
            {
                "version": 3,
                "topic_id": topic_id_text(self.topic_id),
                "partitions": {str(p): list(r) for p, r in sorted(self.partitions.items())},
                "adding_replicas": {str(p): list(r) for p, r in sorted(self.adding.items()) if r},
                "removing_replicas": {str(p): list(r) for p, r in sorted(self.removing.items()) if r},
            }
        )

    @classmethod
    def decode(cls, data: bytes, path: str) -> TopicAssignment:
        value = _load(data, path)
        text = value.get("topic_id")

        def replicas(key: str) -> dict[int, tuple[int, ...]]:
            return {int(p): tuple(int(b) for b in r) for p, r in (value.get(key) or {}).items() if r}

        return cls(
            topic_id_from_text(text) if text else uuid.UUID(int=0),
            replicas("partitions"),
            replicas("adding_replicas"),
            replicas("removing_replicas"),
        )

    def reassigning(self, partition: int) -> bool:
        return bool(self.adding.get(partition) or self.removing.get(partition))

    def target(self, partition: int) -> tuple[int, ...]:
        """The replicas a partition ends with: its replicas less those being removed."""
        removing = self.removing.get(partition, ())
        return tuple(b for b in self.partitions[partition] if b not in removing)

    def original(self, partition: int) -> tuple[int, ...]:
        """The replicas a partition had before its reassignment: its replicas less those being added."""
        adding = self.adding.get(partition, ())
        return tuple(b for b in self.partitions[partition] if b not in adding)

    def with_partition(
        self,
        partition: int,
        replicas: tuple[int, ...],
        adding: tuple[int, ...] = (),
        removing: tuple[int, ...] = (),
    ) -> TopicAssignment:
        """A copy with one partition's replicas (and reassignment) replaced."""
        return TopicAssignment(
            self.topic_id,
            {**self.partitions, partition: replicas},
            {
                **{p: r for p, r in self.adding.items() if p != partition},
                **({partition: adding} if adding else {}),
            },
            {
                **{p: r for p, r in self.removing.items() if p != partition},
                **({partition: removing} if removing else {}),
            },
        )


def topic_path(topic: str) -> str:
    return f"{BROKER_TOPICS}/{topic}"


def state_path(topic: str, partition: int) -> str:
    return f"{BROKER_TOPICS}/{topic}/partitions/{partition}/state"


class KafkaZkClient:
    """One ZooKeeper session and Kafka's znodes (see the module doc). Thread-safe (kazoo's)."""

    def __init__(
        self,
        connect: str,
        *,
        session_timeout_ms: int = 18_000,
        connection_timeout_ms: int = 18_000,
        retry_backoff_ms: int = 500,
    ) -> None:
        self.connect = connect
        self.session_timeout_ms = session_timeout_ms
        self.connection_timeout_ms = connection_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        # Reconnection at least every second, as Kafka's ZooKeeper client does: a restarted
        # server gives each session it had one more timeout, and kazoo's default backoff (doubling
        # without a useful cap) can wait past it and lose the session (the ZooKeeper-restart test).
        retry = KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0)
        self.zk = KazooClient(hosts=connect, timeout=session_timeout_ms / 1000, connection_retry=retry)
        # kazoo waits session_timeout / hosts for a server's answer to the session handshake: a
        # connection that lands on a server still starting (accepted, never answered) used it all
        # and lost the session (the ZooKeeper-restart test). A short handshake tries again soon.
        handshake_s = max(HANDSHAKE_MIN_S, session_timeout_ms / 1000 / 10)
        self.zk._connection.__class__ = _QuickHandshake
        self.zk._connection.handshake_s = handshake_s
        self._state_listeners: list[Callable[[KazooState], None]] = []

    # -- session -------------------------------------------------------------

    def start(self) -> None:
        """Connect, retrying with backoff until ``zookeeper.connection.timeout.ms``; ZkError then."""
        deadline = time.monotonic() + self.connection_timeout_ms / 1000
        backoff = self.retry_backoff_ms / 1000
        attempt = 0
        for attempt in range(1, 1000):  # bounded: the deadline ends it long before
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                self.zk.start(timeout=max(min(left, 1.0), 0.1))
                break
            except Exception as e:  # kazoo's timeout, or a refused connection
                self.zk.stop()  # kazoo would go on retrying in the background
                _log.warning(
                    "ZooKeeper at %s does not answer (attempt %d: %s); retrying in %.1f s",
                    self.connect,
                    attempt,
                    e,
                    backoff,
                )
                time.sleep(min(backoff, max(deadline - time.monotonic(), 0)))
                backoff = min(backoff * 2, 10.0)
        if not self.zk.connected:
            self.zk.stop()
            raise ZkError(
                f"cannot reach ZooKeeper at {self.connect} within zookeeper.connection.timeout.ms="
                f"{self.connection_timeout_ms} ({attempt} attempts); start it (`logstore cluster up` "
                "starts one) or fix zookeeper.connect"
            )
        for path in PERSISTENT_PATHS:
            self.zk.ensure_path(path)

    @property
    def session_id(self) -> int:
        return int(self.zk.client_id[0]) if self.zk.client_id else 0

    def add_state_listener(self, listener: Callable[[KazooState], None]) -> None:
        """``listener(state)`` on each session change (CONNECTED, SUSPENDED, LOST)."""
        self.zk.add_listener(listener)

    def close(self) -> None:
        """End the session: every ephemeral znode of this broker goes at once."""
        self.zk.stop()
        self.zk.close()

    # -- cluster id ----------------------------------------------------------

    def get_or_create_cluster_id(self, candidate: str) -> str:
        """The cluster's id: ``candidate`` if this call made ``/cluster/id``, else the one there."""
        try:
            self.zk.create(CLUSTER_ID, _json({"version": "1", "id": candidate}))
            return candidate
        except NodeExistsError:
            data, _ = self.zk.get(CLUSTER_ID)
            return str(_load(data, CLUSTER_ID)["id"])

    # -- brokers -------------------------------------------------------------

    def register_broker(self, registration: BrokerRegistration, stale_wait_s: float | None = None) -> None:
        """Create ``/brokers/ids/<id>`` (ephemeral); DuplicateBrokerIdError if another session has it.

        A broker restarted soon after kill -9 finds its previous registration, whose session
        ZooKeeper has not expired yet: it waits up to ``stale_wait_s`` (default: the session
        timeout and 2 s) for that registration to go (Kafka's fix of KAFKA-7165). One still
        there after that belongs to a live broker: a duplicate id."""
        path = f"{BROKER_IDS}/{registration.broker_id}"
        wait_s = self.session_timeout_ms / 1000 + 2 if stale_wait_s is None else stale_wait_s
        deadline = time.monotonic() + wait_s
        told = False
        data = b""
        for _ in range(int(wait_s * 10) + 2):  # bounded: one pass per 0.1 s of the wait
            try:
                self.zk.create(path, registration.encode(), ephemeral=True)
                return
            except NodeExistsError:
                pass
            try:
                data, stat = self.zk.get(path)
            except NoNodeError:  # it went between the two calls: try again
                continue
            if stat.ephemeralOwner == self.session_id:
                self.zk.set(path, registration.encode())  # ours, from before a reconnection
                return
            if time.monotonic() >= deadline:
                break
            if not told:
                _log.info(
                    "broker.id=%d is registered by another session (this broker's previous run, if it "
                    "was killed); waiting up to %.0f s for it to expire", registration.broker_id, wait_s,
                )  # fmt: skip
                told = True
            time.sleep(0.1)
        if not data:
            raise ZkError(f"{path} kept appearing and going; retry the start")
        other = BrokerRegistration.decode(registration.broker_id, data)
        where = ", ".join(f"{n}://{h}:{p}" for n, h, p in other.endpoints)
        raise DuplicateBrokerIdError(
            f"broker.id={registration.broker_id} is already registered in ZooKeeper by a live broker "
            f"at {where}; give each broker its own broker.id"
        )

    def live_brokers(self, watch: Callable[[Any], None] | None = None) -> dict[int, BrokerRegistration]:
        """The registered brokers by id; ``watch`` fires once on the next change of the set."""
        brokers = {}
        for child in self.zk.get_children(BROKER_IDS, watch=watch):
            try:
                data, _ = self.zk.get(f"{BROKER_IDS}/{child}")
            except NoNodeError:
                continue  # it went away after the listing
            brokers[int(child)] = BrokerRegistration.decode(int(child), data)
        return dict(sorted(brokers.items()))

    # -- the controller ------------------------------------------------------

    def controller_epoch(self) -> tuple[int, int]:
        """(epoch, znode version) of ``/controller_epoch``; (0, -1) before any controller."""
        try:
            data, stat = self.zk.get(CONTROLLER_EPOCH)
        except NoNodeError:
            return 0, -1
        return int(data.decode()), stat.version

    def controller_id(self, watch: Callable[[Any], None] | None = None) -> int | None:
        """The controller's broker id, or None; ``watch`` fires on its next change (or creation)."""
        if watch is not None and not self.zk.exists(CONTROLLER, watch=watch):
            return None
        try:
            data, _ = self.zk.get(CONTROLLER)
        except NoNodeError:
            return None
        return int(_load(data, CONTROLLER)["brokerid"])

    def try_become_controller(self, broker_id: int) -> tuple[int, int] | None:
        """Create ``/controller`` and bump ``/controller_epoch`` in one transaction.

        Returns (the new controller epoch, the epoch znode's version): every
        write of this controller checks that version in its transaction, so a
        controller that lost its seat can write nothing. None if another
        broker is the controller (or won the race for this epoch).
        """
        for _ in range(10):  # bounded: each pass sees a newer epoch version or ends
            epoch, version = self.controller_epoch()
            if version < 0:
                with contextlib.suppress(NodeExistsError):
                    self.zk.create(CONTROLLER_EPOCH, b"0")
                continue
            transaction = self.zk.transaction()
            transaction.create(
                CONTROLLER,
                _json({"version": 1, "brokerid": broker_id, "timestamp": str(int(time.time() * 1000))}),
                ephemeral=True,
            )
            transaction.set_data(CONTROLLER_EPOCH, str(epoch + 1).encode(), version=version)
            results = transaction.commit()
            if not any(isinstance(r, Exception) for r in results):
                return epoch + 1, version + 1
            if isinstance(results[0], NodeExistsError):
                return None  # another broker is the controller
            # The epoch moved under us (a controller came and went): read it again.
        return None

    def resign_controller(self, broker_id: int) -> None:
        """Delete ``/controller`` if this broker holds it (controlled shutdown)."""
        try:
            data, stat = self.zk.get(CONTROLLER)
        except NoNodeError:
            return
        if int(_load(data, CONTROLLER)["brokerid"]) == broker_id:
            with contextlib.suppress(NoNodeError, BadVersionError):
                self.zk.delete(CONTROLLER, version=stat.version)

    # -- topics --------------------------------------------------------------

    def create_topic(self, topic: str, assignment: TopicAssignment, config: Mapping[str, str]) -> None:
        """Write the topic's config, then its assignment (Kafka's order: a broker that sees the
        assignment finds the config). NodeExistsError if the topic exists."""
        if self.zk.exists(topic_path(topic)):
            raise NodeExistsError()
        config_path = f"{CONFIG_TOPICS}/{topic}"
        value = _json({"version": 1, "config": dict(config)})
        try:
            self.zk.create(config_path, value)
        except NodeExistsError:
            self.zk.set(config_path, value)
        self.zk.create(topic_path(topic), assignment.encode())

    def topics(self, watch: Callable[[Any], None] | None = None) -> list[str]:
        """Every topic with an assignment, sorted; ``watch`` fires on the next change of the set."""
        return sorted(self.zk.get_children(BROKER_TOPICS, watch=watch))

    def topic_assignment(self, topic: str) -> TopicAssignment | None:
        try:
            data, _ = self.zk.get(topic_path(topic))
        except NoNodeError:
            return None
        return TopicAssignment.decode(data, topic_path(topic))

    def set_topic_assignment(self, topic: str, assignment: TopicAssignment) -> None:
        self.zk.set(topic_path(topic), assignment.encode())

    def topic_config(self, topic: str) -> dict[str, str]:
        try:
            data, _ = self.zk.get(f"{CONFIG_TOPICS}/{topic}")
        except NoNodeError:
            return {}
        return {str(k): str(v) for k, v in _load(data, f"{CONFIG_TOPICS}/{topic}")["config"].items()}

    def set_topic_config(self, topic: str, config: Mapping[str, str]) -> None:
        path = f"{CONFIG_TOPICS}/{topic}"
        value = _json({"version": 1, "config": dict(config)})
        try:
            self.zk.set(path, value)
        except NoNodeError:
            self.zk.create(path, value, makepath=True)

    def broker_config(self, entity: str) -> dict[str, str]:
        """The dynamic broker configs of ``entity`` (a broker id, or ``<default>``); {} if none."""
        path = f"{CONFIG_BROKERS}/{entity}"
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return {}
        return {str(k): str(v) for k, v in _load(data, path)["config"].items()}

    def set_broker_config(self, entity: str, config: Mapping[str, str]) -> None:
        """Make ``config`` the dynamic broker configs of ``entity``; every broker watches the
        znodes it reads (its own id and ``<default>``)."""
        path = f"{CONFIG_BROKERS}/{entity}"
        value = _json({"version": 1, "config": dict(config)})
        try:
            self.zk.set(path, value)
        except NoNodeError:
            self.zk.create(path, value, makepath=True)

    def allocate_producer_id_block(self, broker_id: int, size: int) -> tuple[int, int]:
        """Reserve the next ``size`` producer ids for ``broker_id``: (first, last), inclusive.

        Kafka's ``/latest_producer_id_block`` (``{"version":1,"broker":..,"block_start":"..",
        "block_end":".."}``), advanced by a conditional write, so no two brokers ever hand out
        one id. Retries while other brokers win the race (bounded)."""
        for _ in range(100):
            try:
                data, stat = self.zk.get(PRODUCER_ID_BLOCK)
            except NoNodeError:
                first, version = 0, -1
            else:
                first, version = int(_load(data, PRODUCER_ID_BLOCK)["block_end"]) + 1, stat.version
            last = first + size - 1
            block = _json(
                {"version": 1, "broker": broker_id, "block_start": str(first), "block_end": str(last)}
            )
            try:
                if version < 0:
                    self.zk.create(PRODUCER_ID_BLOCK, block)
                else:
                    self.zk.set(PRODUCER_ID_BLOCK, block, version=version)
            except (NodeExistsError, BadVersionError):
                continue  # another broker took this block: read again
            return first, last
        raise ZkError(f"{PRODUCER_ID_BLOCK}: 100 tries lost to other brokers; retry")

    def request_controlled_shutdown(self, broker_id: int, timeout: float = 5.0) -> None:
        """Ask the controller to move this broker's leaderships: an ephemeral
        ``/admin/controlled_shutdown/<id>`` (gone with the session). Kafka 4's protocol no longer
        has the ControlledShutdown request a ZooKeeper-mode broker sent; the znode carries it.
        ZkError if ZooKeeper does not take it within ``timeout`` s (the broker then stops without:
        Kafka also gives up its controlled shutdown after its retries)."""
        if not self.zk.connected:
            raise ZkError("ZooKeeper is not reachable: no controlled shutdown")
        try:
            path = f"{CONTROLLED_SHUTDOWN}/{broker_id}"
            self.zk.create_async(path, b"", ephemeral=True, makepath=True).get(timeout=timeout)
        except NodeExistsError:
            pass
        except Exception as e:  # kazoo's timeout or connection loss: the broker stops anyway
            raise ZkError(f"the controlled shutdown request failed ({e!r})") from None

    def controlled_shutdowns(self) -> set[int]:
        """The brokers that asked for a controlled shutdown."""
        self.zk.ensure_path(CONTROLLED_SHUTDOWN)
        return {int(child) for child in self.zk.get_children(CONTROLLED_SHUTDOWN) if child.isdigit()}

    def report_offline_log_dir(self, broker_id: int, log_dir: str, partitions: Sequence[tuple[str, int]]) -> None:
        """Say that ``log_dir`` of this broker failed with ``partitions`` in it: an ephemeral
        sequential ``/admin/offline_log_dirs/<id>-<seq>`` (gone with the session) that the
        controller watches. ZkError if ZooKeeper does not take it (the broker says it again with
        its next session)."""
        body = {
            "version": 1, "broker": broker_id, "log_dir": log_dir,
            "partitions": [{"topic": t, "partition": p} for t, p in sorted(partitions)],
        }  # fmt: skip
        try:
            self.zk.create(f"{OFFLINE_LOG_DIRS}/{broker_id}-", _json(body), ephemeral=True, sequence=True,
                           makepath=True)  # fmt: skip
        except Exception as e:  # kazoo's connection loss or timeout
            raise ZkError(f"could not report the offline log dir {log_dir} ({e!r})") from None

    def offline_replicas(self, watch: Callable[[Any], None] | None = None) -> dict[tuple[str, int], set[int]]:
        """The brokers whose replica of each partition is in a failed log dir (by partition)."""
        self.zk.ensure_path(OFFLINE_LOG_DIRS)
        found: dict[tuple[str, int], set[int]] = {}
        for child in self.zk.get_children(OFFLINE_LOG_DIRS, watch=watch):
            path = f"{OFFLINE_LOG_DIRS}/{child}"
            try:
                data, _ = self.zk.get(path)
            except NoNodeError:
                continue  # its broker's session ended after the listing
            body = _load(data, path)
            for entry in body.get("partitions", ()):
                found.setdefault((entry["topic"], int(entry["partition"])), set()).add(int(body["broker"]))
        return found

    def mark_for_deletion(self, topic: str) -> None:
        """Create ``/admin/delete_topics/<t>``: the controller deletes the topic."""
        with contextlib.suppress(NodeExistsError):
            self.zk.create(f"{DELETE_TOPICS}/{topic}")

    def topics_to_delete(self, watch: Callable[[Any], None] | None = None) -> list[str]:
        return sorted(self.zk.get_children(DELETE_TOPICS, watch=watch))

    def delete_topic_znodes(self, topic: str) -> None:
        """Remove the topic's assignment, states, config and deletion mark (the controller's last step)."""
        for path in (topic_path(topic), f"{CONFIG_TOPICS}/{topic}", f"{DELETE_TOPICS}/{topic}"):
            with contextlib.suppress(NoNodeError):
                self.zk.delete(path, recursive=True)

    # -- partition state -----------------------------------------------------

    def partition_state(self, topic: str, partition: int) -> LeaderAndIsr | None:
        path = state_path(topic, partition)
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return None
        return LeaderAndIsr.decode(data, stat.version, path)

    def create_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, epoch_version: int = -1
    ) -> LeaderAndIsr:
        """Create the state znode (a new partition); NodeExistsError if it is there.
        ``epoch_version``: the controller's ``/controller_epoch`` version (fencing; -1: none)."""
        path = state_path(topic, partition)
        self.zk.ensure_path(path.rsplit("/", 1)[0])
        if epoch_version < 0:
            self.zk.create(path, state.encode())
        else:
            transaction = self.zk.transaction()
            transaction.check(CONTROLLER_EPOCH, epoch_version)
            transaction.create(path, state.encode())
            results = transaction.commit()
            if isinstance(results[0], BadVersionError):
                raise FencedControllerError(f"{path}: /controller_epoch moved past version {epoch_version}")
            if isinstance(results[1], NodeExistsError):
                raise NodeExistsError()
            if isinstance(results[1], Exception):
                raise results[1]
        return LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, 0)

    def update_partition_state(
        self, topic: str, partition: int, state: LeaderAndIsr, expected_version: int, epoch_version: int = -1
    ) -> LeaderAndIsr | None:
        """Write ``state`` if the znode is still at ``expected_version``; the state with its new
        version, or None if someone else wrote it first (read it again, or stand down).
        ``epoch_version``: as :meth:`create_partition_state` (FencedControllerError)."""
        path = state_path(topic, partition)
        if epoch_version < 0:
            try:
                stat = self.zk.set(path, state.encode(), version=expected_version)
            except (BadVersionError, NoNodeError):
                return None
            version = stat.version
        else:
            transaction = self.zk.transaction()
            transaction.check(CONTROLLER_EPOCH, epoch_version)
            transaction.set_data(path, state.encode(), version=expected_version)
            results = transaction.commit()
            if isinstance(results[0], BadVersionError):  # the check failed: a newer controller
                raise FencedControllerError(f"{path}: /controller_epoch moved past version {epoch_version}")
            if isinstance(results[1], Exception):  # the state moved on (the check passed, rolled back)
                return None
            version = results[1].version
        return LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, version)

    def update_partition_states(
        self, writes: Sequence[tuple[str, int, LeaderAndIsr, int]], epoch_version: int
    ) -> list[LeaderAndIsr | None]:
        """:meth:`update_partition_state` for many partitions at once: (topic, partition, state,
        expected version) each, every transaction sent before any answer is awaited, so that
        ZooKeeper commits them together (one round trip and a few log syncs, not one per
        partition: a controlled shutdown of a broker in 150 ISRs took seconds one at a time).
        Per write, as the single one: the written state, or None if it moved on. Every write is
        fenced by ``/controller_epoch``; FencedControllerError if any found it moved."""
        pending = []
        for topic, partition, state, expected in writes:
            transaction = self.zk.transaction()
            transaction.check(CONTROLLER_EPOCH, epoch_version)
            transaction.set_data(state_path(topic, partition), state.encode(), version=expected)
            pending.append(transaction.commit_async())
        written: list[LeaderAndIsr | None] = []
        fenced = False
        for (_, _, state, _), answer in zip(writes, pending, strict=True):
            results = answer.get()
            if isinstance(results[0], BadVersionError):
                fenced = True
            if isinstance(results[0], Exception) or isinstance(results[1], Exception):
                written.append(None)
                continue
            version = results[1].version
            written.append(
                LeaderAndIsr(state.leader, state.leader_epoch, state.isr, state.controller_epoch, version)
            )
        if fenced:
            raise FencedControllerError(f"/controller_epoch moved past version {epoch_version}")
        return written


def assignment_for(partitions: Mapping[int, Sequence[int]], topic_id: uuid.UUID) -> TopicAssignment:
    """A TopicAssignment from partition -> replicas."""
    return TopicAssignment(topic_id, {p: tuple(r) for p, r in partitions.items()})
