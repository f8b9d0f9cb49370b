"""``logstore broker``: run a Kafka-protocol broker on a data directory."""

from __future__ import annotations

import click

from logstore.cli._options import click_errors
from logstore.cli.web_console import console_beside_broker


@click.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where the logs live: one directory, or several comma-separated (Kafka's log.dirs: "
    "partitions spread over them; the first also holds the broker's own files). Default: log.dirs, "
    "else ./data.",
)
@click.option(
    "--listeners",
    default=None,
    help="NAME://host:port[,...] to listen on, e.g. PLAINTEXT://127.0.0.1:9092,SSL://127.0.0.1:9093 "
    "(default PLAINTEXT://127.0.0.1:9092; protocols: listener.security.protocol.map, docs/security.md).",
)
@click.option(
    "--config",
    "config_file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="A server.properties file with Kafka's broker config names.",
)
@click.option(
    "--override",
    "overrides",
    multiple=True,
    metavar="KEY=VALUE",
    help="Set a broker config key (repeatable), e.g. --override num.partitions=3.",
)
@click.option(
    "--event-loop",
    type=click.Choice(["auto", "asyncio", "uvloop"]),
    default="auto",
    show_default=True,
    help="auto uses uvloop when installed.",
)
def broker(
    data_dir: str | None,
    listeners: str | None,
    config_file: str | None,
    overrides: tuple[str, ...],
    event_loop: str,
) -> None:
    """Run a Kafka-protocol broker on a data directory.

    It prints where it listens; SIGTERM or Ctrl-C shuts it down cleanly, and
    after a kill -9 the next start recovers the logs. Config keys are Kafka's
    (broker.id, advertised.listeners, num.partitions, auto.create.topics.enable,
    log.retention.ms, log.segment.bytes, message.max.bytes,
    socket.request.max.bytes, ...). With zookeeper.connect (host:port[/chroot]) it
    joins that cluster (broker.id unique per broker, broker.rack optional; see
    docs/cluster.md for what a cluster does today). With
    metrics.listener=http://host:port it serves Prometheus metrics at /metrics
    (docs/metrics.md); with console.listeners=http://host:port, the web console
    (docs/console.md).
    """
    # Deferred: the broker's modules take ~0.5 s to import, which `logstore --help` need not wait for.
    from logstore.broker.config.broker_config import BrokerConfig
    from logstore.broker.run import run

    extra = {"listeners": listeners} if listeners else {}
    with click_errors():
        config = BrokerConfig.load(config_file, overrides, extra)
    url = console_beside_broker(config)  # console.listeners: the web console in this process
    if url is not None:
        click.echo(f"logstore console listening on {url} (console.listeners)", err=True)
    with click_errors():
        if config.zookeeper_connect:
            from logstore.cluster.zk_broker import join  # deferred: a broker alone needs no ZooKeeper client

            run(config, data_dir, event_loop, join)
        else:
            run(config, data_dir, event_loop)
