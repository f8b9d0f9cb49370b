"""ACLs in ZooKeeper, in Kafka's layout (AclAuthorizer's ``ZkAclStore``), watched by every broker.

Znodes::

    /kafka-acl/<ResourceType>/<name>                      LITERAL patterns  (e.g. /kafka-acl/Topic/orders)
    /kafka-acl-extended/prefixed/<ResourceType>/<name>    PREFIXED patterns
        {"version":1,"acls":[{"principal":"User:alice","permissionType":"Allow","operation":"Read","host":"*"}]}
    /kafka-acl-changes/acl_changes_<seq>                  "Topic:orders" (a LITERAL pattern changed)
    /kafka-acl-extended-changes/acl_changes_<seq>         {"version":1,"resourceType":"Topic","name":"ord","patternType":"PREFIXED"}

A change (CreateAcls, DeleteAcls through any broker) rewrites one resource's znode with a
compare-and-set on its zkVersion (retried on a concurrent writer; the znode goes when its
last ACL does), then adds a sequential change notification. Every broker watches both
change paths and reloads the resources named by the notifications it has not seen, on the
cluster link's worker thread; notifications older than 15 minutes are purged (Kafka's
``acl.change.notification.expiration``). A broker joining reads every ACL once.

Kafka's resource names are used as znode names as they are; a name holding ``/`` cannot be
stored (the change fails with the reason).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from logstore.security.acls import (
    RESOURCE_TYPE_BY_TITLE,
    AccessControlEntry,
    PatternType,
    ResourcePattern,
    ResourceType,
    decode_entries,
    encode_entries,
)
from logstore.security.authorizer import Authorizer

_log = logging.getLogger("logstore.security")

ACL_ROOT = "/kafka-acl"
EXTENDED_ROOT = "/kafka-acl-extended/prefixed"
ACL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"
CHANGE_EXPIRATION_S = 15 * 60
ACL_PATHS = (ACL_ROOT, EXTENDED_ROOT, ACL_CHANGES, EXTENDED_CHANGES)
_Change = Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]


def znode_path(pattern: ResourcePattern) -> str:
    """Where a pattern's ACLs live (ValueError for a name ZooKeeper cannot hold)."""
    if "/" in pattern.name or pattern.name in (".", ".."):
        raise ValueError(f"resource name {pattern.name!r} cannot be a znode name (ACLs in ZooKeeper)")
    root = ACL_ROOT if pattern.pattern_type == PatternType.LITERAL else EXTENDED_ROOT
    return f"{root}/{pattern.resource_type.title}/{pattern.name}"


def notification(pattern: ResourcePattern) -> tuple[str, bytes]:
    """(change path, data) of a change to ``pattern``."""
    if pattern.pattern_type == PatternType.LITERAL:
        return ACL_CHANGES, f"{pattern.resource_type.title}:{pattern.name}".encode()
    data = {"version": 1, "resourceType": pattern.resource_type.title, "name": pattern.name,
            "patternType": pattern.pattern_type.name}  # fmt: skip
    return EXTENDED_CHANGES, json.dumps(data, separators=(",", ":")).encode()


def pattern_of_notification(changes_path: str, data: bytes) -> ResourcePattern | None:
    """The pattern a notification names; None if it cannot be read (logged)."""
    try:
        if changes_path == ACL_CHANGES:
            title, _, name = data.decode().partition(":")
            return ResourcePattern(RESOURCE_TYPE_BY_TITLE[title.lower()], name, PatternType.LITERAL)
        doc = json.loads(data)
        return ResourcePattern(
            RESOURCE_TYPE_BY_TITLE[str(doc["resourceType"]).lower()],
            str(doc["name"]),
            PatternType[doc["patternType"]],
        )
    except (ValueError, KeyError, UnicodeDecodeError) as e:
        _log.warning("ignoring an unreadable ACL change notification %r: %s", data[:200], e)
        return None


