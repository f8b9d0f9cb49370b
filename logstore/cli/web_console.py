"""``logstore console``: the web console (logstore/console; docs/console.md) in front of a cluster.

It speaks to the cluster at ``--bootstrap-server`` with logstore's own client
and serves its pages on ``--listen`` (a loopback address by default).
``--command-config`` takes the client settings the other tools take: with
``security.protocol=SASL_PLAINTEXT`` (and ``sasl.mechanism``) each person
logs in with their own user on the cluster and acts within its ACLs;
without SASL there is no login. ``--read-only`` hides and refuses every
change.
"""

from __future__ import annotations

from typing import Any

import click

from logstore.cli._options import BOOTSTRAP_OPTION, click_errors, command_config_option, props_option_value

SECRET_KEYS = ("sasl.username", "sasl.password", "sasl.jaas.config")


def parse_listen(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port); a usage error otherwise."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise click.BadParameter(f"--listen takes HOST:PORT (e.g. 127.0.0.1:8080), not {value!r}")
    return host, int(port)


@click.command()
@BOOTSTRAP_OPTION
@click.option("--listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
              help="Where the console serves its pages (port 0: any free port).")  # fmt: skip
@click.option("--read-only", is_flag=True, help="Show everything, change nothing (forms hidden, posts refused).")
@command_config_option(
    "A client config key (repeatable), e.g. security.protocol=SASL_PLAINTEXT and sasl.mechanism=SCRAM-SHA-512: "
    "with SASL each person logs in as their own user on the cluster."
)
@click.option("--metrics-url", "metrics_urls", multiple=True, metavar="URL",
              help="A broker's Prometheus endpoint (repeatable), e.g. http://127.0.0.1:9404/metrics: bytes in "
                   "and out on the overview.")  # fmt: skip
@click.option("--schema-registry-url", default=None, metavar="URL",
              help="A schema registry (e.g. http://127.0.0.1:8081): values in Confluent's wire format decode "
                   "through it (Avro, JSON Schema).")  # fmt: skip
@click.option("--title", default="logstore console", show_default=True, help="The name on every page.")
def console(bootstrap_server: str, listen: str, read_only: bool, command_config: tuple[str, ...],
            metrics_urls: tuple[str, ...], schema_registry_url: str | None, title: str) -> None:  # fmt: skip
    """A web console for a Kafka-compatible cluster: topics, messages, consumer groups.

    \b
    logstore console --bootstrap-server 127.0.0.1:9092 --listen 127.0.0.1:8080
    logstore console --bootstrap-server 127.0.0.1:9093 --command-config security.protocol=SASL_PLAINTEXT \\
        --command-config sasl.mechanism=SCRAM-SHA-512
    logstore console --read-only

    Pages: overview (brokers, controller, under-replicated and offline
    partitions), topics (create, configure, add partitions, delete),
    messages (browse, search by key, value or header, produce, export as
    JSON lines), consumer groups (lag, offset resets with a preview, delete).
    See docs/console.md.
    """
    host, port = parse_listen(listen)
    config = props_option_value(command_config, "--command-config")
    given = [key for key in SECRET_KEYS if key in config]
    if given and str(config.get("security.protocol", "")).upper().startswith("SASL"):
        raise click.BadParameter(
            f"{', '.join(given)}: with SASL each person logs in with their own user; drop these keys",
            param_hint="--command-config",
        )
    from logstore.console import (  # deferred: aiohttp and jinja2 load only for this command
        ConsoleSettings,
        serve,
    )

    for url in [*metrics_urls, *([schema_registry_url] if schema_registry_url else [])]:
        if not url.startswith(("http://", "https://")):
            raise click.BadParameter(f"{url!r} is not an http:// URL", param_hint="--metrics-url or --schema-registry-url")
    settings = ConsoleSettings(bootstrap_server, config, read_only=read_only, title=title,
                               metrics_urls=list(metrics_urls), schema_registry_url=schema_registry_url)  # fmt: skip
    with click_errors():
        serve(settings, host, port, ready=lambda url: click.echo(f"logstore console listening on {url}", nl=True))


def parse_console_listener(value: str) -> tuple[str, int]:
    """``console.listeners``: ``http://host:port`` (one; only http is served) as (host, port)."""
    text = value.strip()
    if not text.startswith("http://") or "," in text:
        raise click.ClickException(
            f"console.listeners: {value!r} is not http://host:port (e.g. http://127.0.0.1:8080; one "
            "listener, http only: put a TLS proxy in front to serve it further)"
        )
    try:
        return parse_listen(text.removeprefix("http://").rstrip("/"))
    except click.BadParameter:
        raise click.ClickException(f"console.listeners: {value!r} is not http://host:port") from None


def console_beside_broker(config: Any) -> str | None:
    """Start the console the broker config asks for (``console.listeners``) in this process, in front
    of the broker's first listener; its URL, or None when not asked. Called by ``logstore broker``."""
    value = str(config.values.get("console.listeners") or "")
    if not value.strip():
        return None
    host, port = parse_console_listener(value)
    name, broker_host, broker_port = config.listeners[0]
    if broker_port == 0:
        raise click.ClickException(
            "console.listeners needs the broker's first listener on a fixed port, not port 0"
        )
    protocol = config.listener_protocols().get(name, "PLAINTEXT")
    client: dict[str, Any] = {}
    if protocol in ("SSL", "SASL_SSL"):
        raise click.ClickException(
            f"console.listeners: the broker's first listener {name} is {protocol}, which logstore's client does "
            "not speak; list a PLAINTEXT or SASL_PLAINTEXT listener first, or run `logstore console` apart"
        )
    if protocol == "SASL_PLAINTEXT":
        mechanisms = [m.strip().upper() for m in str(config.values.get("sasl.enabled.mechanisms") or "").split(",")]
        usable = [m for m in mechanisms if m in ("SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN")]
        client = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": usable[0] if usable else "SCRAM-SHA-512"}
    from logstore.console import ConsoleSettings, serve_in_thread  # deferred, as in `logstore console`

    bootstrap = f"{'127.0.0.1' if broker_host in ('', '0.0.0.0') else broker_host}:{broker_port}"
    metrics = str(config.values.get("metrics.listener") or "").strip()
    urls = []
    if metrics.startswith("http://"):
        metrics_host, _, metrics_port = metrics.removeprefix("http://").rstrip("/").rpartition(":")
        urls = [f"http://{'127.0.0.1' if metrics_host in ('', '0.0.0.0') else metrics_host}:{metrics_port}/metrics"]
    registry = str(config.values.get("schema.registry.listeners") or "").split(",")[0].strip()
    registry_url = None
    if registry:
        scheme, _, address = registry.partition("://")
        registry_host, _, registry_port = address.rstrip("/").rpartition(":")
        registry_host = "127.0.0.1" if registry_host in ("", "0.0.0.0") else registry_host
        registry_url = f"{scheme}://{registry_host}:{registry_port}"
    with click_errors():
        return serve_in_thread(ConsoleSettings(bootstrap, client, metrics_urls=urls,
                                               schema_registry_url=registry_url), host, port)  # fmt: skip
