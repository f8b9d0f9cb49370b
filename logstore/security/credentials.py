"""The SCRAM credential store: username -> mechanism -> :class:`ScramCredential`.

Kafka keeps SCRAM credentials as user configs: ``/config/users/<user>`` =
``{"version":1,"config":{"SCRAM-SHA-512":"salt=..,stored_key=..,server_key=..,iterations=4096"}}``.
Logstore does the same in a cluster (:class:`ZkCredentialStore`), and alone
keeps the same map in ``<data dir>/scram-credentials.json`` (:class:`FileCredentialStore`)::

    {"version": 1, "users": {"alice": {"SCRAM-SHA-512": "salt=..,stored_key=..,server_key=..,iterations=4096"}}}

Lookups (:meth:`CredentialStore.get`, once per login) are dict reads from
memory, O(1); :meth:`CredentialStore.alter` writes through (the file
atomically, with mode 0600; ZooKeeper with zkVersion-conditioned
read-modify-writes of the SCRAM keys only, since user quotas share the znode)
and then updates memory. Alter may block: the broker runs it off the loop.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Iterable
from typing import Any

from logstore.errors import InvalidConfigError
from logstore.security.scram import MECHANISMS, ScramCredential
from logstore.storage.checkpoints import read_json, write_atomically

_log = logging.getLogger("logstore.security")

FILE_NAME = "scram-credentials.json"

Deletion = tuple[str, str]  # (user, mechanism name)
Upsertion = tuple[str, str, ScramCredential]


class CredentialStore:
    """In-memory credentials with a persistent layer below (the subclasses)."""

    def __init__(self) -> None:
        self._users: dict[str, dict[str, ScramCredential]] = {}
        self._lock = threading.Lock()

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._users.get(user, {}).get(mechanism)

    def users(self) -> dict[str, dict[str, ScramCredential]]:
        """A snapshot: user -> mechanism -> credential."""
        return {user: dict(creds) for user, creds in self._users.items()}

    def alter(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop following changes (ZooKeeper)."""

    @staticmethod
    def _apply(
        users: dict[str, dict[str, ScramCredential]],
        deletions: Iterable[Deletion],
        upsertions: Iterable[Upsertion],
    ) -> dict[str, dict[str, ScramCredential]]:
        result = {user: dict(creds) for user, creds in users.items()}
        for user, mechanism in deletions:
            result.get(user, {}).pop(mechanism, None)
            if user in result and not result[user]:
                del result[user]
        for user, mechanism, credential in upsertions:
            result.setdefault(user, {})[mechanism] = credential
        return result


def _parse_user(user: str, config: dict[str, Any], where: str) -> dict[str, ScramCredential]:
    creds = {}
    for mechanism in MECHANISMS:
        if mechanism in config:
            try:
                creds[mechanism] = ScramCredential.parse(str(config[mechanism]))
            except ValueError as e:
                _log.error("%s: user %s: %s; that credential is ignored", where, user, e)
    return creds


