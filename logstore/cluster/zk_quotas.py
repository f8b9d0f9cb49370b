"""Client quotas in a ZooKeeper cluster: Kafka's znodes and change notifications.

::

    /config/users/<user>                    {"version":1,"config":{"producer_byte_rate":"1024",...}}
    /config/users/<user>/clients/<client>   (the same)
    /config/clients/<client>                (the same)
    /config/ips/<ip>                        {"version":1,"config":{"connection_creation_rate":"5"}}
    /config/changes/config_change_<seq>     {"version":2,"entity_path":"users/alice/clients/app"}

Names are Kafka's sanitized forms (URL-encoded; ``<default>`` as is). ``/config/users/<user>``
is shared with the SCRAM credentials (``SCRAM-SHA-256`` keys): a write reads the znode,
replaces only the quota keys and writes it back conditioned on the version it read, retrying
when another writer got there first; other keys are never touched. Every write adds a
sequential ``/config/changes`` notification; each broker watches ``/config/changes`` and
reads the quotas again on its cluster worker thread (one pass covers a burst), then hands
them to its event loop; notifications older than 15 minutes are deleted (Kafka's
``changeExpirationMs``), at most once a minute. Values are kept as Kafka's strings (longs without a fraction).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from logstore.broker.quotas.client_quotas import (
    CLIENT_ID,
    IP,
    IP_QUOTA_KEYS,
    QUOTA_KEYS,
    USER,
    ClientQuotas,
    Entity,
    desanitize,
    entity_path,
)
from logstore.cluster.zk import CONFIG_CHANGES, KafkaZkClient, ZkError, _json, _load

_log = logging.getLogger("logstore.cluster")

CONFIG = "/config"
# Kafka's ZkNodeChangeNotificationListener deletes notifications older than this (15 minutes).
CHANGE_EXPIRATION_MS = 15 * 60 * 1000
ALL_KEYS = {**QUOTA_KEYS, **IP_QUOTA_KEYS}


def _text(key: str, value: float) -> str:
    return str(int(value)) if ALL_KEYS.get(key) in ("long", "int") else repr(float(value))


class ZkQuotaStore:
    """The quotas of every user, client id and IP in Kafka's znodes (client_quotas.py's QuotaStore)."""

    def __init__(self, zk: KafkaZkClient) -> None:
        self.zk = zk

    def _config(self, path: str, keys: Mapping[str, str]) -> dict[str, float]:
        try:
            data, _ = self.zk.zk.get(path)
        except NoNodeError:
            return {}
        if not data:
            return {}
        config = _load(data, path).get("config", {})
        out = {}
        for key, value in config.items():
            if key in keys:
                try:
                    out[key] = float(value)
                except ValueError:
                    _log.warning("%s: %s=%r is not a number; ignored", path, key, value)
        return out

    def _children(self, path: str) -> list[str]:
        try:
            return list(self.zk.zk.get_children(path))
        except NoNodeError:
            return []

    def load(self) -> dict[Entity, dict[str, float]]:
        out: dict[Entity, dict[str, float]] = {}

        def put(entity: Entity, path: str, keys: Mapping[str, str]) -> None:
            config = self._config(path, keys)
            if config:
                out[entity] = config

        for user in self._children(f"{CONFIG}/users"):
            put(((USER, desanitize(user)),), f"{CONFIG}/users/{user}", QUOTA_KEYS)
            for client in self._children(f"{CONFIG}/users/{user}/clients"):
                entity = ((CLIENT_ID, desanitize(client)), (USER, desanitize(user)))
                put(entity, f"{CONFIG}/users/{user}/clients/{client}", QUOTA_KEYS)
        for client in self._children(f"{CONFIG}/clients"):
            put(((CLIENT_ID, desanitize(client)),), f"{CONFIG}/clients/{client}", QUOTA_KEYS)
        for ip in self._children(f"{CONFIG}/ips"):
            put(((IP, ip),), f"{CONFIG}/ips/{ip}", IP_QUOTA_KEYS)
        return out

    def purge_changes(self, now_ms: float) -> int:
        """Delete ``/config/changes`` notifications older than CHANGE_EXPIRATION_MS (as Kafka's
        listener does); returns how many. Another broker deleting one first is fine."""
        zk = self.zk.zk
        purged = 0
        for child in self._children(CONFIG_CHANGES):
            path = f"{CONFIG_CHANGES}/{child}"
            stat = zk.exists(path)
            if stat is not None and now_ms - stat.ctime > CHANGE_EXPIRATION_MS:
                with contextlib.suppress(NoNodeError):
                    zk.delete(path)
                    purged += 1
        return purged

    def save(self, changes: Mapping[Entity, Mapping[str, float]]) -> None:
        for entity, config in changes.items():
            self._write(entity, config)

    def _write(self, entity: Entity, config: Mapping[str, float]) -> None:
        relative = entity_path(entity)
        path = f"{CONFIG}/{relative}"
        zk = self.zk.zk
        for _ in range(100):
            try:
                data, stat = zk.get(path)
                existing: dict[str, Any] = dict(_load(data, path).get("config", {})) if data else {}
                version = stat.version
            except NoNodeError:
                existing, version = {}, -1
            others = {k: v for k, v in existing.items() if k not in ALL_KEYS}
            others.update({k: _text(k, v) for k, v in config.items()})
            value = _json({"version": 1, "config": others})
            try:
                if version < 0:
                    zk.create(path, value, makepath=True)
                else:
                    zk.set(path, value, version=version)
            except (BadVersionError, NodeExistsError):
                continue  # another writer (SCRAM credentials, another broker) came first: again
            break
        else:
            raise ZkError(f"{path}: 100 tries lost to other writers; retry")
        zk.create(
            f"{CONFIG_CHANGES}/config_change_",
            _json({"version": 2, "entity_path": relative}),
            sequence=True,
            makepath=True,
        )


def follow_client_quotas(
    quotas: ClientQuotas,
    node_id: int,
    loop: asyncio.AbstractEventLoop | None,
    zk: KafkaZkClient,
    run_on_worker: Callable[[Callable[[], None]], None],
) -> None:
    """Keep the broker's quotas in ZooKeeper, and read them again on every change notification
    (on the cluster link's worker thread, ``run_on_worker``; applied on the broker's ``loop``)."""
    store = ZkQuotaStore(zk)
    quotas.use_store(store)

    purged_at = [0.0]

    def reload() -> None:
        try:
            now = time.time()
            if now - purged_at[0] > 60:  # at most once a minute: one exists() per notification
                purged_at[0] = now
                store.purge_changes(now * 1000)
            configs = store.load()
        except Exception:  # a bad znode must not stop the worker; the next change retries
            _log.exception("broker %d: reading the client quotas failed", node_id)
            return
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(quotas.set_configs, configs)
        else:
            quotas.set_configs(configs)

    def changed(*_: Any) -> None:
        run_on_worker(reload)

    zk.zk.ensure_path(CONFIG_CHANGES)
    reload()  # before the broker serves (joining runs before the listeners start)
    zk.zk.ChildrenWatch(CONFIG_CHANGES, changed)  # also fires once now
