"""The ``logstore`` command: broker, topics, produce, consume, groups, acls, perf."""

from __future__ import annotations

from types import ModuleType
from typing import Any

import click

from logstore.errors import LogstoreError

_BOOTSTRAP_OPTION = click.option(
    "--bootstrap-server", default="127.0.0.1:9092", show_default=True, help="HOST:PORT of a broker."
)


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
    (docs/metrics.md).
    """
    from logstore.broker.config import BrokerConfig
    from logstore.broker.run import run

    extra = {"listeners": listeners} if listeners else {}
    try:
        config = BrokerConfig.load(config_file, overrides, extra)
        if config.zookeeper_connect:
            from logstore.cluster.zk_broker import join

            run(config, data_dir, event_loop, join)
        else:
            run(config, data_dir, event_loop)
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None


@main.group()
def cluster() -> None:
    """A cluster of brokers on this machine, joined through ZooKeeper (docs/cluster.md)."""


@cluster.command("up")
@click.option(
    "-n",
    "--brokers",
    type=click.IntRange(min=1, max=99),
    default=3,
    show_default=True,
    help="How many brokers (ids 1..N).",
)
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default="./cluster",
    show_default=True,
    help="Where ZooKeeper's and each broker's data and logs live (kept between runs).",
)
@click.option(
    "--base-port",
    type=click.IntRange(min=1, max=65_000),
    default=9092,
    show_default=True,
    help="Broker i listens on 127.0.0.1:(base-port + i - 1).",
)
@click.option(
    "--zookeeper-port",
    type=click.IntRange(min=1, max=65_535),
    default=2181,
    show_default=True,
    help="ZooKeeper's port on 127.0.0.1.",
)
@click.option("--racks", help="broker.rack of each broker, comma-separated (e.g. r1,r2,r1).")
def cluster_up(directory: str, brokers: int, base_port: int, zookeeper_port: int, racks: str | None) -> None:
    """Start ZooKeeper and N brokers on 127.0.0.1, print the bootstrap list, stop all on Ctrl-C.

    Needs Debian's zookeeper package and Java 17 (`make test` installs both).
    """
    from logstore.cluster.local import LocalCluster, run_until_stopped

    local = LocalCluster(directory, brokers, base_port, zookeeper_port,
                         racks.split(",") if racks else None)  # fmt: skip
    try:
        code = run_until_stopped(local, lambda line: click.echo(line))
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None
    raise SystemExit(code)


def _select(client_name: str) -> None:
    from logstore._clients import select_client

    select_client(client_name)


@main.group()
@click.option("--client", "client_name", type=click.Choice(["logstore", "confluent"]), default="logstore",
              show_default=True, help="The client library that drives the broker.")  # fmt: skip
def perf(client_name: str) -> None:
    """Load generators that print what Kafka's perf tools print.

    \b
    logstore perf produce   like kafka-producer-perf-test
    logstore perf consume   like kafka-consumer-perf-test

    Both drive the broker with logstore's client or confluent-kafka (--client) and
    work against any Kafka-protocol broker. Client settings take Kafka's names.
    """
    _select(client_name)


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
@_BOOTSTRAP_OPTION
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
@_BOOTSTRAP_OPTION
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


_TIMEOUT_OPTION = click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=15,
    show_default=True,
    help="Seconds to wait for each answer from the broker.",
)


@main.group()
@click.option("--client", "client_name", type=click.Choice(["logstore", "confluent"]), default="logstore",
              show_default=True, help="The client library that talks to the broker.")  # fmt: skip
def groups(client_name: str) -> None:
    """Consumer groups, like kafka-consumer-groups.

    \b
    logstore groups list            the groups (and their states with --state)
    logstore groups describe        committed offsets, log-end offsets, lag and members
    logstore groups reset-offsets   move a stopped group's committed offsets
    logstore groups delete          delete groups that have no active members

    They use an AdminClient, logstore's or confluent-kafka's (--client), and
    work against any Kafka-protocol broker.
    """
    _select(client_name)


@groups.command("list")
@_BOOTSTRAP_OPTION
@_TIMEOUT_OPTION
@click.option(
    "--state",
    "states",
    multiple=True,
    metavar="STATE",
    help="Only groups in this state (repeatable): Stable, Empty, PreparingRebalance, "
    "CompletingRebalance, Dead. With it, each group's state is printed too.",
)
def groups_list(bootstrap_server: str, timeout: float, states: tuple[str, ...]) -> None:
    """Print the group ids, one per line (GROUP and STATE columns with --state)."""
    from logstore.groups_admin import Groups, format_table

    try:
        found = Groups(bootstrap_server, timeout).list_groups(states)
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None
    if states:
        for line in format_table(["GROUP", "STATE"], found):
            click.echo(line)
    else:
        for group, _ in found:
            click.echo(group)


@groups.command("describe")
@_BOOTSTRAP_OPTION
@_TIMEOUT_OPTION
@click.option(
    "--group", "group_ids", multiple=True, metavar="GROUP", help="A group to describe (repeatable)."
)
@click.option("--all-groups", is_flag=True, help="Describe every group.")
def groups_describe(
    bootstrap_server: str, timeout: float, group_ids: tuple[str, ...], all_groups: bool
) -> None:
    """Per partition: committed offset, log-end offset, lag and the member that has it.

    Prints kafka-consumer-groups' columns: GROUP TOPIC PARTITION
    CURRENT-OFFSET LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID. A partition
    with no committed offset shows "-" as CURRENT-OFFSET and LAG; one that no
    member has shows "-" as CONSUMER-ID, HOST and CLIENT-ID; a member with no
    partitions gets a row of its own. Exits 1 if a group does not exist.

    \b
      logstore groups describe --group my-group
    """
    from logstore.groups_admin import DESCRIBE_HEADER, Groups, format_table

    if not group_ids and not all_groups:
        raise click.UsageError("name a group with --group GROUP, or use --all-groups")
    missing = []
    try:
        client = Groups(bootstrap_server, timeout)
        names = [g for g, _ in client.list_groups()] if all_groups else list(group_ids)
        for name in names:
            info = client.describe(name)
            if not info.exists:
                missing.append(name)
                click.echo(f"Error: Consumer group '{name}' does not exist.", err=True)
                continue
            click.echo()
            if info.state in ("Empty", "Dead"):
                click.echo(f"Consumer group '{name}' has no active members.")
            elif info.state in ("PreparingRebalance", "CompletingRebalance"):
                click.echo(f"Warning: Consumer group '{name}' is rebalancing.")
            click.echo()
            for line in format_table(DESCRIBE_HEADER, [row.cells() for row in info.rows]):
                click.echo(line)
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None
    if missing:
        raise click.ClickException(
            f"no such group: {', '.join(missing)}; logstore groups list --bootstrap-server "
            f"{bootstrap_server} shows the groups"
        )


@groups.command("reset-offsets")
@_BOOTSTRAP_OPTION
@_TIMEOUT_OPTION
@click.option("--group", required=True, help="The group whose committed offsets to move.")
@click.option(
    "--topic",
    "topics",
    multiple=True,
    metavar="TOPIC[:P,...]",
    help="A topic, or some of its partitions as topic:0,1 (repeatable).",
)
@click.option("--all-topics", is_flag=True, help="Every topic the group has committed offsets for.")
@click.option("--to-earliest", is_flag=True, help="Reset to each partition's log start.")
@click.option("--to-latest", is_flag=True, help="Reset to each partition's log end.")
@click.option("--to-offset", type=int, default=None, metavar="N", help="Reset to offset N (kept in range).")
@click.option(
    "--to-datetime",
    default=None,
    metavar="ISO",
    help="Reset to the first record at or after this time, e.g. 2024-05-01T12:00:00.000 (local) or "
    "2024-05-01T12:00:00Z; the log end where there is none.",
)
@click.option("--execute", is_flag=True, help="Commit the new offsets (without it: a dry run).")
def groups_reset_offsets(
    bootstrap_server: str,
    timeout: float,
    group: str,
    topics: tuple[str, ...],
    all_topics: bool,
    to_earliest: bool,
    to_latest: bool,
    to_offset: int | None,
    to_datetime: str | None,
    execute: bool,
) -> None:
    """Move a group's committed offsets; a dry run unless --execute.

    The group must have no active members (stop its consumers first). Prints
    GROUP TOPIC PARTITION NEW-OFFSET for every partition in scope. Give the
    scope (--topic ... or --all-topics) and exactly one of --to-earliest,
    --to-latest, --to-offset N, --to-datetime ISO.

    \b
      logstore groups reset-offsets --group g --topic events --to-earliest            # show the plan
      logstore groups reset-offsets --group g --topic events --to-earliest --execute  # apply it
    """
    from logstore.groups_admin import RESET_HEADER, Groups, format_table, parse_datetime, parse_topic_spec

    chosen = [
        name
        for name, given in (
            ("--to-earliest", to_earliest),
            ("--to-latest", to_latest),
            ("--to-offset", to_offset is not None),
            ("--to-datetime", to_datetime is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        raise click.UsageError(
            "give exactly one of --to-earliest, --to-latest, --to-offset N, --to-datetime ISO"
            + (f" (got {' '.join(chosen)})" if chosen else "")
        )
    if bool(topics) == all_topics:
        raise click.UsageError("give the topics to reset with --topic TOPIC (repeatable), or --all-topics")
    try:
        specs = [parse_topic_spec(spec) for spec in topics]
        value: int | None = None
        if to_earliest:
            to = "earliest"
        elif to_latest:
            to = "latest"
        elif to_offset is not None:
            to, value = "offset", to_offset
        else:
            assert to_datetime is not None
            to, value = "datetime", parse_datetime(to_datetime)
        client = Groups(bootstrap_server, timeout)
        plan = client.plan_reset(group, specs, all_topics, to, value)
        if execute:
            client.execute_reset(group, plan)
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None
    if not execute:
        click.echo("Dry run: nothing was changed; add --execute to commit these offsets.", err=True)
    click.echo()
    for line in format_table(RESET_HEADER, [(group, t, p, offset) for t, p, offset in plan]):
        click.echo(line)


@groups.command("delete")
@_BOOTSTRAP_OPTION
@_TIMEOUT_OPTION
@click.option(
    "--group", "group_ids", multiple=True, required=True, metavar="GROUP", help="A group (repeatable)."
)
def groups_delete(bootstrap_server: str, timeout: float, group_ids: tuple[str, ...]) -> None:
    """Delete groups with their committed offsets; only groups with no active members.

    Exits 1 if any group could not be deleted, saying why.
    """
    from logstore.groups_admin import Groups

    try:
        outcome = Groups(bootstrap_server, timeout).delete(group_ids)
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None
    deleted = [g for g, reason in outcome.items() if reason is None]
    failed = {g: reason for g, reason in outcome.items() if reason is not None}
    if deleted:
        names = ", ".join(f"'{g}'" for g in deleted)
        click.echo(f"Deletion of requested consumer groups ({names}) was successful.")
    if failed:
        lines = "\n".join(
            f"* Group '{g}' could not be deleted due to: {reason}" for g, reason in failed.items()
        )
        raise click.ClickException(f"Deletion of some consumer groups failed:\n{lines}")


# --------------------------------------------------------------------------- console tools

_CLIENT_OPTION = click.option(
    "--client",
    "client_name",
    type=click.Choice(["logstore", "confluent"]),
    default="logstore",
    show_default=True,
    help="The client library: logstore's own, or confluent-kafka (pip install 'logstore[clients]').",
)


def _kafka(client_name: str, tool: str) -> ModuleType:
    from logstore._clients import kafka_module
    from logstore.console import ConsoleError

    try:
        return kafka_module(client_name, tool, ConsoleError)
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None


def _props(items: tuple[str, ...], option: str) -> dict[str, str]:
    from logstore.console import parse_props

    try:
        return parse_props(items, option)
    except LogstoreError as e:
        raise click.BadParameter(str(e)) from None


@main.group()
def topics() -> None:
    """Topics, like kafka-topics.

    \b
    logstore topics list                              the topic names
    logstore topics create --topic T --partitions 3   a topic (--config KEY=VALUE, repeatable)
    logstore topics describe [--topic T]              partitions, leaders, replicas, configs
    logstore topics alter --topic T --partitions 6    more partitions; --config / --delete-config
    logstore topics delete --topic T                  a topic and its data
    """


def _topics(client_name: str, bootstrap_server: str, timeout: float, command_config: tuple[str, ...]) -> Any:
    from logstore.console import Topics

    try:
        return Topics(_kafka(client_name, "logstore topics"), bootstrap_server, timeout,
                      _props(command_config, "--command-config"))  # fmt: skip
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None


_COMMAND_CONFIG = click.option(
    "--command-config", multiple=True, metavar="KEY=VALUE", help="A client config key (repeatable)."
)


def _topics_command(name: str) -> Any:
    def decorate(fn: Any) -> Any:
        for option in (_COMMAND_CONFIG, _CLIENT_OPTION, _TIMEOUT_OPTION, _BOOTSTRAP_OPTION):
            fn = option(fn)
        return topics.command(name)(fn)

    return decorate


def _run(fn: Any) -> Any:
    try:
        return fn()
    except LogstoreError as e:
        raise click.ClickException(str(e)) from None


@_topics_command("list")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (__consumer_offsets, ...).")
def topics_list(bootstrap_server: str, timeout: float, client_name: str, command_config: tuple[str, ...],
                exclude_internal: bool) -> None:  # fmt: skip
    """Print the topic names, one per line."""
    admin = _topics(client_name, bootstrap_server, timeout, command_config)
    for name in _run(lambda: admin.names(exclude_internal)):
        click.echo(name)


@_topics_command("create")
@click.option("--topic", required=True, help="The topic to create.")
@click.option(
    "--partitions",
    type=click.IntRange(min=1),
    default=None,
    help="Partition count (default: the broker's num.partitions).",
)
@click.option(
    "--replication-factor",
    type=click.IntRange(min=1),
    default=None,
    help="Replicas per partition (default: the broker's).",
)
@click.option("--config", "configs", multiple=True, metavar="KEY=VALUE", help="A topic config (repeatable).")
@click.option("--if-not-exists", is_flag=True, help="No error when the topic exists.")
def topics_create(bootstrap_server: str, timeout: float, client_name: str, command_config: tuple[str, ...],
                  topic: str, partitions: int | None, replication_factor: int | None, configs: tuple[str, ...],
                  if_not_exists: bool) -> None:  # fmt: skip
    """Create a topic."""
    admin = _topics(client_name, bootstrap_server, timeout, command_config)
    values = _props(configs, "--config")
    _run(lambda: admin.create(topic, partitions or -1, replication_factor or -1, values, if_not_exists))
    click.echo(f"Created topic {topic}.")


@_topics_command("delete")
@click.option("--topic", required=True, help="The topic to delete.")
@click.option("--if-exists", is_flag=True, help="No error when the topic does not exist.")
def topics_delete(bootstrap_server: str, timeout: float, client_name: str, command_config: tuple[str, ...],
                  topic: str, if_exists: bool) -> None:  # fmt: skip
    """Delete a topic and its data."""
    admin = _topics(client_name, bootstrap_server, timeout, command_config)
    _run(lambda: admin.delete(topic, if_exists))
    click.echo(f"Deleted topic {topic}.")


@_topics_command("describe")
@click.option("--topic", default=None, help="One topic (default: every topic).")
def topics_describe(bootstrap_server: str, timeout: float, client_name: str, command_config: tuple[str, ...],
                    topic: str | None) -> None:  # fmt: skip
    """Print each topic's partitions, leaders, replicas, ISR and configs, as kafka-topics --describe."""
    admin = _topics(client_name, bootstrap_server, timeout, command_config)
    for line in _run(lambda: admin.describe(topic)):
        click.echo(line)


