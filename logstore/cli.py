"""The ``logstore`` command: ``logstore broker``, ``logstore perf ...``."""

from __future__ import annotations

import click

from logstore.errors import LogstoreError


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """logstore: a Kafka-compatible commit log in Python with a C core."""


@main.command()
@click.option(
    "--data-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where the logs live (default: log.dirs, else ./data).",
)
@click.option(
    "--listeners",
    default=None,
    help="PLAINTEXT://host:port[,...] to listen on (default PLAINTEXT://127.0.0.1:9092).",
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
    socket.request.max.bytes, ...).
    """
    from logstore.broker.config import BrokerConfig
    from logstore.broker.run import run

    extra = {"listeners": listeners} if listeners else {}
    try:
        config = BrokerConfig.load(config_file, overrides, extra)
        run(config, data_dir, event_loop)
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None
