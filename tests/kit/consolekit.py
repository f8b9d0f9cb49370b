"""The web console in a test: served on a free loopback port from a thread, and a browser-like HTTP client.

``ConsoleServer(settings)`` runs :func:`logstore.console.make_app` on its own
event loop in a daemon thread (``url``; ``stop()`` closes its clients).
``Visitor`` is one person's browser at the HTTP level: it keeps the session
cookie (a ``Secure`` cookie, which ``http.cookiejar`` would not send over
http://127.0.0.1, so it is kept by hand), asks for HTML, and reads the CSRF
token from the last page so that ``post`` sends it as the page's forms do.
"""

from __future__ import annotations

import asyncio
import http.client
import re
import threading
import time
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urlsplit

from aiohttp import web

from logstore.console import ConsoleSettings, make_app

START_TIMEOUT_S = 20.0


class ConsoleServer:
    """The console on 127.0.0.1:<free port>, served from a thread."""

    def __init__(self, settings: ConsoleSettings) -> None:
        self.settings = settings
        self.loop = asyncio.new_event_loop()
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="console", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ConsoleServer:
        self._thread.start()
        if not self._ready.wait(START_TIMEOUT_S):
            raise RuntimeError(f"the console did not start within {START_TIMEOUT_S} s")
        if self._error is not None:
            raise RuntimeError(f"the console did not start: {self._error!r}")
        return self

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self._start())
        except BaseException as e:
            self._error = e
            self._ready.set()
            return
        self._ready.set()
        self.loop.run_forever()

    async def _start(self) -> None:
        self._runner = web.AppRunner(make_app(self.settings), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        self.port = int(server.sockets[0].getsockname()[1])

    @property
    def app(self) -> web.Application:
        assert self._runner is not None
        return self._runner.app

    def stop(self) -> None:
        if self._runner is not None:
            done = asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self.loop)
            done.result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(30)


@dataclass
class Answer:
    status: int
    headers: http.client.HTTPMessage
    body: bytes

    @property
    def text(self) -> str:
        return self.body.decode("utf-8", "replace")

    @property
    def location(self) -> str:
        return self.headers.get("Location", "")

    def error(self) -> str:
        """The page's error message (its ``id="error"`` paragraph), or the plain-text answer."""
        found = re.search(r'id="error"[^>]*>(.*?)</p>', self.text, re.S)
        text = found.group(1) if found else self.text
        return text.replace("&#39;", "'").replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")

    def csrf(self) -> str | None:
        found = re.search(r'name="csrf_token" value="([^"]+)"', self.text)
        return found.group(1) if found else None


class Visitor:
    """A browser at the HTTP level: its cookie, its last CSRF token; redirects not followed."""

    def __init__(self, base_url: str, timeout: float = 60.0) -> None:
        parts = urlsplit(base_url)
        assert parts.hostname == "127.0.0.1", "the tests use loopback only"
        self.host, self.port = parts.hostname, int(parts.port or 80)
        self.timeout = timeout
        self.cookie: str | None = None
        self.set_cookie_headers: list[str] = []
        self.csrf: str | None = None

    def request(self, method: str, path: str, body: bytes | None = None, headers: dict[str, str] | None = None,
                accept: str = "text/html") -> Answer:  # fmt: skip
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            sent = {"Accept": accept, **(headers or {})}
            if self.cookie is not None:
                sent["Cookie"] = f"logstore_console={self.cookie}"
            conn.request(method, path, body=body, headers=sent)
            response = conn.getresponse()
            answer = Answer(response.status, response.headers, response.read())
        finally:
            conn.close()
        for header in answer.headers.get_all("Set-Cookie") or []:
            self.set_cookie_headers.append(header)
            found = re.match(r"logstore_console=([^;]*)", header)
            if found:
                self.cookie = found.group(1) or None
        token = answer.csrf()
        if token is not None:
            self.csrf = token
        return answer

    def get(self, path: str, **query: Any) -> Answer:
        if query:
            path += ("&" if "?" in path else "?") + urlencode(query)
        return self.request("GET", path)

    def post(self, path: str, fields: dict[str, Any] | None = None, *, csrf: bool = True) -> Answer:
        """A form post, with this session's CSRF token unless ``csrf`` is False (or already given)."""
        form = dict(fields or {})
        if csrf and "csrf_token" not in form:
            if self.csrf is None:
                self.get("/login" if self.cookie is None else "/topics")
            form["csrf_token"] = self.csrf
        body = urlencode(form).encode()
        return self.request("POST", path, body, {"Content-Type": "application/x-www-form-urlencoded"})

    def post_file(self, path: str, fields: dict[str, str], name: str, filename: str, content: bytes) -> Answer:
        """A multipart form post with one file (and this session's CSRF token), as a file input sends it."""
        boundary = "----logstore-console-test-boundary"
        form = {"csrf_token": self.csrf or "", **fields}
        parts = [f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
                 for k, v in form.items()]  # fmt: skip
        parts.append(f'--{boundary}\r\nContent-Disposition: form-data; name="{name}"; filename="{filename}"\r\n'
                     "Content-Type: application/x-ndjson\r\n\r\n".encode() + content + b"\r\n")  # fmt: skip
        body = b"".join(parts) + f"--{boundary}--\r\n".encode()
        return self.request("POST", path, body, {"Content-Type": f"multipart/form-data; boundary={boundary}"})


def wait_for(predicate: Any, what: str, timeout: float = 30.0, step: float = 0.2) -> Any:
    """Poll ``predicate`` until it returns something true (returned), at most ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(step)


__all__ = ["Answer", "ConsoleServer", "Visitor", "wait_for"]