@_topics_command("alter")
@click.option("--topic", required=True, help="The topic to change.")
@click.option(
    "--partitions", type=click.IntRange(min=1), default=None, help="The new, larger partition count."
)
@click.option(
    "--config", "configs", multiple=True, metavar="KEY=VALUE", help="Set a topic config (repeatable)."
)
@click.option(
    "--delete-config",
    "delete_configs",
    multiple=True,
    metavar="KEY",
    help="Back to the default (repeatable).",
)
def topics_alter(bootstrap_server: str, timeout: float, client_name: str, command_config: tuple[str, ...],
                 topic: str, partitions: int | None, configs: tuple[str, ...],
                 delete_configs: tuple[str, ...]) -> None:  # fmt: skip
    """Add partitions to a topic, or change its configs."""
    if partitions is None and not configs and not delete_configs:
        raise click.UsageError(
            "say what to change: --partitions N, --config KEY=VALUE or --delete-config KEY"
        )
    admin = _topics(client_name, bootstrap_server, timeout, command_config)
    _run(lambda: admin.alter(topic, partitions, _props(configs, "--config"), delete_configs))
    click.echo(f"Altered topic {topic}.")


@main.command()
@click.option("--topic", required=True, help="The topic to write to.")
@_BOOTSTRAP_OPTION
@_CLIENT_OPTION
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="parse.key=true splits each line at key.separator (default a tab) into key and value.")  # fmt: skip
@click.option("--producer-property", "producer_properties", multiple=True, metavar="KEY=VALUE",
              help="A producer config key (repeatable), e.g. acks=all, linger.ms=5, compression.type=lz4.")  # fmt: skip
