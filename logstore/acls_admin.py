"""``logstore acls``: Kafka's ``kafka-acls`` (add, remove, list) against any Kafka-protocol broker.

It talks to the broker through an ``AdminClient``, logstore's or confluent-kafka's
(``--client``): CreateAcls, DeleteAcls, DescribeAcls. The broker must run an
authorizer (``authorizer.class.name``); otherwise it answers SECURITY_DISABLED and the
command says so.

``add`` makes one ACL per (principal, host, operation, resource): every
``--allow-principal`` ALLOW and every ``--deny-principal`` DENY, from each ``--host``
(``*`` when none). ``remove`` deletes the ACLs matching what is given (no principal:
any principal; no operation: any; no host: any). ``list`` prints the ACLs of the given
resources (all ACLs when none), as kafka-acls prints them. Resources: ``--topic``,
``--group``, ``--transactional-id`` (repeatable), ``--cluster``; the pattern type is
``--resource-pattern-type`` (LITERAL by default for add and remove, ANY for list;
``*`` as a literal name is every resource of the type).

>>> operation_of("describe-configs").name, operation_of("ClusterAction").name
('DESCRIBE_CONFIGS', 'CLUSTER_ACTION')
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from types import ModuleType
from typing import Any

from logstore._clients import kafka_reason, selected_module
from logstore.errors import LogstoreError
from logstore.security.acls import CLUSTER_NAME, OPERATION_BY_TITLE, AclOperation

OPERATIONS = [op.title for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]


class AclsError(LogstoreError):
    """An acls command cannot go on; the message says what to do."""


def operation_of(text: str) -> AclOperation:
    """An operation by Kafka's name, any case, with or without ``-``/``_`` (Read, ClusterAction...)."""
    key = text.replace("-", "").replace("_", "").lower()
    found = OPERATION_BY_TITLE.get(key)
    if found is None or found in (AclOperation.UNKNOWN, AclOperation.ANY):
        raise AclsError(f"unknown operation {text!r}; use one of {', '.join(OPERATIONS)}")
    return found


