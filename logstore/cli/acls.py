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

from collections.abc import Iterable, Sequence
from itertools import product
from types import ModuleType
from typing import Any

import click

from logstore.cli._clients import admin_module, kafka_reason, select_client, selected_module
from logstore.cli._options import BOOTSTRAP_OPTION, TIMEOUT_OPTION, click_errors, client_option, with_options
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


def _unique(items: Iterable[Any]) -> list[Any]:
    """Each item once, in the order first seen (options given twice make the same ACL twice)."""
    return list(dict.fromkeys(items))


class Acls:
    """An AdminClient on one broker with the three ACL calls (each bounded by ``timeout``)."""

    def __init__(self, bootstrap: str, timeout: float) -> None:
        kafka: ModuleType = selected_module("logstore acls", AclsError)
        self.api = admin_module(kafka)
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
        grants = [(principal, perm.ALLOW) for principal in allow] + [(principal, perm.DENY) for principal in deny]
        bindings = _unique(
            self.api.AclBinding(rtype, name, self._pattern(pattern), principal, host, self._operation(op), permission)
            for (rtype, name), (principal, permission), host, op
            in product(resources, grants, hosts or ("*",), operations)
        )  # fmt: skip
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
        return _unique(
            api.AclBindingFilter(rtype, name, self._pattern(pattern), principal, host,
                                 api.AclOperation.ANY if op is None else self._operation(op),
                                 api.AclPermissionType.ANY)
            for (rtype, name), principal, host, op
            in product(targets, principals or (None,), hosts or (None,), operations or (None,))
        )  # fmt: skip

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
        return _unique(binding for f in filters for binding in self._wait(futures[f], "removing ACLs"))

    def list(self, resources: list[tuple[Any, str]], pattern: str, principals: Sequence[str]) -> list[Any]:
        """The ACLs matching the resources (all when none) and principals."""
        return _unique(
            binding
            for f in self._filters(resources, pattern, principals, (), ())
            for binding in self._wait(self.admin.describe_acls(f, request_timeout=self.timeout), "listing ACLs")
        )

    def close(self) -> None:
        close = getattr(self.admin, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> Acls:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


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


# --------------------------------------------------------------------------- the commands

_PATTERNS = ["literal", "prefixed", "match", "any"]


_common = with_options(
    BOOTSTRAP_OPTION,
    TIMEOUT_OPTION,
    click.option("--topic", "topics", multiple=True, metavar="NAME", help="A topic (repeatable; * for every topic)."),
    click.option("--group", "groups", multiple=True, metavar="NAME", help="A consumer group (repeatable; * for all)."),
    click.option("--transactional-id", "txn_ids", multiple=True, metavar="ID",
                 help="A transactional id (repeatable; * for all)."),
    click.option("--cluster", is_flag=True, help="The cluster resource (kafka-cluster)."),
)  # fmt: skip
"""The options every acls command takes: the broker, the timeout, the resources."""


def _operations(values: tuple[str, ...]) -> list[AclOperation]:
    return [operation_of(v) for v in values]


_OPERATION = click.option(
    "--operation",
    "operations",
    multiple=True,
    metavar="OP",
    help="An operation (repeatable): All, Read, Write, Create, Delete, Alter, Describe, ClusterAction, "
    "DescribeConfigs, AlterConfigs, IdempotentWrite, CreateTokens, DescribeTokens.",
)


@click.group()
@client_option("The client library that talks to the broker.")
def acls(client_name: str) -> None:
    """ACLs, like kafka-acls (the broker needs authorizer.class.name set).

    \b
    logstore acls add --allow-principal User:alice --operation Read --topic orders
    logstore acls add --deny-principal User:bob --operation All --topic orders- --resource-pattern-type prefixed
    logstore acls list [--topic orders] [--principal User:alice]
    logstore acls remove --topic orders [--allow-principal User:alice] [--operation Read]

    Principals are <type>:<name> (User:alice; User:* for everyone), hosts an IP or * (the default).
    DENY wins over ALLOW; READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies
    DESCRIBE_CONFIGS. See docs/acls.md for what each API needs.
    """
    select_client(client_name)


def _echo(lines: list[str]) -> None:
    for line in lines:
        click.echo(line)


@acls.command("add")
@_common
@click.option(
    "--allow-principal", "allow", multiple=True, metavar="PRINCIPAL", help="Principal to allow (repeatable)."
)
@click.option(
    "--deny-principal", "deny", multiple=True, metavar="PRINCIPAL", help="Principal to deny (repeatable)."
)
@click.option(
    "--host", "hosts", multiple=True, metavar="HOST", help="Host the ACL applies to (repeatable; default *)."
)
@_OPERATION
@click.option("--resource-pattern-type", "pattern", type=click.Choice(["literal", "prefixed"], case_sensitive=False),
              default="literal", show_default=True, help="How the resource names match.")  # fmt: skip
def acls_add(bootstrap_server: str, timeout: float, topics: tuple[str, ...], groups: tuple[str, ...],
             txn_ids: tuple[str, ...], cluster: bool, allow: tuple[str, ...], deny: tuple[str, ...],
             hosts: tuple[str, ...], operations: tuple[str, ...], pattern: str) -> None:  # fmt: skip
    """Add ACLs: every principal x host x operation x resource given."""
    with click_errors(), Acls(bootstrap_server, timeout) as client:
        ops = _operations(operations)
        added = client.add(client.resources(topics, groups, txn_ids, cluster), pattern, allow, deny, hosts, ops)
    _echo(["Adding ACLs:", *format_acls(added)])


@acls.command("remove")
@_common
@click.option(
    "--allow-principal", "allow", multiple=True, metavar="PRINCIPAL", help="Only this principal's ACLs."
)
@click.option(
    "--deny-principal", "deny", multiple=True, metavar="PRINCIPAL", help="Only this principal's ACLs."
)
@click.option("--host", "hosts", multiple=True, metavar="HOST", help="Only ACLs for this host (repeatable).")
@_OPERATION
@click.option("--resource-pattern-type", "pattern", type=click.Choice(_PATTERNS, case_sensitive=False),
              default="literal", show_default=True,
              help="Which patterns match the names: literal, prefixed, match (those that apply), any.")  # fmt: skip
def acls_remove(bootstrap_server: str, timeout: float, topics: tuple[str, ...], groups: tuple[str, ...],
                txn_ids: tuple[str, ...], cluster: bool, allow: tuple[str, ...], deny: tuple[str, ...],
                hosts: tuple[str, ...], operations: tuple[str, ...], pattern: str) -> None:  # fmt: skip
    """Remove the ACLs of the resources that match the other options."""
    with click_errors(), Acls(bootstrap_server, timeout) as client:
        resources = client.resources(topics, groups, txn_ids, cluster)
        removed = client.remove(resources, pattern, allow + deny, hosts, _operations(operations))
    _echo([f"Removed {len(removed)} ACL(s):", *format_acls(removed)])


@acls.command("list")
@_common
@click.option(
    "--principal", "principals", multiple=True, metavar="PRINCIPAL", help="Only this principal's ACLs."
)
@click.option("--resource-pattern-type", "pattern", type=click.Choice(_PATTERNS, case_sensitive=False),
              default="any", show_default=True,
              help="Which patterns match the names: literal, prefixed, match (those that apply), any.")  # fmt: skip
def acls_list(bootstrap_server: str, timeout: float, topics: tuple[str, ...], groups: tuple[str, ...],
              txn_ids: tuple[str, ...], cluster: bool, principals: tuple[str, ...], pattern: str) -> None:  # fmt: skip
    """List the ACLs of the resources given (every ACL when none)."""
    with click_errors(), Acls(bootstrap_server, timeout) as client:
        found = client.list(client.resources(topics, groups, txn_ids, cluster), pattern, principals)
    _echo(format_acls(found))
