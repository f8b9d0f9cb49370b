"""The admin client's ACLs: create, describe, delete (CreateAcls, DescribeAcls, DeleteAcls),
and the ACL types, as confluent-kafka names them.

:class:`AclBinding` is one ACL, :class:`AclBindingFilter` selects ACLs (None matches
any name, principal or host; ANY types and MATCH patterns as Kafka's filters). The
codes are Kafka's: :class:`~logstore.client.admin.resources.ResourceType` (BROKER is Kafka's
CLUSTER, 4), :class:`ResourcePatternType`,
:class:`~logstore.client.admin.resources.AclOperation`, and :class:`AclPermissionType`.
The requests go to any broker (a dropped connection is retried once). ``create_acls`` has a
future per binding and ``delete_acls`` one per filter, each failed with the broker's error
code and message for it; ``describe_acls`` has one future, failed with the answer's error.

>>> b = AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*",
...                AclOperation.READ, AclPermissionType.ALLOW)
>>> b == AclBinding(ResourceType.TOPIC, "t", ResourcePatternType.LITERAL, "User:a", "*",
...                 AclOperation.READ, AclPermissionType.ALLOW), b.restype.value
(True, 2)
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from enum import Enum
from typing import Any

from logstore.client.admin.checks import check_list, check_unique
from logstore.client.admin.client import AdminBase, kafka_error, new_future, settle
from logstore.client.admin.resources import AclOperation, ResourceType
from logstore.client.errors import KafkaException, local

DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31


class ResourcePatternType(Enum):
    """Kafka's PatternType: LITERAL and PREFIXED in ACLs; MATCH and ANY in filters too."""

    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclPermissionType(Enum):
    """Kafka's AclPermissionType."""

    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


class AclBinding:
    """One ACL: principal ``<type>:<name>`` from ``host`` may (ALLOW) or may not (DENY) do
    ``operation`` on the resources the pattern selects."""

    _nullable = False

    def __init__(
        self,
        restype: ResourceType,
        name: str | None,
        resource_pattern_type: ResourcePatternType,
        principal: str | None,
        host: str | None,
        operation: AclOperation,
        permission_type: AclPermissionType,
    ) -> None:
        for what, value in (("name", name), ("principal", principal), ("host", host)):
            if value is None and not self._nullable:
                raise ValueError(f"{type(self).__name__}: {what} must not be None")
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{type(self).__name__}: {what} must be a str, not {type(value).__name__}")
        self.restype = restype
        self.name = name
        self.resource_pattern_type = resource_pattern_type
        self.principal = principal
        self.host = host
        self.operation = operation
        self.permission_type = permission_type

    def _key(self) -> tuple[Any, ...]:
        return (self.restype, self.name, self.resource_pattern_type, self.principal, self.host,
                self.operation, self.permission_type)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        parts = [str(k) if not isinstance(k, Enum) else f"{type(k).__name__}.{k.name}" for k in self._key()]
        return f"{type(self).__name__}({','.join(parts)})"

    def wire(self) -> dict[str, Any]:
        """The fields of a CreateAcls creation (also a filter's, renamed by the caller)."""
        return {
            "resource_type": self.restype.value,
            "resource_name": self.name,
            "resource_pattern_type": self.resource_pattern_type.value,
            "principal": self.principal,
            "host": self.host,
            "operation": self.operation.value,
            "permission_type": self.permission_type.value,
        }


class AclBindingFilter(AclBinding):
    """Selects ACLs (DescribeAcls, DeleteAcls); None name, principal or host match any."""

    _nullable = True

    def wire_filter(self) -> dict[str, Any]:
        return {
            "resource_type_filter": self.restype.value,
            "resource_name_filter": self.name,
            "pattern_type_filter": self.resource_pattern_type.value,
            "principal_filter": self.principal,
            "host_filter": self.host,
            "operation": self.operation.value,
            "permission_type": self.permission_type.value,
        }