class ZkAclStore:
    """:class:`~logstore.security.authorizer.AclStore` over a kazoo client (blocking calls)."""

    def __init__(self, zk: Any) -> None:
        self.zk = zk
        for path in ACL_PATHS:
            zk.ensure_path(path)

    def _read(self, path: str) -> tuple[frozenset[AccessControlEntry], int | None]:
        """(entries, zkVersion) of a resource znode; (empty, None) when there is none."""
        try:
            data, stat = self.zk.get(path)
        except NoNodeError:
            return frozenset(), None
        try:
            return frozenset(decode_entries(data)), stat.version
        except ValueError as e:
            _log.error("ACL znode %s is unreadable (%s); treating it as empty", path, e)
            return frozenset(), stat.version

    def load(
        self, patterns: Iterable[ResourcePattern] | None = None
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Every stored pattern's ACLs, or those of ``patterns`` (missing ones left out)."""
        if patterns is None:
            wanted = []
            for root, pattern_type in (
                (ACL_ROOT, PatternType.LITERAL),
                (EXTENDED_ROOT, PatternType.PREFIXED),
            ):
                for title in self.zk.get_children(root):
                    resource_type = RESOURCE_TYPE_BY_TITLE.get(title.lower())
                    if resource_type is None or resource_type in (ResourceType.ANY, ResourceType.UNKNOWN):
                        _log.warning("ignoring ACLs of unknown resource type %s/%s", root, title)
                        continue
                    for name in self.zk.get_children(f"{root}/{title}"):
                        wanted.append(ResourcePattern(resource_type, name, pattern_type))
            patterns = wanted
        found = {}
        for pattern in patterns:
            entries, _ = self._read(znode_path(pattern))
            if entries:
                found[pattern] = entries
        return found

    def update(
        self, changes: Mapping[ResourcePattern, _Change]
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        """Apply each change with a compare-and-set on the znode's version (retried, bounded),
        then notify every broker. Returns the new entries per pattern."""
        result = {}
        for pattern, change in changes.items():
            path = znode_path(pattern)
            for _ in range(100):  # each pass loses only to a concurrent writer
                old, version = self._read(path)
                new = change(old)
                try:
                    if new == old:
                        pass
                    elif version is None:
                        self.zk.create(path, encode_entries(new), makepath=True)
                    elif new:
                        self.zk.set(path, encode_entries(new), version=version)
                    else:
                        self.zk.delete(path, version=version)
                except (BadVersionError, NodeExistsError, NoNodeError, NotEmptyError):
                    continue
                break
            else:
                raise RuntimeError(f"ACLs of {pattern}: too many concurrent changes; retry")
            result[pattern] = new
            if new != old:
                changes_path, data = notification(pattern)
                self.zk.create(f"{changes_path}/{CHANGE_PREFIX}", data, sequence=True, makepath=True)
        return result


class AclChangeListener:
    """Reloads the resources named by new change notifications (both paths), on the link's
    worker thread; purges expired notifications."""

    def __init__(
        self, authorizer: Authorizer, run_on_worker: Callable[[Callable[[], None]], None], store: ZkAclStore
    ) -> None:
        """``run_on_worker``: the cluster link's worker thread, where each change is processed."""
        self.authorizer = authorizer
        self.run_on_worker = run_on_worker
        self.store = store
        self.seen: dict[str, int] = {}  # changes path -> last sequence number applied

    def start(self) -> None:
        zk = self.store.zk
        for path in (ACL_CHANGES, EXTENDED_CHANGES):
            children = zk.get_children(path)
            self.seen[path] = max((_sequence(c) for c in children), default=-1)  # the full load covered them
        self.authorizer.reload()  # every ACL, after noting the notifications it covers
        for path in (ACL_CHANGES, EXTENDED_CHANGES):
            zk.ChildrenWatch(path, lambda children, path=path: self._changed(path))

    def _changed(self, path: str) -> None:
        self.run_on_worker(lambda: self.process(path))

    def process(self, path: str) -> None:
        """Reload the patterns of the notifications after the last one seen."""
        zk = self.store.zk
        authorizer = self.authorizer
        try:
            children = sorted(zk.get_children(path), key=_sequence)
            patterns = []
            now = time.time()
            for child in children:
                sequence = _sequence(child)
                try:
                    data, stat = zk.get(f"{path}/{child}")
                except NoNodeError:
                    continue
                if sequence > self.seen.get(path, -1):
                    pattern = pattern_of_notification(path, data)
                    if pattern is not None:
                        patterns.append(pattern)
                    self.seen[path] = sequence
                if now - stat.ctime / 1000 > CHANGE_EXPIRATION_S:
                    with contextlib.suppress(NoNodeError):
                        zk.delete(f"{path}/{child}")
            if patterns:
                authorizer.reload(dict.fromkeys(patterns))
                _log.info("reloaded the ACLs of %d resource(s) after changes", len(patterns))
        except Exception:  # a bad notification must not stop the worker; the next change retries
            _log.exception("applying ACL changes from %s failed", path)


def _sequence(child: str) -> int:
    try:
        return int(child.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return -1


def follow_acls(
    authorizer: Authorizer | None, zk: Any, run_on_worker: Callable[[Callable[[], None]], None]
) -> None:
    """In a cluster with an authorizer: keep the ACLs in ZooKeeper and follow every change (on
    the cluster link's worker thread, ``run_on_worker``)."""
    if authorizer is None:
        return
    store = ZkAclStore(zk)
    authorizer.use_store(store)
    AclChangeListener(authorizer, run_on_worker, store).start()
