"""Sessions, login with the cluster's own SASL credentials, logout, and CSRF tokens.

Every visitor gets a session (a random id in a Secure, HttpOnly, SameSite=Strict
cookie; the state stays in the server's memory) carrying a CSRF token that
every form posts back. When the cluster asks for SASL (the console's client
config has ``security.protocol=SASL_*``), a session sees nothing but the login
page until its user logs in: the console then opens a client as that user
(the broker checks the password, and each later action against that user's
ACLs), and gives the session a new id. Logging out closes that client.
Without SASL every session shares one client and there is no login.

Sessions end after :data:`IDLE_S` without a request; at most
:data:`MAX_SESSIONS` live at once (the oldest go first).
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from logstore.console.kafka import Clients, ConsoleError, blocking, result
from logstore.console.pages import Session, redirect, render, session_of, settings_of

COOKIE = "logstore_console"
IDLE_S = 30 * 60.0
MAX_SESSIONS = 500
MECHANISMS = ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")
LOGIN_TIMEOUT_S = 10.0
OPEN_PATHS = ("/login", "/static/", "/healthz")
"""Paths a session reaches before it logs in."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Sessions:
    """The live sessions, by id, oldest first."""

    def __init__(self, idle_s: float = IDLE_S, max_sessions: int = MAX_SESSIONS) -> None:
        self.idle_s = idle_s
        self.max_sessions = max_sessions
        self._by_id: OrderedDict[str, Session] = OrderedDict()

    def __len__(self) -> int:
        return len(self._by_id)

    def __contains__(self, session_id: object) -> bool:
        return session_id in self._by_id

    def new(self) -> Session:
        self.expire()
        while len(self._by_id) >= self.max_sessions:
            _, oldest = self._by_id.popitem(last=False)
            _close(oldest)
        session = Session(secrets.token_urlsafe(32))
        self._by_id[session.id] = session
        return session

    def get(self, session_id: str | None) -> Session | None:
        if not session_id:
            return None
        session = self._by_id.get(session_id)
        if session is None:
            return None
        if time.monotonic() - session.last_seen > self.idle_s:
            self.drop(session)
            return None
        session.last_seen = time.monotonic()
        self._by_id.move_to_end(session.id)
        return session

    def renew(self, session: Session) -> Session:
        """The same session under a new id (at login: an id seen before login is worth nothing after)."""
        self._by_id.pop(session.id, None)
        session.id = secrets.token_urlsafe(32)
        session.csrf = secrets.token_urlsafe(32)
        self._by_id[session.id] = session
        return session

    def drop(self, session: Session) -> None:
        self._by_id.pop(session.id, None)
        _close(session)

    def expire(self) -> None:
        now = time.monotonic()
        for stale in [s for s in self._by_id.values() if now - s.last_seen > self.idle_s]:
            self.drop(stale)

    def close(self) -> None:
        for session in list(self._by_id.values()):
            self.drop(session)


def _close(session: Session) -> None:
    """Close the session's client on a thread of its own: closing waits for the broker (up to a few
    seconds), which the event loop serving every other page must not."""
    clients, session.clients = session.clients, None
    if clients is not None:
        threading.Thread(target=clients.close, name="logstore-console-close", daemon=True).start()


SESSIONS = web.AppKey("sessions", Sessions)


def set_cookie(response: web.StreamResponse, session: Session) -> None:
    response.set_cookie(COOKIE, session.id, secure=True, httponly=True, samesite="Strict", path="/")


def check_csrf(session: Session, token: Any) -> None:
    """Refuse a form post without this session's CSRF token."""
    if not isinstance(token, str) or not token:
        raise ConsoleError("the form has no CSRF token: reload the page and submit the form again", 403)
    if not hmac.compare_digest(token.encode(), session.csrf.encode()):
        raise ConsoleError(
            "the form's CSRF token is not this session's (it expired, or the form came from another site): "
            "reload the page and submit the form again", 403,
        )  # fmt: skip


async def login(request: web.Request) -> web.StreamResponse:
    """GET: the login form; POST: open a client as that user, or say why not."""
    settings = settings_of(request)
    if not settings.needs_login:
        return redirect("/")
    session = session_of(request)
    if request.method == "GET":
        return render(request, "login.html", {"mechanisms": MECHANISMS, "mechanism": settings.mechanism,
                                              "next": _safe_next(request.query.get("next"))})  # fmt: skip
    form = await request.post()
    user = str(form.get("username", "")).strip()
    password = str(form.get("password", ""))
    mechanism = str(form.get("mechanism", settings.mechanism))
    if mechanism not in MECHANISMS:
        raise ConsoleError(f"mechanism must be one of {', '.join(MECHANISMS)}, not {mechanism!r}")
    if not user or not password or len(user) > 256 or len(password) > 1024:
        return render(request, "login.html", {"mechanisms": MECHANISMS, "mechanism": mechanism,
                                              "error": "give a user name and a password", "username": user,
                                              "next": _safe_next(str(form.get("next", "")))}, status=400)  # fmt: skip
    config = {**settings.client_config, "sasl.mechanism": mechanism, "sasl.username": user,
              "sasl.password": password}  # fmt: skip
    clients = await blocking("opening a client", lambda: Clients(config))
    try:
        await blocking("logging in", lambda: result(clients.admin.describe_cluster(), LOGIN_TIMEOUT_S),
                       LOGIN_TIMEOUT_S + 1)  # fmt: skip
    except ConsoleError as e:
        clients.close()
        status = e.status if e.status in (401, 502) else 401
        return render(request, "login.html", {"mechanisms": MECHANISMS, "mechanism": mechanism, "username": user,
                                              "error": f"login failed: {e}", "next": _safe_next(str(form.get("next", "")))},
                      status=status)  # fmt: skip
    sessions = request.app[SESSIONS]
    sessions.renew(session)
    session.principal = f"User:{user}"
    session.clients = clients
    response = redirect(_safe_next(str(form.get("next", ""))))
    set_cookie(response, session)
    return response


async def logout(request: web.Request) -> web.StreamResponse:
    request.app[SESSIONS].drop(session_of(request))
    response = redirect("/login")
    response.del_cookie(COOKIE, path="/")
    return response


def _safe_next(target: str | None) -> str:
    """Where to go after login: a path of this console only (never another site)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


__all__ = ["COOKIE", "MECHANISMS", "SESSIONS", "Sessions", "check_csrf", "login", "logout", "set_cookie"]
