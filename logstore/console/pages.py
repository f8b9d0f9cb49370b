"""What every area of the console shares: its settings, rendering a page, reading a form's values.

Templates are jinja2 with autoescaping (``templates/``); each page gets the
session's principal and CSRF token, the read-only flag and the area it belongs
to. Form and query values are read through :func:`text_value` and
:func:`int_value`, which refuse (400, saying which field and why) what is
missing, too long or out of range.
"""

from __future__ import annotations

import contextvars
import pathlib
import secrets
import time
from dataclasses import dataclass, field
from typing import Any

import jinja2
from aiohttp import web
from markupsafe import Markup

from logstore.console.kafka import Clients, ConsoleError

HERE = pathlib.Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
MAX_TEXT = 1000
"""The longest value a form field takes (a filter, a config value, a name): longer is a 400."""
MAX_PRODUCE_BYTES = 1_000_000


@dataclass
class ConsoleSettings:
    """How a console runs: the cluster it speaks to and the client config to do it with."""

    bootstrap: str
    client_config: dict[str, Any] = field(default_factory=dict)
    read_only: bool = False
    title: str = "logstore console"
    page_size: int = 50
    schema_registry_url: str | None = None
    """A schema registry, to decode values in Confluent's wire format (the "schema" decoding)."""
    metrics_urls: list[str] = field(default_factory=list)
    """The brokers' Prometheus endpoints, for bytes in and out (the protocol does not say where they are)."""

    def __post_init__(self) -> None:
        self.client_config = {**self.client_config, "bootstrap.servers": self.bootstrap}

    @property
    def needs_login(self) -> bool:
        """Does the cluster ask for SASL (so each user logs in with their own credentials)?"""
        return str(self.client_config.get("security.protocol", "")).upper().startswith("SASL")

    @property
    def mechanism(self) -> str:
        return str(self.client_config.get("sasl.mechanism") or self.client_config.get("sasl.mechanisms")
                   or "SCRAM-SHA-512").upper()  # fmt: skip


@dataclass
class Session:
    """One visitor: the id in its cookie, its CSRF token, and once logged in its principal and client."""

    id: str
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    principal: str | None = None
    clients: Clients | None = None
    last_seen: float = field(default_factory=time.monotonic)
    flash: str | None = None


SETTINGS = web.AppKey("settings", ConsoleSettings)
SHARED_CLIENTS = web.AppKey("shared_clients", Clients)
"""The one client of a console without SASL (absent with SASL: each session has its own)."""
CURRENT: contextvars.ContextVar[Session] = contextvars.ContextVar("logstore_console_session")
"""The session of the request being handled (set by the app's middleware, in the request's task)."""


def session_of(request: web.Request) -> Session:
    return CURRENT.get()


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(str(TEMPLATES)),
    autoescape=jinja2.select_autoescape(["html", "svg"]),
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _bytes(n: int | None) -> str:
    if n is None or n < 0:
        return "n/a"
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def _when(ms: int | None) -> str:
    if ms is None or ms < 0:
        return ""
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ms / 1000)) + f".{ms % 1000:03d}Z"


def _number(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,}"


ENV.filters["bytes"] = _bytes
ENV.filters["number"] = _number
ENV.filters["when"] = _when
ENV.globals["Markup"] = Markup


def settings_of(request: web.Request) -> ConsoleSettings:
    return request.app[SETTINGS]


def clients_of(request: web.Request) -> Clients:
    """The client of this request's principal (the shared one without SASL)."""
    session = CURRENT.get(None)
    clients = session.clients if session is not None and session.clients is not None else None
    if clients is None:
        clients = request.app.get(SHARED_CLIENTS)
    if clients is None:
        raise ConsoleError("log in first", 401)
    return clients


def render(request: web.Request, template: str, context: dict[str, Any], status: int = 200) -> web.Response:
    settings = settings_of(request)
    session = CURRENT.get(None)
    flash = None
    if session is not None and session.flash:
        flash, session.flash = session.flash, None
    page = ENV.get_template(template).render(
        settings=settings,
        read_only=settings.read_only,
        principal=None if session is None else session.principal,
        csrf=None if session is None else session.csrf,
        needs_login=settings.needs_login,
        path=request.path,
        flash=flash,
        **context,
    )
    return web.Response(text=page, status=status, content_type="text/html", charset="utf-8")


def redirect(location: str) -> web.Response:
    """See Other: after a form post, the page to show (its GET)."""
    return web.Response(status=303, headers={"Location": location})


def flash(request: web.Request, message: str) -> None:
    """A one-line notice shown on the next page the session sees."""
    session = CURRENT.get(None)
    if session is not None:
        session.flash = message


def text_value(values: Any, name: str, *, required: bool = True, default: str = "", limit: int = MAX_TEXT) -> str:
    """A text field of a form or query; a 400 naming it when missing or longer than ``limit``."""
    raw = values.get(name)
    if raw is None or (isinstance(raw, str) and raw.strip() == ""):
        if required:
            raise ConsoleError(f"{name} is required")
        return default
    if not isinstance(raw, str):
        raise ConsoleError(f"{name} must be text")
    if len(raw) > limit:
        raise ConsoleError(f"{name} is {len(raw)} characters long; the console takes at most {limit}")
    return raw


def int_value(values: Any, name: str, *, default: int | None = None, low: int | None = None,
              high: int | None = None) -> int:  # fmt: skip
    """An integer field; a 400 naming it when missing, not a number, or out of [low, high]."""
    raw = text_value(values, name, required=default is None, default="", limit=32)
    if raw == "":
        assert default is not None
        return default
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConsoleError(f"{name} must be a whole number, not {raw!r}") from None
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"from {low}" if high is None else f"from {low} to {high}" if low is not None else f"up to {high}"
        raise ConsoleError(f"{name} must be {bounds}, not {value}")
    return value


def topic_name(request: web.Request) -> str:
    """The topic of the URL, checked as Kafka checks a topic name."""
    name = request.match_info["topic"]
    check_topic_name(name)
    return name


def check_topic_name(name: str) -> None:
    if not name or len(name) > 249 or name in (".", ".."):
        raise ConsoleError(f"{name[:60]!r} is not a topic name: 1 to 249 characters, not '.' or '..'")
    bad = sorted({c for c in name if not (c.isascii() and (c.isalnum() or c in "._-"))})
    if bad:
        raise ConsoleError(f"topic name {name[:60]!r} has characters Kafka does not allow: {' '.join(bad)}; "
                           "use letters, digits, '.', '_' and '-'")  # fmt: skip


def refuse_in_read_only(request: web.Request) -> None:
    if settings_of(request).read_only:
        raise ConsoleError("this console runs with --read-only: it changes nothing in the cluster", 403)


__all__ = [
    "CURRENT",
    "SETTINGS",
    "SHARED_CLIENTS",
    "ConsoleSettings",
    "Session",
    "check_topic_name",
    "clients_of",
    "flash",
    "int_value",
    "redirect",
    "refuse_in_read_only",
    "render",
    "session_of",
    "settings_of",
    "text_value",
    "topic_name",
]