@click.option("--timeout", type=click.FloatRange(min=0, min_open=True), default=60, show_default=True,
              help="Seconds to wait at the end for every record to be acknowledged.")  # fmt: skip
def produce(topic: str, bootstrap_server: str, client_name: str, properties: tuple[str, ...],
            producer_properties: tuple[str, ...], timeout: float) -> None:  # fmt: skip
    """Send each line of stdin as a record, like kafka-console-producer.

    \b
    printf 'a\\nb\\n' | logstore produce --topic events
    printf 'k1:v1\\n' | logstore produce --topic events --property parse.key=true --property key.separator=:
    """
    from logstore.console import produce_lines, stdin_binary

    kafka = _kafka(client_name, "logstore produce")
    config = {"bootstrap.servers": bootstrap_server, **_props(producer_properties, "--producer-property")}
    delivered, failed = _run(lambda: produce_lines(kafka, config, topic, stdin_binary(),
                                                   _props(properties, "--property"), timeout=timeout,
                                                   err=lambda line: click.echo(line, err=True)))  # fmt: skip
    if failed:
        raise click.ClickException(f"{failed} records failed ({delivered} delivered)")


@main.command()
@click.option("--topic", required=True, help="The topic to read.")
@_BOOTSTRAP_OPTION
@_CLIENT_OPTION
@click.option(
    "--group", default=None, help="Read as a member of this group, from its committed offsets (committing)."
)
@click.option(
    "--from-beginning",
    is_flag=True,
    help="Without a committed offset, start at the log start (else at the end).",
)
@click.option(
    "--partition", type=click.IntRange(min=0), default=None, help="Only this partition (without --group)."
)
@click.option(
    "--max-messages", type=click.IntRange(min=1), default=None, help="Stop after this many records."
)
@click.option(
    "--timeout-ms", type=click.IntRange(min=1), default=None, help="Stop after this long with no new record."
)
@click.option("--property", "properties", multiple=True, metavar="KEY=VALUE",
              help="print.key, print.offset, print.partition, print.timestamp, print.headers (=true), "
                   "key.separator, line.separator: Kafka's DefaultMessageFormatter.")  # fmt: skip