class Acls:
    """An AdminClient on one broker with the three ACL calls (each bounded by ``timeout``)."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        kafka: ModuleType = selected_module("logstore acls", AclsError)
        self.api = importlib.import_module(f"{kafka.__name__}.admin")
        self.admin = self.api.AdminClient({"bootstrap.servers": bootstrap, "log_level": 2})
        self.timeout = timeout

    def _wait(self, future: Any, what: str) -> Any:
        try:
            return future.result(self.timeout)
        except Exception as e:
            raise AclsError(f"{what} failed: {kafka_reason(e)}") from None

    def resources(
        self, topics: Sequence[str], groups: Sequence[str], txn_ids: Sequence[str], cluster: bool
    ) -> list[tuple[Any, str]]:
        """(resource type, name) pairs of the options."""
        rt = self.api.ResourceType
        found = [(rt.TOPIC, t) for t in topics] + [(rt.GROUP, g) for g in groups]
        found += [(rt.TRANSACTIONAL_ID, t) for t in txn_ids]
        if cluster:
            found.append((rt.BROKER, CLUSTER_NAME))  # Kafka's CLUSTER resource type (4)
        return found

    def _pattern(self, name: str) -> Any:
        return self.api.ResourcePatternType[name.upper()]

    def _operation(self, op: AclOperation) -> Any:
        try:
            return self.api.AclOperation[op.name]
        except KeyError:
            raise AclsError(f"this client library has no operation {op.title}; use --client logstore") from None

    def add(
        self,
        resources: list[tuple[Any, str]],
        pattern: str,
        allow: Sequence[str],
        deny: Sequence[str],
        hosts: Sequence[str],
        operations: Sequence[AclOperation],
    ) -> list[Any]:
        """Create the ACLs; returns them."""
        if not resources:
            raise AclsError("name a resource: --topic, --group, --transactional-id or --cluster")
        if not allow and not deny:
            raise AclsError("name a principal: --allow-principal or --deny-principal (e.g. User:alice)")
        if not operations:
            raise AclsError(f"name an --operation: {', '.join(OPERATIONS)}")
        if pattern.upper() not in ("LITERAL", "PREFIXED"):
            raise AclsError("add: --resource-pattern-type is literal or prefixed")
        perm = self.api.AclPermissionType
        bindings = []
        for rtype, name in resources:
            for principals, permission in ((allow, perm.ALLOW), (deny, perm.DENY)):
                for principal in principals:
                    for host in hosts or ("*",):
                        for op in operations:
                            binding = self.api.AclBinding(
                                rtype,
                                name,
                                self._pattern(pattern),
                                principal,
                                host,
                                self._operation(op),
                                permission,
                            )
                            if binding not in bindings:
                                bindings.append(binding)
        futures = self.admin.create_acls(bindings, request_timeout=self.timeout)
        for binding in bindings:
            self._wait(futures[binding], f"adding {binding}")
        return bindings

    def _filters(
        self, resources: list[tuple[Any, str]], pattern: str, principals: Sequence[str], hosts: Sequence[str],
        operations: Sequence[AclOperation],
    ) -> list[Any]:  # fmt: skip
        api = self.api
        targets: list[tuple[Any, str | None]] = list(resources) or [(api.ResourceType.ANY, None)]
        filters = []
        for rtype, name in targets:
            for principal in principals or (None,):
                for host in hosts or (None,):
                    for op in operations or (None,):
                        operation = api.AclOperation.ANY if op is None else self._operation(op)
                        f = api.AclBindingFilter(
                            rtype,
                            name,
                            self._pattern(pattern),
                            principal,
                            host,
                            operation,
                            api.AclPermissionType.ANY,
                        )
                        if f not in filters:
                            filters.append(f)
        return filters

    def remove(
        self, resources: list[tuple[Any, str]], pattern: str, principals: Sequence[str], hosts: Sequence[str],
        operations: Sequence[AclOperation],
    ) -> list[Any]:  # fmt: skip
        """Delete the ACLs matching; returns those removed."""
        if not resources:
            raise AclsError(
                "name the resources to remove ACLs from: --topic, --group, --transactional-id, --cluster"
            )
        filters = self._filters(resources, pattern, principals, hosts, operations)
        futures = self.admin.delete_acls(filters, request_timeout=self.timeout)
        removed: list[Any] = []
        for f in filters:
            for binding in self._wait(futures[f], "removing ACLs"):
                if binding not in removed:
                    removed.append(binding)
        return removed

    def list(self, resources: list[tuple[Any, str]], pattern: str, principals: Sequence[str]) -> list[Any]:
        """The ACLs matching the resources (all when none) and principals."""
        found: list[Any] = []
        for f in self._filters(resources, pattern, principals, (), ()):
            for binding in self._wait(
                self.admin.describe_acls(f, request_timeout=self.timeout), "listing ACLs"
            ):
                if binding not in found:
                    found.append(binding)
        return found

    def close(self) -> None:
        close = getattr(self.admin, "close", None)
        if close is not None:
            close()


def _type_name(rtype: Any) -> str:
    return "CLUSTER" if rtype.name == "BROKER" else rtype.name


def format_acls(bindings: Sequence[Any]) -> list[str]:
    """kafka-acls' listing: per resource pattern, its ACLs."""
    by_resource: dict[tuple[str, str, str], list[Any]] = {}
    for b in bindings:
        key = (_type_name(b.restype), b.name, b.resource_pattern_type.name)
        by_resource.setdefault(key, []).append(b)
    lines = []
    for (rtype, name, pattern), acls in by_resource.items():
        lines.append(
            f"Current ACLs for resource `ResourcePattern(resourceType={rtype}, name={name}, patternType={pattern})`: "
        )
        for b in acls:
            lines.append(
                f" \t(principal={b.principal}, host={b.host}, operation={b.operation.name}, "
                f"permissionType={b.permission_type.name})"
            )
        lines.append("")
    return lines
