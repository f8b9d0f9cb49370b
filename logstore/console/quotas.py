"""Client quotas: every entity's quotas (DescribeClientQuotas), set or remove one (AlterClientQuotas).

An entity is a user, a client id or an IP (or a user and a client id
together); an empty name is the ``<default>`` entity. Kafka's keys:
``producer_byte_rate``, ``consumer_byte_rate``, ``request_percentage``,
``controller_mutation_rate``, ``connection_creation_rate`` (IP).
"""

from __future__ import annotations

from aiohttp import web

from logstore.console.kafka import ConsoleError, blocking, result
from logstore.console.pages import clients_of, flash, redirect, render, text_value

ENTITY_TYPES = ("user", "client-id", "ip")
KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate",
        "connection_creation_rate")  # fmt: skip


async def quota_list(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    found = await blocking("listing client quotas", lambda: result(clients.admin.describe_client_quotas()))
    rows = sorted(
        ({"entity": entity, "key": key, "value": value} for entity, quotas in found.items() for key, value in quotas.items()),
        key=lambda r: (str(r["entity"]), str(r["key"])),
    )  # fmt: skip
    return render(request, "quotas.html", {"rows": rows, "entity_types": ENTITY_TYPES, "keys": KEYS})


async def quota_set(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    form = await request.post()
    entity_type = text_value(form, "entity_type", limit=16)
    if entity_type not in ENTITY_TYPES:
        raise ConsoleError(f"entity_type must be one of {', '.join(ENTITY_TYPES)}, not {entity_type!r}")
    name = text_value(form, "entity_name", required=False, limit=256).strip() or None
    key = text_value(form, "key", limit=64).strip()
    raw = text_value(form, "value", required=False, limit=32).strip()
    value: float | None = None
    if raw:
        try:
            value = float(raw)
        except ValueError:
            raise ConsoleError(f"value must be a number (or empty to remove the quota), not {raw!r}") from None
        if value < 0:
            raise ConsoleError(f"value must be 0 or more, not {raw}")
    entity = {entity_type: name}
    futures = clients.admin.alter_client_quotas([(entity, {key: value})])
    await blocking(f"changing quota {key} of {entity_type} {name or '<default>'}", lambda: result(futures[0]))
    flash(request, f"{key} of {entity_type} {name or '<default>'} " + (f"set to {raw}" if value is not None else "removed"))
    return redirect("/quotas")


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/quotas", quota_list)
    router.add_post("/quotas", quota_set)
