"""``logstore perf produce`` and ``logstore perf consume``: Kafka's perf tools, in Python.

They drive any Kafka-protocol broker (a ``logstore broker`` or Kafka itself)
with logstore's client or confluent-kafka (``--client``), imported only when a command runs, and
print what ``kafka-producer-perf-test`` (:mod:`.producer_perf`) and ``kafka-consumer-perf-test``
(:mod:`.consumer_perf`) print, so their output can be compared line for line.
"""

from __future__ import annotations

import click

from logstore.cli._clients import select_client
from logstore.cli._options import BOOTSTRAP_OPTION, click_errors, client_option, parse_props
from logstore.cli.perf.consumer_perf import consume_perf
from logstore.cli.perf.producer_perf import produce_perf


def _librdkafka_props(items: tuple[str, ...], option: str) -> dict[str, str]:
    """KEY=VALUE settings with their values stripped."""
    props = parse_props(items, option, " (a librdkafka config name)")
    return {key: value.strip() for key, value in props.items()}


@click.group()
@client_option("The client library that drives the broker.")
def perf(client_name: str) -> None:
    """Load generators that print what Kafka's perf tools print.

    \b
    logstore perf produce   like kafka-producer-perf-test
    logstore perf consume   like kafka-consumer-perf-test

    Both drive the broker with logstore's client or confluent-kafka (--client) and
    work against any Kafka-protocol broker. Client settings take Kafka's names.
    """
    select_client(client_name)


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
@BOOTSTRAP_OPTION
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
    with click_errors():
        props = _librdkafka_props((*producer_props, *extra_props), "--producer-props")
        result = produce_perf(
            topic, num_records, record_size, throughput, bootstrap_server, props, duration_limit
        )
    if result.failed or result.unsent:
        raise SystemExit(1)


@perf.command("consume")
@click.option("--topic", required=True, help="Topic to read.")
@click.option("--messages", type=click.IntRange(min=1), required=True, help="Number of messages to read.")
@BOOTSTRAP_OPTION
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
    with click_errors():
        props = _librdkafka_props((*consumer_props, *extra_props), "--consumer-props")
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
    if result.messages < messages:
        raise SystemExit(1)
