"""The console's aiohttp application: routes, middlewares, and the server (``logstore console``).

Each request goes through one middleware, in this order: its session (made on
the first visit, its cookie set), the login gate (with SASL, anything but the
login page and the static files needs a logged-in session), the read-only gate
and the CSRF check of a POST, then the handler; a :class:`ConsoleError` from
any of them becomes an error page (or plain text for a non-HTML answer) with
its status and a message that says what to do.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from typing import Any
from urllib.parse import quote

from aiohttp import web

from logstore.console import acls, auth, groups, messages, overview, quotas, topics, traffic, users
from logstore.console.kafka import Clients, ConsoleError, blocking
from logstore.console.pages import (
    CURRENT,
    SETTINGS,
    SHARED_CLIENTS,
    STATIC,
    ConsoleSettings,
    redirect,
    refuse_in_read_only,
    render,
    settings_of,
)
from logstore.console.schemas import Registry

log = logging.getLogger("logstore.console")

MAX_FORM_BYTES = 17 * 1000 * 1000
"""The largest request body (an imported file is at most 16 MB of it, a produced message 1 MB)."""


def _wants_text(request: web.Request) -> bool:
    """A request of the page's script (a live part's refresh) or a file: answered in text, never redirected."""
    if request.headers.get("X-Console-Fetch") == "1":
        return True
    return request.path.endswith((".svg", ".jsonl", ".csv")) or "text/html" not in request.headers.get("Accept", "text/html")


@web.middleware
async def console_middleware(request: web.Request, handler: auth.Handler) -> web.StreamResponse:
    settings = settings_of(request)
    sessions = request.app[auth.SESSIONS]
    session = sessions.get(request.cookies.get(auth.COOKIE))
    fresh = session is None
    if session is None:
        session = sessions.new()
    CURRENT.set(session)
    response: web.StreamResponse
    try:
        response = await _guarded(request, handler, settings, session)
    except web.HTTPRedirection as e:
        response = redirect(e.headers.get("Location", "/"))
    except web.HTTPException as e:
        response = _error_page(request, e.status, e.reason)
    except ConsoleError as e:
        response = _error_page(request, e.status, str(e))
    except asyncio.CancelledError:
        raise
    except Exception as e:  # a bug: say so, and log it
        log.exception("console: %s %s failed", request.method, request.path)
        response = _error_page(request, 500, f"the console failed: {type(e).__name__}: {e}")
    if fresh and session.id in sessions:
        auth.set_cookie(response, session)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("X-Frame-Options", "DENY")
    response.headers.setdefault("Referrer-Policy", "same-origin")
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; form-action 'self'; "
        "frame-ancestors 'none'",
    )
    return response


async def _guarded(
    request: web.Request, handler: auth.Handler, settings: ConsoleSettings, session: auth.Session
) -> web.StreamResponse:
    open_path = request.path.startswith(auth.OPEN_PATHS)
    if settings.needs_login and session.principal is None and not open_path:
        if request.method == "GET" and not _wants_text(request):
            return web.Response(status=302, headers={
                "Location": f"/login?next={quote(request.path_qs)}" if request.path != "/" else "/login"})  # fmt: skip
        raise ConsoleError("log in first (your session ended or never began)", 401)
    if request.method == "POST":
        if request.path != "/login" and request.path != "/logout":
            refuse_in_read_only(request)
        form = await request.post()
        auth.check_csrf(session, form.get("csrf_token"))
    return await handler(request)


def _error_page(request: web.Request, status: int, message: str) -> web.Response:
    if _wants_text(request):
        return web.Response(text=f"error {status}: {message}\n", status=status, content_type="text/plain")
    return render(request, "error.html", {"status": status, "message": message}, status=status)


async def healthz(request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok\n", content_type="text/plain")


def make_app(settings: ConsoleSettings) -> web.Application:
    """The console as an aiohttp Application (clients open on start-up, close on clean-up)."""
    app = web.Application(middlewares=[console_middleware], client_max_size=MAX_FORM_BYTES)
    app[SETTINGS] = settings
    app[auth.SESSIONS] = auth.Sessions()
    app[traffic.METER] = traffic.Meter(settings.metrics_urls)
    app[messages.SCHEMA_REGISTRY] = Registry(settings.schema_registry_url)
    app.router.add_get("/healthz", healthz)
    app.router.add_route("*", "/login", auth.login)
    app.router.add_post("/logout", auth.logout)
    overview.add_routes(app.router)
    topics.add_routes(app.router)
    messages.add_routes(app.router)
    groups.add_routes(app.router)
    acls.add_routes(app.router)
    quotas.add_routes(app.router)
    users.add_routes(app.router)
    traffic.add_routes(app.router)
    app.router.add_static("/static/", STATIC, name="static")
    app.on_startup.append(_open_shared)
    app.on_cleanup.append(_close_all)
    return app


async def _open_shared(app: web.Application) -> None:
    settings = app[SETTINGS]
    if not settings.needs_login:
        app[SHARED_CLIENTS] = await blocking("opening the console's client",
                                               lambda: Clients(settings.client_config))  # fmt: skip


async def _close_all(app: web.Application) -> None:
    await asyncio.to_thread(app[auth.SESSIONS].close)
    shared = app.get(SHARED_CLIENTS)
    if shared is not None:
        await asyncio.to_thread(shared.close)


def serve_in_thread(settings: ConsoleSettings, host: str, port: int, timeout: float = 30.0) -> str:
    """Start the console on a daemon thread with its own event loop (beside a broker in one process);
    returns its URL once it listens, or raises ConsoleError saying why it cannot."""
    started: list[str] = []
    failed: list[BaseException] = []
    ready = threading.Event()

    def announce(url: str) -> None:
        started.append(url)
        ready.set()

    def run() -> None:
        try:
            serve(settings, host, port, announce)
        except BaseException as e:  # reported to the starting thread
            failed.append(e)
            ready.set()

    threading.Thread(target=run, name="logstore-console", daemon=True).start()
    if not ready.wait(timeout):
        raise ConsoleError(f"the console did not start on {host}:{port} within {timeout:g} s")
    if failed:
        raise ConsoleError(str(failed[0]))
    return started[0]


def serve(settings: ConsoleSettings, host: str, port: int, ready: Any = None) -> None:
    """Run the console on ``host:port`` until interrupted; ``ready(url)`` once it listens."""

    async def main() -> None:
        runner = web.AppRunner(make_app(settings), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except OSError as e:
            await runner.cleanup()
            raise ConsoleError(f"cannot listen on {host}:{port} ({e.strerror}); pass another --listen HOST:PORT") from None
        bound = port
        server = getattr(site, "_server", None)
        if server is not None and server.sockets:
            bound = server.sockets[0].getsockname()[1]
        if ready is not None:
            ready(f"http://{host}:{bound}/")
        try:
            await asyncio.Event().wait()
        finally:
            await runner.cleanup()

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())


__all__ = ["ConsoleSettings", "make_app", "serve", "serve_in_thread"]
