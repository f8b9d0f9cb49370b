"""SCRAM users: every user's credentials (DescribeUserScramCredentials), add or update one with a
password, delete one (AlterUserScramCredentials). The password is salted by the admin client
(PBKDF2) and never shown; the broker refuses principals without ALTER/DESCRIBE on the cluster."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from logstore.client.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from logstore.console.kafka import ConsoleError, blocking, result
from logstore.console.pages import clients_of, flash, redirect, render, text_value

MECHANISMS = {"SCRAM-SHA-256": ScramMechanism.SCRAM_SHA_256, "SCRAM-SHA-512": ScramMechanism.SCRAM_SHA_512}
DEFAULT_ITERATIONS = 8192


def _mechanism(form: Any) -> ScramMechanism:
    name = text_value(form, "mechanism", limit=32)
    if name not in MECHANISMS:
        raise ConsoleError(f"mechanism must be one of {', '.join(MECHANISMS)}, not {name!r}")
    return MECHANISMS[name]


def _user(form: Any) -> str:
    user = text_value(form, "user", limit=256).strip()
    if not user:
        raise ConsoleError("give a user name")
    return user


async def user_list(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    found = await blocking("listing SCRAM users", lambda: result(clients.admin.describe_user_scram_credentials()))
    rows = [
        {"user": user, "mechanism": info.mechanism.name.replace("_", "-"), "iterations": info.iterations}
        for user, description in sorted(found.items())
        for info in description.scram_credential_infos
    ]
    return render(request, "users.html", {"rows": rows, "mechanisms": list(MECHANISMS),
                                          "iterations": DEFAULT_ITERATIONS})  # fmt: skip


async def user_set(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    form = await request.post()
    user, mechanism = _user(form), _mechanism(form)
    password = text_value(form, "password", limit=1024)
    raw = text_value(form, "iterations", required=False, limit=8).strip() or str(DEFAULT_ITERATIONS)
    if not raw.isdigit() or not 4096 <= int(raw) <= 16384:
        raise ConsoleError(f"iterations must be a whole number from 4096 to 16384, not {raw!r}")
    upsertion = UserScramCredentialUpsertion(user, ScramCredentialInfo(mechanism, int(raw)), password.encode())
    futures = clients.admin.alter_user_scram_credentials([upsertion])
    await blocking(f"setting the {mechanism.name} credential of {user}", lambda: result(futures[user]))
    flash(request, f"{user}: {mechanism.name.replace('_', '-')} credential set")
    return redirect("/users")


async def user_delete(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    form = await request.post()
    user, mechanism = _user(form), _mechanism(form)
    futures = clients.admin.alter_user_scram_credentials([UserScramCredentialDeletion(user, mechanism)])
    await blocking(f"deleting the {mechanism.name} credential of {user}", lambda: result(futures[user]))
    flash(request, f"{user}: {mechanism.name.replace('_', '-')} credential deleted")
    return redirect("/users")


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/users", user_list)
    router.add_post("/users", user_set)
    router.add_post("/users/delete", user_delete)