@click.option("--format", "template", default=None,
              help="A template instead: {topic} {partition} {offset} {timestamp} {key} {value} {headers}.")  # fmt: skip
@click.option("--consumer-property", "consumer_properties", multiple=True, metavar="KEY=VALUE",
              help="A consumer config key (repeatable).")  # fmt: skip
@click.option("--connect-timeout", type=click.FloatRange(min=0, min_open=True), default=15, show_default=True,
              help="Seconds to wait for the broker at the start.")  # fmt: skip
def consume(topic: str, bootstrap_server: str, client_name: str, group: str | None, from_beginning: bool,
            partition: int | None, max_messages: int | None, timeout_ms: int | None,
            properties: tuple[str, ...], template: str | None, consumer_properties: tuple[str, ...],
            connect_timeout: float) -> None:  # fmt: skip
    """Print records to stdout, like kafka-console-consumer.

    \b
    logstore consume --topic events --from-beginning --max-messages 10
    logstore consume --topic events --group g --property print.key=true --property print.offset=true
    logstore consume --topic events --from-beginning --format '{partition}/{offset} {key}={value}'

    It stops at --max-messages, after --timeout-ms with nothing new, or on
    Ctrl-C, and prints "Processed a total of N messages" on stderr.
    """
    from logstore.console import Format, consume_records, stdout_binary

    if partition is not None and group is not None:
        raise click.UsageError("--partition reads without a group; drop --group or --partition")
    kafka = _kafka(client_name, "logstore consume")
    config = {"bootstrap.servers": bootstrap_server, **_props(consumer_properties, "--consumer-property")}
    fmt = Format.of(_props(properties, "--property"), template)
    count = 0
    try:
        count = _run(lambda: consume_records(
            kafka, config, topic, stdout_binary(), fmt, group=group, from_beginning=from_beginning,
            partition=partition, max_messages=max_messages, timeout_ms=timeout_ms,
            connect_timeout=connect_timeout))  # fmt: skip
    except KeyboardInterrupt:
        pass
    finally:
        click.echo(f"Processed a total of {count} messages", err=True)