class FileCredentialStore(CredentialStore):
    """Credentials of a broker that runs alone, in ``<data dir>/scram-credentials.json``."""

    def __init__(self, data_dir: str) -> None:
        super().__init__()
        self.path = os.path.join(data_dir, FILE_NAME)
        self._users = self.load(self.path)

    @staticmethod
    def load(path: str) -> dict[str, dict[str, ScramCredential]]:
        value = read_json(
            path, "SCRAM credentials", "fix or remove the file and add the users again with `logstore users add`"
        )
        if value is None:
            return {}
        users = value.get("users") if isinstance(value, dict) else None
        if not isinstance(users, dict):
            raise InvalidConfigError(f'{path}: expected {{"version": 1, "users": {{...}}}}')
        result = {}
        for user, config in users.items():
            creds = _parse_user(str(user), config if isinstance(config, dict) else {}, path)
            if creds:
                result[str(user)] = creds
        return result

    @staticmethod
    def save(path: str, users: dict[str, dict[str, ScramCredential]]) -> None:
        value = {
            "version": 1,
            "users": {
                u: {m: c.format() for m, c in sorted(creds.items())} for u, creds in sorted(users.items())
            },
        }
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        write_atomically(path, (json.dumps(value, indent=1) + "\n").encode("utf-8"))
        with contextlib.suppress(OSError):
            os.chmod(path, 0o600)

    def alter(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> None:
        with self._lock:
            fresh = self._apply(self._users, deletions, upsertions)
            self.save(self.path, fresh)
            self._users = fresh


CONFIG_USERS = "/config/users"


class ZkCredentialStore(CredentialStore):
    """Credentials in ZooKeeper, as Kafka: ``/config/users/<user>``, SCRAM keys of its config.

    Writes are read-modify-writes conditioned on the znode's version (retried
    on a race; other keys of the znode, such as quotas, are kept). Instead of
    Kafka's ``/config/changes`` sequence nodes (which need purging), every broker follows
    ``/config/users`` (children and data watches) and reloads a user when its
    znode changes, so a credential altered through one broker is accepted by
    every broker within a ZooKeeper round trip.
    """

    def __init__(self, zk: Any) -> None:  # a kazoo KazooClient
        super().__init__()
        self.zk = zk
        self._watched: set[str] = set()
        self._closed = False
        zk.ensure_path(CONFIG_USERS)
        zk.ChildrenWatch(CONFIG_USERS, self._on_children)

    def _on_children(self, children: list[str]) -> bool:
        if self._closed:
            return False
        for user in children:
            if user not in self._watched:
                self._watched.add(user)
                self.zk.DataWatch(f"{CONFIG_USERS}/{user}", self._watcher(user))
        return True

    def _watcher(self, user: str) -> Any:
        def on_data(data: bytes | None, stat: Any, *_: Any) -> bool:
            if self._closed:
                return False
            self._load_user(user, data)
            if data is None:
                self._watched.discard(user)
                return False
            return True

        return on_data

    def _load_user(self, user: str, data: bytes | None) -> None:
        creds: dict[str, ScramCredential] = {}
        if data:
            try:
                config = json.loads(data.decode("utf-8")).get("config", {})
            except (ValueError, AttributeError):
                config = {}
            creds = _parse_user(user, config if isinstance(config, dict) else {}, f"{CONFIG_USERS}/{user}")
        with self._lock:
            users = dict(self._users)
            if creds:
                users[user] = creds
            else:
                users.pop(user, None)
            self._users = users

    def alter(self, deletions: Iterable[Deletion], upsertions: Iterable[Upsertion]) -> None:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        by_user: dict[str, tuple[list[str], dict[str, str]]] = {}
        for user, mechanism in deletions:
            by_user.setdefault(user, ([], {}))[0].append(mechanism)
        for user, mechanism, credential in upsertions:
            by_user.setdefault(user, ([], {}))[1][mechanism] = credential.format()
        for user, (deleted, upserted) in by_user.items():
            path = f"{CONFIG_USERS}/{user}"
            for _ in range(100):
                try:
                    data, stat = self.zk.get(path)
                    value = json.loads(data.decode("utf-8")) if data else {}
                    version = stat.version
                except NoNodeError:
                    value, version = {}, -1
                config = dict(value.get("config") or {})
                for mechanism in deleted:
                    config.pop(mechanism, None)
                config.update(upserted)
                encoded = json.dumps({"version": 1, "config": config}, separators=(",", ":")).encode()
                try:
                    if version < 0:
                        self.zk.create(path, encoded, makepath=True)
                    else:
                        self.zk.set(path, encoded, version=version)
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue  # another writer went first: read again
                self._load_user(user, encoded)
                break
            else:
                raise RuntimeError(f"{path}: could not update the credentials (too many concurrent writers)")

    def close(self) -> None:
        self._closed = True