class AclsAdmin(AdminBase):
    """The calls on ACLs (see the module docstring)."""

    def create_acls(
        self, acls: list[AclBinding], *, request_timeout: float | None = None
    ) -> dict[AclBinding, Future[None]]:
        """Add ACLs (CreateAcls): a future per binding, None or a KafkaException."""
        bindings = check_list("acls", acls, AclBinding, "AclBinding")
        check_unique("acls", bindings)
        deadline = self._deadline(request_timeout)
        futures = {b: new_future() for b in bindings}

        def work() -> None:
            response = self._call(CREATE_ACLS, {"creations": [b.wire() for b in bindings]}, deadline)
            _settle_in_order(
                futures, response.results, "CreateAcls: one result per ACL expected", lambda _: None
            )

        self._submit(futures.values(), work, deadline)
        return futures

    def describe_acls(
        self, acl_binding_filter: AclBindingFilter, *, request_timeout: float | None = None
    ) -> Future[list[AclBinding]]:
        """The ACLs the filter matches (DescribeAcls)."""
        if not isinstance(acl_binding_filter, AclBindingFilter):
            raise TypeError("describe_acls expects an AclBindingFilter")
        deadline = self._deadline(request_timeout)
        future = new_future()

        def work() -> None:
            response = self._call(DESCRIBE_ACLS, acl_binding_filter.wire_filter(), deadline)
            future.set_result([_binding(r, a) for r in response.resources for a in r.acls])

        self._submit([future], work, deadline)
        return future

    def delete_acls(
        self, acl_binding_filters: list[AclBindingFilter], *, request_timeout: float | None = None
    ) -> dict[AclBindingFilter, Future[list[AclBinding]]]:
        """Remove the ACLs each filter matches (DeleteAcls): per filter, the ACLs removed."""
        filters = check_list("acl_binding_filters", acl_binding_filters, AclBindingFilter, "AclBindingFilter")
        check_unique("acl_binding_filters", filters)
        deadline = self._deadline(request_timeout)
        futures = {f: new_future() for f in filters}

        def work() -> None:
            response = self._call(DELETE_ACLS, {"filters": [f.wire_filter() for f in filters]}, deadline)
            _settle_in_order(futures, response.filter_results, "DeleteAcls: one result per filter expected",
                             lambda r: [_binding(m, m) for m in r.matching_acls])  # fmt: skip

        self._submit(futures.values(), work, deadline)
        return futures


def _enum_or_unknown(kind: Any, code: int) -> Any:
    try:
        return kind(int(code))
    except ValueError:
        return kind(0)


def _binding(resource: Any, acl: Any) -> AclBinding:
    """An ACL of a DescribeAcls resource, or a DeleteAcls match (``resource`` and ``acl`` the same)."""
    pattern = getattr(resource, "pattern_type", None)
    if pattern is None:
        pattern = resource.resource_pattern_type
    return AclBinding(
        _enum_or_unknown(ResourceType, resource.resource_type), resource.resource_name,
        _enum_or_unknown(ResourcePatternType, pattern), acl.principal, acl.host,
        _enum_or_unknown(AclOperation, acl.operation), _enum_or_unknown(AclPermissionType, acl.permission_type),
    )  # fmt: skip


def _settle_in_order(
    futures: Mapping[Any, Future[Any]], results: Iterable[Any], mismatch: str, value_of: Callable[[Any], Any]
) -> None:
    """Settle ``futures`` with the answer's ``results``, one per future in the same order: the
    result's error, or ``value_of`` it. KafkaException ``_BAD_MSG`` (``mismatch``) when the
    counts differ."""
    answers = list(results)
    if len(answers) != len(futures):
        raise KafkaException(local("_BAD_MSG", mismatch))
    settle(futures, {
        key: kafka_error(r.error_code, r.error_message) if r.error_code else value_of(r)
        for key, r in zip(futures, answers, strict=True)
    })  # fmt: skip
