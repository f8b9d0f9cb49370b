"""The schema registry on the broker: its HTTP listener and its records in ``_schemas``.

``schema.registry.listeners=http://127.0.0.1:8081`` (empty: off, the
default) serves Confluent's Schema Registry API (logstore/schemas/http.py) in
the broker's event loop, started and stopped with the broker. The registry's
state is the compacted ``_schemas`` topic (one partition, Confluent's
key/value JSON records: logstore/schemas/records.py): :class:`SchemasTopic`
is its :class:`~logstore.schemas.service.Journal`.

- Created on first use (the first write), ``cleanup.policy=compact``, one
  partition, ``offsets.topic.replication.factor`` replicas in a cluster (1
  alone), as the coordinators' topics are.
- A write appends its records as one batch to the partition's leader log
  (``Log.append``, as the group coordinator writes ``__consumer_offsets``),
  waits in a cluster until the ISR has them (acks=all, at most
  ``offsets.commit.timeout.ms``), and only then is it applied: the registry
  reads them back from the log (service.py).
- At start the registry reads ``_schemas`` from its start; ids are the
  highest seen + 1, so they are never reused across restarts.
- Reads are served from this broker's copy of the partition, read up to its
  high watermark.
- The writer is the leader of ``_schemas-0`` (elected as every partition
  leader is: alone, this broker; in a cluster, by the controller). A write
  on another broker answers 50004 naming the leader's broker id, until
  forwarding to the writer's registry URL is built (cluster point of issue 26).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import ssl
from typing import Any

from kio.schema.errors import ErrorCode

from logstore.broker.config.broker_config import parse_schema_registry_listeners
from logstore.broker.context import Services
from logstore.broker.replication.replica_manager import AppendResult
from logstore.errors import (
    InvalidConfigError,
    LogstoreError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    TopicExistsError,
)
from logstore.schemas import errors
from logstore.schemas.http import RegistryServer
from logstore.schemas.records import Record
from logstore.schemas.service import RegistryService
from logstore.security.acls import CLUSTER_NAME, AclOperation, ResourceType
from logstore.security.scram import MECHANISMS
from logstore.security.tls import server_context
from logstore.storage.log import Log

_log = logging.getLogger("logstore.broker")

SCHEMAS_TOPIC = "_schemas"
SCHEMAS_TOPIC_CONFIG = {"cleanup.policy": "compact"}
"""Confluent's ``kafkastore.topic`` and the one override it gives it."""
READ_MAX_BYTES = 4 * 1024 * 1024
CREATE_WAIT_S = 30.0
URLS_PATH = "/schema_registry/urls"
"""ZooKeeper: ``<id>`` holds broker <id>'s registry base URL (persistent; rewritten at each start)."""


