"""ACLs: the cluster's ACLs (DescribeAcls), filtered and paged; add one (CreateAcls); remove one (DeleteAcls).

What the principal may see and change is the broker's to decide (DESCRIBE and
ALTER on the cluster); a cluster without an authorizer answers
SECURITY_DISABLED, shown as such.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from logstore.client.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)
from logstore.console.kafka import ConsoleError, blocking, result
from logstore.console.pages import clients_of, flash, int_value, redirect, render, settings_of, text_value

RESOURCE_TYPES = ("TOPIC", "GROUP", "BROKER", "TRANSACTIONAL_ID")
PATTERN_TYPES = ("LITERAL", "PREFIXED")
OPERATIONS = tuple(op.name for op in AclOperation if op.value >= 2)
PERMISSIONS = ("ALLOW", "DENY")


def _choice(values: Any, name: str, allowed: tuple[str, ...]) -> str:
    value = text_value(values, name, limit=32).upper()
    if value not in allowed:
        raise ConsoleError(f"{name} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def binding_of(form: Any) -> AclBinding:
    """The ACL a form names; a 400 for a bad field."""
    restype = _choice(form, "resource_type", RESOURCE_TYPES)
    name = text_value(form, "resource_name", limit=249)
    if restype == "BROKER" and name != "kafka-cluster":
        raise ConsoleError("the cluster's resource name is kafka-cluster")
    principal = text_value(form, "principal", limit=256).strip()
    if ":" not in principal or not principal.split(":", 1)[1]:
        raise ConsoleError(f"principal is TYPE:NAME (e.g. User:alice), not {principal!r}")
    return AclBinding(
        ResourceType[restype], name, ResourcePatternType[_choice(form, "pattern_type", PATTERN_TYPES)],
        principal, text_value(form, "host", required=False, default="*", limit=64).strip() or "*",
        AclOperation[_choice(form, "operation", OPERATIONS)],
        AclPermissionType[_choice(form, "permission", PERMISSIONS)],
    )  # fmt: skip


async def acl_list(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    settings = settings_of(request)
    query = text_value(request.query, "q", required=False, limit=256).lower()
    page = int_value(request.query, "page", default=1, low=1, high=1_000_000)
    everything = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None, AclOperation.ANY,
                                  AclPermissionType.ANY)  # fmt: skip
    acls = await blocking("listing ACLs", lambda: result(clients.admin.describe_acls(everything)))
    rows = sorted(
        (a for a in acls if query in f"{a.principal} {a.name} {a.restype.name} {a.operation.name}".lower()),
        key=lambda a: (a.restype.name, a.name or "", a.principal or "", a.operation.name),
    )
    pages = max(1, -(-len(rows) // settings.page_size))
    page = min(page, pages)
    shown = rows[(page - 1) * settings.page_size: page * settings.page_size]
    return render(request, "acls.html", {
        "acls": shown, "total": len(rows), "page": page, "pages": pages, "q": query,
        "resource_types": RESOURCE_TYPES, "pattern_types": PATTERN_TYPES, "operations": OPERATIONS,
        "permissions": PERMISSIONS,
    })  # fmt: skip


async def acl_create(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    binding = binding_of(await request.post())
    await blocking("adding an ACL", lambda: result(clients.admin.create_acls([binding])[binding]))
    flash(request, f"ACL added: {binding.principal} {binding.permission_type.name} {binding.operation.name} "
                   f"on {binding.restype.name} {binding.name}")  # fmt: skip
    return redirect("/acls")


async def acl_delete(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    binding = binding_of(await request.post())
    exact = AclBindingFilter(binding.restype, binding.name, binding.resource_pattern_type, binding.principal,
                             binding.host, binding.operation, binding.permission_type)  # fmt: skip
    removed = await blocking("removing an ACL", lambda: result(clients.admin.delete_acls([exact])[exact]))
    flash(request, f"{len(removed)} ACL removed" if len(removed) == 1 else f"{len(removed)} ACLs removed")
    return redirect("/acls")


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/acls", acl_list)
    router.add_post("/acls", acl_create)
    router.add_post("/acls/delete", acl_delete)
