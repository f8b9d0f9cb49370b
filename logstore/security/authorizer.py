"""The ACL authorizer: Kafka's ``AclAuthorizer`` / ``StandardAuthorizer`` rules, indexed.

Rules (Kafka's, for a principal P connecting from host H asking for operation
O on resource R of type T):

1. P in ``super.users`` (``User:a;User:b``): allowed.
2. The ACLs that apply to R: LITERAL ACLs on R's name, the LITERAL wildcard
   ``*`` of type T, and PREFIXED ACLs whose prefix starts R's name. Of those, the
   ones for P (or ``User:*``) from H (or ``*``) decide:
   a DENY on O (or ALL) denies, whatever else; otherwise an ALLOW on O (or ALL,
   or one that implies O: DESCRIBE is implied by READ, WRITE, DELETE, ALTER;
   DESCRIBE_CONFIGS by ALTER_CONFIGS) allows; otherwise denied.
3. No ACL applies to R at all (for any principal): ``allow.everyone.if.no.acl.found``
   (default false) decides.

:meth:`Authorizer.authorize_by_resource_type` is Kafka's default
``Authorizer.authorizeByResourceType`` (may P do O on *some* resource of type T;
KIP-679's idempotent producers need WRITE on any topic).

Index and cost. ACLs are kept by pattern in ``_Index``: literal ones in a dict
per resource type keyed by name, prefixed ones in a dict per type keyed by prefix,
with, per type, the sorted distinct prefix lengths; each value maps a principal
string to its ``(host, operation, permission)`` tuples. A check costs one dict
lookup for the literal name, one for ``*``, and one per distinct prefix length
not longer than the name: O(min(len(name), distinct prefix lengths)) dict
lookups, plus the entries of P and ``User:*`` on the matching patterns --
independent of the number of ACLs. Results are cached per
``(principal, host, operation, type, name)`` (a dict, cleared at every change
and when it reaches ``CACHE_MAX`` entries): a repeated check is one dict lookup.

Changes are copy-on-write: a new ``_Index`` (shallow copies of the dicts,
O(patterns)) replaces the old one with one attribute store, so checks on the
event loop never see a half-made change from the thread that applied it
(CreateAcls in an executor, ZooKeeper watches).

Storage: an :class:`AclStore` keeps every ACL; :class:`FileAclStore` is the
single broker's ``acls.json`` in the data dir (rewritten atomically);
``logstore.cluster.zk_acls.ZkAclStore`` is Kafka's ZooKeeper layout.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from logstore.errors import InvalidConfigError
from logstore.security.acls import (
    IMPLIED_BY,
    RESOURCE_TYPE_BY_TITLE,
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
    bits,
    validate_binding,
)
from logstore.storage.checkpoints import write_atomically

_log = logging.getLogger("logstore.security")

# ``authorizer.class.name`` values that enable this authorizer (Kafka's two, and a short alias).
AUTHORIZER_CLASS_NAMES = frozenset(
    {
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "logstore",
    }
)
ACL_FILE = "acls.json"
CACHE_MAX = 100_000

_ALL = int(AclOperation.ALL)
_DENY = int(AclPermissionType.DENY)
_ALLOW = int(AclPermissionType.ALLOW)
# Operation code -> the ALLOW operation codes that grant it (ALL included).
_GRANTING: dict[int, frozenset[int]] = {
    int(op): frozenset(int(o) for o in IMPLIED_BY.get(op, {op})) | {_ALL} for op in AclOperation
}

_Entries = dict[str, tuple[tuple[str, int, int], ...]]  # principal -> (host, operation, permission)


class AclStore(Protocol):
    """Where ACLs live. ``load`` gives every pattern's entries; ``update`` changes one
    pattern's entries with ``change`` (old entries -> new ones) and returns the new ones,
    atomically with respect to other writers."""

    def load(
        self, patterns: Iterable[ResourcePattern] | None = None
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]: ...

    def update(
        self,
        changes: Mapping[
            ResourcePattern, Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]
        ],
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]: ...


class MemoryAclStore:
    """ACLs in memory only (tests, benches)."""

    def __init__(self) -> None:
        self.acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}

    def load(
        self, patterns: Iterable[ResourcePattern] | None = None
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        if patterns is None:
            return dict(self.acls)
        return {p: self.acls[p] for p in patterns if p in self.acls}

    def update(
        self,
        changes: Mapping[
            ResourcePattern, Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]
        ],
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        result = {}
        for pattern, change in changes.items():
            new = change(self.acls.get(pattern, frozenset()))
            if new:
                self.acls[pattern] = new
            else:
                self.acls.pop(pattern, None)
            result[pattern] = new
        return result


class FileAclStore(MemoryAclStore):
    """The single broker's ACLs: ``<data dir>/acls.json``, rewritten atomically at each change.

    Format: ``{"version": 1, "resources": [{"resourceType": "Topic", "patternType":
    "LITERAL", "name": "orders", "acls": [<Kafka's entry JSON>]}]}``.
    """

    def __init__(self, data_dir: str) -> None:
        super().__init__()
        self.path = os.path.join(data_dir, ACL_FILE)
        with contextlib.suppress(FileNotFoundError), open(self.path, "rb") as f:
            self.acls = self._decode(f.read())

    def _decode(self, data: bytes) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        try:
            doc = json.loads(data)
            acls = {}
            for resource in doc["resources"]:
                pattern = ResourcePattern(
                    RESOURCE_TYPE_BY_TITLE[resource["resourceType"].lower()],
                    str(resource["name"]),
                    PatternType[resource["patternType"]],
                )
                acls[pattern] = frozenset(AccessControlEntry.from_json(item) for item in resource["acls"])
            return acls
        except (ValueError, KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"{self.path} is not a valid ACL file ({e}); fix or remove it") from None

    def update(
        self,
        changes: Mapping[
            ResourcePattern, Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]
        ],
    ) -> dict[ResourcePattern, frozenset[AccessControlEntry]]:
        result = super().update(changes)
        resources = [
            {
                "resourceType": pattern.resource_type.title,
                "patternType": pattern.pattern_type.name,
                "name": pattern.name,
                "acls": [e.to_json() for e in sorted(entries, key=str)],
            }
            for pattern, entries in sorted(
                self.acls.items(), key=lambda kv: (kv[0].resource_type, kv[0].pattern_type, kv[0].name)
            )
        ]
        write_atomically(self.path, json.dumps({"version": 1, "resources": resources}, indent=1).encode())
        return result


@dataclass(slots=True)
class _Index:
    """The lookup structures (see the module doc); replaced whole at each change."""

    literal: dict[int, dict[str, _Entries]] = field(default_factory=dict)
    prefixed: dict[int, dict[str, _Entries]] = field(default_factory=dict)
    prefix_lengths: dict[int, tuple[int, ...]] = field(default_factory=dict)


_Change = Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]


def _adder(new: frozenset[AccessControlEntry]) -> _Change:
    return lambda old: old | new


def _remover(gone: frozenset[AccessControlEntry]) -> _Change:
    return lambda old: old - gone


def _entries_of(entries: Iterable[AccessControlEntry]) -> _Entries:
    by_principal: dict[str, list[tuple[str, int, int]]] = {}
    for e in entries:
        by_principal.setdefault(e.principal, []).append((e.host, int(e.operation), int(e.permission)))
    return {p: tuple(v) for p, v in by_principal.items()}


def build_authorizer(config: Any, data_dir: str) -> Authorizer | None:
    """The broker's authorizer from its config: None when ``authorizer.class.name`` is empty.

    Alone, the ACLs live in ``<data_dir>/acls.json``; in a cluster (``zookeeper.connect``)
    in ZooKeeper, once the broker joins (``logstore.cluster.zk_acls.follow_acls``).
    """
    name = (config.authorizer_class_name or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASS_NAMES:
        raise InvalidConfigError(
            f"authorizer.class.name={name!r} is not an authorizer this broker has; use one of "
            f"{', '.join(sorted(AUTHORIZER_CLASS_NAMES))}, or leave it empty for no authorization"
        )
    store: AclStore = MemoryAclStore() if config.zookeeper_connect else FileAclStore(data_dir)
    return Authorizer.from_config(config, store)


class Authorizer:
    """ACL checks for every request (see the module doc for the rules and their cost).

    ``super_users``: principal strings (``User:admin``); ``allow_if_no_acl``:
    ``allow.everyone.if.no.acl.found``.
    """

    def __init__(
        self, store: AclStore, super_users: Iterable[str] = (), allow_if_no_acl: bool = False
    ) -> None:
        self.store = store
        self.super_users = frozenset(super_users)
        self.allow_if_no_acl = allow_if_no_acl
        self._lock = threading.Lock()
        self._acls: dict[ResourcePattern, frozenset[AccessControlEntry]] = {}
        self._index = _Index()
        self._cache: dict[tuple[str, str, str, int, int, str], bool] = {}
        # The request path's own cache (security/operations.py ``allowed``): (api key, resource
        # type, role, principal type, principal name, host, name) -> allowed. Cleared with _cache.
        self.checks: dict[tuple[int, int, str, str, str, str, str], bool] = {}
        self.reload()

    def use_store(self, store: AclStore) -> None:
        """Keep the ACLs in ``store`` from now on (a cluster's ZooKeeper; its listener loads them)."""
        self.store = store

    @classmethod
    def from_config(cls, config: Any, store: AclStore) -> Authorizer:
        """From a BrokerConfig: ``super.users`` (semicolon-separated), ``allow.everyone.if.no.acl.found``."""
        users = [u.strip() for u in str(config.super_users or "").split(";") if u.strip()]
        return cls(store, users, bool(config.allow_everyone_if_no_acl_found))

    # -- checks ----------------------------------------------------------------

    def authorize(
        self,
        principal_type: str,
        principal_name: str,
        host: str,
        operation: int,
        resource_type: int,
        name: str,
    ) -> bool:
        """May the principal, from ``host``, do ``operation`` on the resource? O(1) when cached."""
        key = (principal_type, principal_name, host, operation, resource_type, name)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        result = self._decide(f"{principal_type}:{principal_name}", host, operation, resource_type, name)
        cache = self._cache
        if len(cache) >= CACHE_MAX:
            cache.clear()
        cache[key] = result
        return result

    def _decide(self, principal: str, host: str, operation: int, resource_type: int, name: str) -> bool:
        """The rules, uncached: O(min(len(name), distinct prefix lengths)) lookups."""
        if principal in self.super_users:
            return True
        index = self._index
        found: list[_Entries] = []
        literal = index.literal.get(resource_type)
        if literal is not None:
            entries = literal.get(name)
            if entries is not None:
                found.append(entries)
            if name != WILDCARD_RESOURCE:
                entries = literal.get(WILDCARD_RESOURCE)
                if entries is not None:
                    found.append(entries)
        prefixed = index.prefixed.get(resource_type)
        if prefixed is not None:
            size = len(name)
            for length in index.prefix_lengths[resource_type]:
                if length > size:
                    break
                entries = prefixed.get(name[:length])
                if entries is not None:
                    found.append(entries)
        if not found:
            return self.allow_if_no_acl
        granting = _GRANTING[operation]
        allowed = False
        for by_principal in found:
            for who in (principal, WILDCARD_PRINCIPAL):
                for acl_host, acl_op, permission in by_principal.get(who, ()):
                    if acl_host != host and acl_host != WILDCARD_HOST:
                        continue
                    if permission == _DENY:
                        if acl_op in (operation, _ALL):
                            return False
                    elif permission == _ALLOW and acl_op in granting:
                        allowed = True
        return allowed

    def authorized_operations(
        self, principal_type: str, principal_name: str, host: str, resource_type: ResourceType, name: str
    ) -> int:
        """The ``authorized_operations`` bit field: each supported operation of the type that is allowed."""
        return bits(
            op
            for op in SUPPORTED_OPERATIONS[resource_type]
            if self.authorize(principal_type, principal_name, host, op, resource_type, name)
        )

    def authorize_by_resource_type(
        self, principal_type: str, principal_name: str, host: str, operation: int, resource_type: int
    ) -> bool:
        """Kafka's default ``authorizeByResourceType``: may the principal do ``operation`` on some
        resource of the type? Super users (and resources without ACLs under
        ``allow.everyone.if.no.acl.found``) pass the check of a made-up name first; then an
        ALLOW pattern not covered by a DENY one (a DENY on literal ``*`` denies all). O(ACLs of the type)."""
        if self.authorize(principal_type, principal_name, host, operation, resource_type, "hardcode"):
            return True
        principal = f"{principal_type}:{principal_name}"
        deny_literal: set[str] = set()
        deny_prefixed: set[str] = set()
        allow: list[tuple[PatternType, str]] = []
        wildcard_allow = False
        for pattern, entries in self._acls.items():
            if pattern.resource_type != resource_type:
                continue
            for e in entries:
                if e.host != host and e.host != WILDCARD_HOST:
                    continue
                if e.principal != principal and e.principal != WILDCARD_PRINCIPAL:
                    continue
                if e.operation != operation and e.operation != AclOperation.ALL:
                    continue
                if e.permission == AclPermissionType.DENY:
                    if pattern.pattern_type == PatternType.LITERAL:
                        if pattern.name == WILDCARD_RESOURCE:
                            return False
                        deny_literal.add(pattern.name)
                    else:
                        deny_prefixed.add(pattern.name)
                elif e.permission == AclPermissionType.ALLOW:
                    if pattern.pattern_type == PatternType.LITERAL and pattern.name == WILDCARD_RESOURCE:
                        wildcard_allow = True  # decides after the loop: a DENY on * still wins
                        continue
                    allow.append((pattern.pattern_type, pattern.name))
        if wildcard_allow:
            return True
        for pattern_type, name in allow:
            if pattern_type == PatternType.LITERAL and name in deny_literal:
                continue
            if not any(name[:n] in deny_prefixed for n in range(1, len(name) + 1)):
                return True
        return False

    # -- the ACLs ---------------------------------------------------------------

    def acls(self, acl_filter: AclBindingFilter = AclBindingFilter.ANY) -> list[AclBinding]:
        """Every binding the filter matches. O(ACLs)."""
        return [
            binding
            for pattern, entries in list(self._acls.items())
            for entry in entries
            if acl_filter.matches(binding := AclBinding(pattern, entry))
        ]

    def create_acls(self, bindings: Sequence[AclBinding]) -> list[str | None]:
        """Add the bindings; one result per binding: None, or why it is refused (INVALID_REQUEST).
        Blocking (the store writes): call it off the event loop."""
        errors = [validate_binding(b) for b in bindings]
        adding: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding, error in zip(bindings, errors, strict=True):
            if error is None:
                adding.setdefault(binding.pattern, set()).add(binding.entry)
        if adding:
            self._change({pattern: _adder(frozenset(new)) for pattern, new in adding.items()})
        return errors

    def delete_acls(self, filters: Sequence[AclBindingFilter]) -> list[list[AclBinding]]:
        """Remove the bindings each filter matches; per filter, the bindings removed. Blocking."""
        matched = [self.acls(f) for f in filters]
        removing: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for bindings in matched:
            for b in bindings:
                removing.setdefault(b.pattern, set()).add(b.entry)
        if removing:
            self._change({pattern: _remover(frozenset(gone)) for pattern, gone in removing.items()})
        return matched

    def _change(
        self,
        changes: Mapping[
            ResourcePattern, Callable[[frozenset[AccessControlEntry]], frozenset[AccessControlEntry]]
        ],
    ) -> None:
        with self._lock:
            self._apply(self.store.update(changes))

    def reload(self, patterns: Iterable[ResourcePattern] | None = None) -> None:
        """Read the store again: every pattern, or those named (a ZooKeeper change notification)."""
        with self._lock:
            if patterns is None:
                self._acls = {}
                self._apply(self.store.load(), rebuild=True)
            else:
                wanted = list(patterns)
                loaded = self.store.load(wanted)
                self._apply({p: loaded.get(p, frozenset()) for p in wanted})

    def _apply(
        self, changed: Mapping[ResourcePattern, frozenset[AccessControlEntry]], rebuild: bool = False
    ) -> None:
        """Install new entries of some patterns (empty: none left) copy-on-write; lock held."""
        acls = dict(self._acls)
        old = self._index
        literal = {} if rebuild else dict(old.literal)
        prefixed = {} if rebuild else dict(old.prefixed)
        copied: set[tuple[int, int]] = set()  # (pattern type, resource type) inner dicts copied
        for pattern, entries in changed.items():
            resource_type = int(pattern.resource_type)
            outer = literal if pattern.pattern_type == PatternType.LITERAL else prefixed
            if (pattern.pattern_type, resource_type) not in copied:
                outer[resource_type] = dict(outer.get(resource_type, {}))
                copied.add((pattern.pattern_type, resource_type))
            inner = outer[resource_type]
            if entries:
                acls[pattern] = frozenset(entries)
                inner[pattern.name] = _entries_of(entries)
            else:
                acls.pop(pattern, None)
                inner.pop(pattern.name, None)
        for outer in (literal, prefixed):
            for resource_type in [t for t, inner in outer.items() if not inner]:
                del outer[resource_type]
        lengths = {t: tuple(sorted({len(n) for n in inner})) for t, inner in prefixed.items()}
        self._acls = acls
        self._index = _Index(literal, prefixed, lengths)
        self._cache = {}
        self.checks = {}