class SchemasTopic:
    """The ``_schemas`` partition as the registry's :class:`~logstore.schemas.service.Journal`.

    Format: Confluent's records (records.py), one batch per write. Invariant:
    only the leader of ``_schemas-0`` appends, and only the registry's
    serialized writes (service.py). Crash policy: an append either lands as
    a whole batch or raises (the write answers 50001 and the state is
    unchanged); the log's own recovery truncates a torn batch at restart.
    """

    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self.urls: dict[int, str] = {}  # broker id -> its registry's base URL (read from ZooKeeper)

    def _local(self) -> Log | None:
        """This broker's copy of ``_schemas-0`` (leader or follower), or None."""
        try:
            return self.broker.replica_manager.logs_by_partition.find_log(SCHEMAS_TOPIC, 0)
        except LogstoreError:  # the log manager is closed: the broker is stopping
            return None

    def has_copy(self) -> bool:
        """Whether this broker holds a copy of ``_schemas-0`` (leader or follower)."""
        return self._local() is not None

    def start(self) -> int:
        log = self._local()
        return 0 if log is None else log.log_start_offset

    def end(self) -> int:
        log = self._local()
        return 0 if log is None else log.high_watermark

    def read(self, position: int) -> tuple[list[Record], int]:
        log = self._local()
        if log is None:
            return [], position
        try:
            batches = log.read(position, READ_MAX_BYTES).batches
        except OffsetOutOfRangeError:
            return [], position
        found: list[Record] = []
        after = position
        for batch in batches:
            if batch.next_offset <= after:
                continue
            if not batch.is_control:
                for record in batch.records:
                    if record.offset >= after and record.key is not None:
                        value = record.value
                        found.append((bytes(record.key), None if value is None else bytes(value)))
            after = batch.next_offset
        return found, after

    async def writer(self) -> str | None:
        broker = self.broker
        state = broker.metadata.partition_state(SCHEMAS_TOPIC, 0)
        if state is None or broker.cluster_link is None or state.leader == broker.node_id:
            return None  # alone, or no topic yet (the first write creates it here), or the leader
        if state.leader < 0:
            raise errors.unknown_leader(f"{SCHEMAS_TOPIC}-0 has no leader now; retry in a few seconds")
        url = self.urls.get(state.leader)
        if url is None:
            url = await asyncio.get_running_loop().run_in_executor(None, self._read_url, state.leader)
        if url is None:
            raise errors.unknown_leader(
                f"broker {state.leader} leads {SCHEMAS_TOPIC}-0 but serves no schema registry; set "
                "schema.registry.listeners on every broker of the cluster"
            )
        self.urls[state.leader] = url
        return url

    # -- where each broker's registry listens (ZooKeeper, in a cluster) ----------------

    def _zk(self) -> Any:
        """The cluster's kazoo client (None alone)."""
        return getattr(getattr(self.broker.cluster_link, "zk", None), "zk", None)

    def publish_url(self, url: str) -> None:
        """Write this broker's registry URL to ``/schema_registry/urls/<id>`` (blocks: ZooKeeper)."""
        zk = self._zk()
        if zk is None:
            return
        path = f"{URLS_PATH}/{self.broker.node_id}"
        zk.ensure_path(URLS_PATH)
        if zk.exists(path):
            zk.set(path, url.encode())
        else:
            zk.create(path, url.encode())

    def _read_url(self, node_id: int) -> str | None:
        zk = self._zk()
        if zk is None:
            return None
        try:
            data, _stat = zk.get(f"{URLS_PATH}/{node_id}")
        except Exception:  # kazoo's NoNodeError and connection errors alike: not known now
            return None
        return bytes(data).decode() if data else None

    async def append(self, records: list[Record]) -> int:
        manager = self.broker.replica_manager
        log = manager.find_log(SCHEMAS_TOPIC, 0)
        if log is None and not self.broker.metadata.has_topic(SCHEMAS_TOPIC):
            log = await self._create()
        if log is None:  # another broker leads it (now): the HTTP layer asks writer() again
            raise errors.unknown_leader(f"this broker does not lead {SCHEMAS_TOPIC}-0 (anymore); retry")
        try:
            info = log.append(records)
        except RecordTooLargeError as e:
            raise errors.store_error(f"the schema is too large for {SCHEMAS_TOPIC}: {e}") from None
        except (LogstoreError, OSError) as e:
            _log.error("appending to %s-0 failed: %s", SCHEMAS_TOPIC, e)
            raise errors.store_error(f"appending to {SCHEMAS_TOPIC}-0 failed: {e}") from None
        manager.appended(SCHEMAS_TOPIC, 0)
        after = int(info.last_offset) + 1
        if manager.replicated:
            result = AppendResult(ErrorCode.none)
            result.required_offset = after
            timeout = self.broker.config.offsets_commit_timeout_ms / 1000
            await manager.await_replication([(SCHEMAS_TOPIC, 0, result)], timeout)
            if result.error == ErrorCode.request_timed_out:
                raise errors.operation_timeout(f"{SCHEMAS_TOPIC}-0: {result.message or 'not replicated in time'}")
            if result.error != ErrorCode.none:
                raise errors.store_error(f"{SCHEMAS_TOPIC}-0: {result.error.name} {result.message or ''}".strip())
        return after

    async def _create(self) -> Log | None:
        """Create ``_schemas`` (see the module doc) and wait until this broker leads it."""
        broker = self.broker
        factor = broker.config.offsets_topic_replication_factor if broker.cluster_link is not None else 1
        live = len(broker.metadata.brokers())
        if factor > live:
            raise errors.store_error(
                f"{SCHEMAS_TOPIC} needs offsets.topic.replication.factor={factor} brokers; {live} are up"
            )
        loop = asyncio.get_running_loop()
        try:
            if broker.cluster_link is None:  # alone: local files, at once
                broker.controller.create_topic(SCHEMAS_TOPIC, 1, SCHEMAS_TOPIC_CONFIG, 1)
            else:
                await loop.run_in_executor(
                    None, broker.controller.create_topic, SCHEMAS_TOPIC, 1, SCHEMAS_TOPIC_CONFIG, factor
                )
            _log.info("created %s (compacted, 1 partition, replication factor %d)", SCHEMAS_TOPIC, factor)
        except TopicExistsError:
            pass
        except (LogstoreError, OSError) as e:
            raise errors.store_error(f"creating {SCHEMAS_TOPIC} failed: {e}") from None
        deadline = loop.time() + CREATE_WAIT_S
        for _ in range(int(CREATE_WAIT_S / 0.05) + 1):
            log = broker.replica_manager.find_log(SCHEMAS_TOPIC, 0)
            state = broker.metadata.partition_state(SCHEMAS_TOPIC, 0)
            if log is not None or loop.time() > deadline:
                return log
            if state is not None and state.leader >= 0 and state.leader != broker.node_id:
                return None  # another broker was made its leader: the write goes there
            await asyncio.sleep(0.05)
        return None