@main.command("reassign-partitions")
@_BOOTSTRAP_OPTION
@_TIMEOUT_OPTION
@click.option("--reassignment-json-file", "plan_file", default=None, metavar="FILE",
              help='The plan: {"version":1,"partitions":[{"topic":"t","partition":0,"replicas":[1,2]}]}.')  # fmt: skip
@click.option("--execute", "action", flag_value="execute", help="Start the plan's reassignments.")
@click.option("--verify", "action", flag_value="verify", help="Say, per partition, whether the plan is done.")
@click.option("--cancel", "action", flag_value="cancel", help="Cancel the plan's reassignments in progress.")
@click.option("--list", "action", flag_value="list", help="Every reassignment in progress.")
@click.option("--generate", "action", flag_value="generate",
              help="Propose a plan moving whole topics onto --broker-list.")  # fmt: skip
@click.option("--topics-to-move-json-file", "topics_file", default=None, metavar="FILE",
              help='With --generate: {"version":1,"topics":[{"topic":"t"}]}.')  # fmt: skip
@click.option(
    "--broker-list", default=None, metavar="1,2,3", help="With --generate: the brokers to move onto."
)
@click.option("--disable-rack-aware", is_flag=True, help="With --generate: ignore broker.rack.")
@click.option(
    "--command-config", multiple=True, metavar="KEY=VALUE", help="An admin client config key (repeatable)."
)
def reassign_partitions(bootstrap_server: str, timeout: float, plan_file: str | None, action: str | None,
                        topics_file: str | None, broker_list: str | None, disable_rack_aware: bool,
                        command_config: tuple[str, ...]) -> None:  # fmt: skip
    """Move partitions' replicas between brokers, like kafka-reassign-partitions.

    \b
    logstore reassign-partitions --generate --topics-to-move-json-file topics.json --broker-list 2,3
    logstore reassign-partitions --reassignment-json-file plan.json --execute
    logstore reassign-partitions --reassignment-json-file plan.json --verify
    logstore reassign-partitions --reassignment-json-file plan.json --cancel
    logstore reassign-partitions --list

    --execute prints the current assignment first: keep it, it is the plan that
    rolls the move back. New replicas copy the partition from its leader; once
    they are in sync the old replicas are removed and delete their copies.
    --verify exits with 1 while any partition of the plan is not done.
    """
    from logstore import reassign
    from logstore.client.admin import AdminClient

    if action is None:
        raise click.UsageError("say what to do: --execute, --verify, --cancel, --list or --generate")
    if action in ("execute", "verify", "cancel") and plan_file is None:
        raise click.UsageError(f"--{action} needs --reassignment-json-file FILE")
    if action == "generate" and (topics_file is None or broker_list is None):
        raise click.UsageError("--generate needs --topics-to-move-json-file FILE and --broker-list 1,2,3")
    config = {"bootstrap.servers": bootstrap_server, **_props(command_config, "--command-config")}
    admin = AdminClient(config)
    try:
        if action == "list":
            lines = _run(lambda: reassign.list_ongoing(admin, timeout))
        elif action == "generate":
            assert topics_file is not None and broker_list is not None
            try:
                brokers = [int(b) for b in broker_list.split(",") if b.strip()]
            except ValueError:
                raise click.BadParameter(
                    f"{broker_list!r}: broker ids separated by commas", param_hint="--broker-list"
                ) from None
            lines = _run(
                lambda: reassign.generate(admin, topics_file, brokers, timeout, not disable_rack_aware)
            )
        else:
            assert plan_file is not None
            plan = _run(lambda: reassign.load_plan(plan_file))
            if action == "verify":
                lines, done = _run(lambda: reassign.verify(admin, plan, timeout))
                for line in lines:
                    click.echo(line)
                raise SystemExit(0 if done else 1)
            run = reassign.execute if action == "execute" else reassign.cancel
            lines = _run(lambda: run(admin, plan, timeout))
        for line in lines:
            click.echo(line)
    finally:
        admin.close()


# ACLs (logstore acls add/remove/list): the commands live in acls_cli.py.
from logstore.acls_cli import acls as _acls  # noqa: E402

main.add_command(_acls)
from logstore.users_admin import users  # noqa: E402 - `logstore users` (SCRAM credentials)

main.add_command(users)
from logstore.quotas_cli import quotas  # noqa: E402 - logstore quotas (client quotas, like kafka-configs)

main.add_command(quotas)
