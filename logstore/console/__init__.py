"""``logstore console``: a web console for any Kafka-compatible cluster (docs/console.md).

An aiohttp application that renders HTML on the server (jinja2 templates in
``templates/``, our own CSS and a little vanilla JS in ``static/``, charts as
inline SVG) and speaks to the cluster with logstore's own client: one
:class:`~logstore.client.admin.AdminClient` (and producer) per logged-in user
when the cluster asks for SASL, one shared set otherwise.

One module per area: :mod:`.app` (settings, the application, its middlewares
and the server), :mod:`.auth` (sessions, login, CSRF), :mod:`.kafka` (the
clients and their errors as pages), :mod:`.overview`, :mod:`.topics`,
:mod:`.messages` (browse, search, produce, export), :mod:`.groups` (lag,
offset resets), :mod:`.acls` (view, add, remove),
:mod:`.quotas` (client quotas), :mod:`.traffic` (bytes in/out from ``/metrics``), :mod:`.charts` (SVG). It sits at the top of the layers: it
imports the client; nothing but the CLI imports it.
"""

from __future__ import annotations

from logstore.console.app import ConsoleSettings, make_app, serve, serve_in_thread

__all__ = ["ConsoleSettings", "make_app", "serve", "serve_in_thread"]