REGISTRY_LISTENER = "SCHEMA_REGISTRY"
"""The listener name whose ``listener.name.schema_registry.ssl.*`` keys override ``ssl.*`` for https."""
VERIFIED_MAX = 10_000


class BasicAuthUsers:
    """HTTP basic auth's check: the broker's SASL PLAIN users (every SASL listener's JAAS users)
    and SCRAM credentials (the broker's credential store: a file alone, ZooKeeper in a cluster).

    A SCRAM password is checked as a SCRAM login would (PBKDF2 with the credential's salt and
    iterations, off the event loop); a pass is remembered for the user, password digest and
    credential, so a changed or deleted credential is checked again. Invariant: nothing but
    digests of passwords is kept.
    """

    def __init__(self, broker: Services) -> None:
        self.broker = broker
        self._verified: dict[tuple[str, bytes], bytes] = {}  # (user, sha256(password)) -> stored key

    def _plain_users(self) -> dict[str, str]:
        users: dict[str, str] = {}
        for listener in getattr(getattr(self.broker, "security", None), "sasl", {}).values():
            users.update(listener.plain_users)
        return users

    async def __call__(self, user: str, password: str) -> bool:
        expected = self._plain_users().get(user)
        if expected is not None and hmac.compare_digest(expected.encode(), password.encode()):
            return True
        store = self.broker.credential_store()
        digest = hashlib.sha256(password.encode()).digest()
        for name in ("SCRAM-SHA-512", "SCRAM-SHA-256"):
            credential = store.get(user, name)
            if credential is None:
                continue
            if self._verified.get((user, digest)) == credential.stored_key:
                return True
            mechanism = MECHANISMS[name]
            salted = await asyncio.get_running_loop().run_in_executor(
                None, mechanism.salted_password, password, credential.salt, credential.iterations
            )
            stored = mechanism.h(mechanism.hmac(salted, b"Client Key"))
            if hmac.compare_digest(stored, credential.stored_key):
                if len(self._verified) >= VERIFIED_MAX:
                    self._verified.clear()
                self._verified[(user, digest)] = credential.stored_key
                return True
        return False


_OPERATIONS = {"READ": AclOperation.READ, "WRITE": AclOperation.WRITE, "ALTER_CONFIGS": AclOperation.ALTER_CONFIGS}


