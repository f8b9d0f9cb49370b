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


@main.group()
def perf() -> None:
    """Load generators that print what Kafka's perf tools print.

    \b
    logstore perf produce   like kafka-producer-perf-test
    logstore perf consume   like kafka-consumer-perf-test

    Both use confluent-kafka (librdkafka; pip install confluent-kafka) and work
    against any Kafka-protocol broker. Client settings take librdkafka's names.
    """


@perf.command("produce")
@click.option("--topic", required=True, help="Topic to produce to (auto-created if the broker allows).")
@click.option("--num-records", type=click.IntRange(min=1), required=True, help="Number of records to send.")
@click.option(
    "--record-size",
    type=click.IntRange(min=0),
    required=True,
    help="Bytes per record value (random uppercase letters, no key).",
)
@click.option(
    "--throughput",
    type=float,
    default=-1,
    show_default=True,
    help="Cap on records/s; -1 (or any value <= 0) sends as fast as possible.",
)
@click.option(
    "--bootstrap-server", default="127.0.0.1:9092", show_default=True, help="HOST:PORT of a broker."
)
@click.option(
    "--producer-props",
    "producer_props",
    multiple=True,
    metavar="KEY=VALUE",
    help="A librdkafka producer setting (repeatable), e.g. acks=1 linger.ms=5 batch.size=1048576 "
    "compression.type=lz4. Defaults are librdkafka's (acks=all).",
)
@click.option(
    "--duration-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=600,
    show_default=True,
    help="Stop sending after this many seconds (then wait up to 30 s for outstanding acks).",
)
@click.argument("extra_props", nargs=-1, metavar="[KEY=VALUE]...")
def perf_produce(
    topic: str,
    num_records: int,
    record_size: int,
    throughput: float,
    bootstrap_server: str,
    producer_props: tuple[str, ...],
    duration_limit: float,
    extra_props: tuple[str, ...],
) -> None:
    """Produce records as fast as possible (or at --throughput) and report rate and latency.

    Every 5 s it prints "N records sent, X records/sec (Y MB/sec), A ms avg
    latency, M ms max latency." for that window, and at the end the same for
    the whole run followed by the 50th, 95th, 99th and 99.9th latency
    percentiles (ms). Latency runs from produce() to the broker's
    acknowledgement. Trailing KEY=VALUE arguments are producer settings too, so
    Kafka's spelling works:

    \b
      logstore perf produce --topic t --num-records 1000000 --record-size 100 \\
          --producer-props acks=1 linger.ms=5 batch.size=1048576

    Exits 1 if any record failed or went unacknowledged; errors say what to do.
    """
    from logstore.perf import parse_props, produce_perf

    try:
        props = parse_props((*producer_props, *extra_props), "--producer-props")
        result = produce_perf(
            topic, num_records, record_size, throughput, bootstrap_server, props, duration_limit
        )
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None
    if result.failed or result.unsent:
        raise SystemExit(1)


@perf.command("consume")
@click.option("--topic", required=True, help="Topic to read.")
@click.option("--messages", type=click.IntRange(min=1), required=True, help="Number of messages to read.")
@click.option(
    "--bootstrap-server", default="127.0.0.1:9092", show_default=True, help="HOST:PORT of a broker."
)
@click.option(
    "--group",
    default=None,
    help="Consumer group to subscribe with. Default: none, every partition is assigned from offset 0 "
    "(no group protocol needed on the broker).",
)
@click.option(
    "--timeout",
    "timeout_ms",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Give up after this many ms without a message.",
)
@click.option(
    "--consumer-props",
    "consumer_props",
    multiple=True,
    metavar="KEY=VALUE",
    help="A librdkafka consumer setting (repeatable), e.g. fetch.max.bytes=52428800.",
)
@click.option(
    "--duration-limit",
    type=click.FloatRange(min=0, min_open=True),
    default=600,
    show_default=True,
    help="Stop after this many seconds whatever was read.",
)
@click.option("--hide-header", is_flag=True, help="Print only the result row.")
@click.argument("extra_props", nargs=-1, metavar="[KEY=VALUE]...")
def perf_consume(
    topic: str,
    messages: int,
    bootstrap_server: str,
    group: str | None,
    timeout_ms: int,
    consumer_props: tuple[str, ...],
    duration_limit: float,
    hide_header: bool,
    extra_props: tuple[str, ...],
) -> None:
    """Read messages as fast as possible and report the rate.

    Prints kafka-consumer-perf-test's header and one row: start.time,
    end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec,
    rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec (MB =
    2**20 bytes of values and keys; end.time is the last message's arrival;
    rebalance.time.ms is the wait for the group's assignment, 0 without
    --group). Trailing KEY=VALUE arguments are consumer settings too; the
    defaults differ from librdkafka's in auto.offset.reset=earliest and
    fetch.queue.backoff.ms=1 (librdkafka otherwise stops fetching for 1 s
    whenever its prefetch queue is full, which throttles a fast reader).

    \b
      logstore perf consume --topic t --messages 1000000

    Exits 1 if fewer than --messages were read.
    """
    from logstore.perf import consume_perf, parse_props

    try:
        props = parse_props((*consumer_props, *extra_props), "--consumer-props")
        result = consume_perf(
            topic,
            messages,
            bootstrap_server,
            group,
            timeout_ms,
            props,
            duration_limit,
            header=not hide_header,
        )
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None
    if result.messages < messages:
        raise SystemExit(1)