class SubjectAcls:
    """The registry's authorization against the broker's ACLs (schemas/acls.py says which request
    needs which operation). A subject is its topic's ACL: ``<topic>-key`` and ``<topic>-value``
    (TopicNameStrategy) are the topic ``<topic>``; any other subject (RecordNameStrategy's
    ``shop.User``) is the topic of the subject's own name (prefixed ACLs cover families of
    them). The registry as a whole (global config and mode) is the CLUSTER resource. Without an
    authorizer on the broker everything is allowed. Principal ``User:<basic auth user>``."""

    def __init__(self, broker: Services) -> None:
        self.broker = broker

    @staticmethod
    def topic_of(subject: str) -> str:
        for suffix in ("-key", "-value"):
            if subject.endswith(suffix) and len(subject) > len(suffix):
                return subject[: -len(suffix)]
        return subject

    def __call__(self, user: str, host: str, operation: str, subject: str | None) -> bool:
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        if subject is None:
            resource, name = ResourceType.CLUSTER, CLUSTER_NAME
        else:
            resource, name = ResourceType.TOPIC, self.topic_of(subject)
        return authorizer.authorize("User", user, host, _OPERATIONS[operation], resource, name)


def _tls(broker: Services, client: bool = False) -> ssl.SSLContext:
    """The https listener's context from the broker's PEM ``ssl.*`` settings (``client``: the
    context forwarded writes check an https writer with: the truststore, or the system's CAs)."""
    config = broker.config

    def setting(key: str) -> Any:
        return config.listener_value(REGISTRY_LISTENER, key)

    if not client:
        return server_context(REGISTRY_LISTENER, setting)
    context = ssl.create_default_context()
    location, inline = setting("ssl.truststore.location"), setting("ssl.truststore.certificates")
    if location:
        context.load_verify_locations(cafile=location)
    elif inline:
        context.load_verify_locations(cadata=str(inline))
    return context


async def start_schema_registry(broker: Services) -> RegistryServer | None:
    """The registry's listeners when ``schema.registry.listeners`` is set, its state read from
    ``_schemas``; None when it is not set. InvalidConfigError when an address cannot be bound or
    the TLS settings are wrong."""
    listeners = parse_schema_registry_listeners(broker.config.values["schema.registry.listeners"])
    if not listeners:
        return None
    tls = any(scheme == "https" for scheme, _, _ in listeners)
    addresses = [(host, port, _tls(broker) if scheme == "https" else None) for scheme, host, port in listeners]
    journal = SchemasTopic(broker)
    service = RegistryService(journal)
    loaded = service.catch_up()
    if loaded:
        _log.info(
            "schema registry: read %d records of %s: %d subjects, next id %d",
            loaded, SCHEMAS_TOPIC, len(service.registry.state.versions), service.registry.state.next_id,
        )  # fmt: skip
    basic = str(broker.config.values["schema.registry.authentication.method"]).upper() == "BASIC"
    server = RegistryServer(
        service,
        max_body_bytes=int(broker.config.values["schema.registry.max.request.bytes"]),
        authenticate=BasicAuthUsers(broker) if basic else None,
        client_ssl=_tls(broker, client=True) if tls else None,
        authorize=SubjectAcls(broker) if basic else None,
    )
    try:
        await server.start(addresses)
    except OSError as e:
        await server.close()
        raise InvalidConfigError(
            f"schema.registry.listeners: cannot listen on {broker.config.values['schema.registry.listeners']}: "
            f"{e.strerror or e}; pick another port or leave schema.registry.listeners empty"
        ) from None
    if broker.cluster_link is not None:  # where the others forward their writes when this one leads
        url = server.urls[0]
        for anywhere in ("0.0.0.0", "[::]", "::"):
            url = url.replace(f"//{anywhere}:", "//127.0.0.1:")  # bound everywhere: loopback reaches it here
        try:
            await asyncio.get_running_loop().run_in_executor(None, journal.publish_url, url)
        except Exception as e:  # the registry still serves reads, and writes while it leads
            _log.error("cannot publish this broker's schema registry URL in ZooKeeper: %s", e)
    return server
