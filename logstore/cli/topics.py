"""``logstore topics``: Kafka's ``kafka-topics`` (list, create, delete, describe, alter).

It takes the client library as an argument (``logstore.client`` by default, or
``confluent_kafka`` with ``--client confluent``: the two have one API, so the
code is the same) and prints what ``kafka-topics`` prints: ``describe`` in
Kafka's two-level layout (a topic line, then one line per partition); ``alter``
adds partitions and sets or deletes configs.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import Any

import click

from logstore.cli._clients import ConsoleError, admin_module, client_call, kafka_reason
from logstore.cli._options import (
    BOOTSTRAP_OPTION,
    CONSOLE_CLIENT_OPTION,
    TIMEOUT_OPTION,
    click_errors,
    client_library,
    command_config_option,
    props_option_value,
    with_options,
)


class Topics:
    """kafka-topics over an AdminClient of ``kafka``."""

    def __init__(
        self, kafka: ModuleType, bootstrap: str, timeout: float, props: dict[str, str] | None = None
    ) -> None:
        self.kafka = kafka
        self.api = admin_module(kafka)
        self.timeout = timeout
        self.admin = client_call("bad client configuration", lambda: self.api.AdminClient(
            {"bootstrap.servers": bootstrap, **(props or {})}))  # fmt: skip
        self.bootstrap = bootstrap

    def _metadata(self, topic: str | None = None) -> Any:
        return client_call(f"cannot reach a broker at {self.bootstrap}",
                           lambda: self.admin.list_topics(topic, timeout=self.timeout))  # fmt: skip

    def _wait(self, futures: dict[Any, Any], what: str, ignore: int | None = None) -> None:
        for key, future in futures.items():
            try:
                future.result(self.timeout)
            except Exception as e:
                error: Any = e.args[0] if e.args else None
                if ignore is not None and hasattr(error, "code") and error.code() == ignore:
                    continue
                raise ConsoleError(f"{what} {key}: {kafka_reason(e)}") from None

    def names(self, exclude_internal: bool = False) -> list[str]:
        names = sorted(self._metadata().topics)
        return [n for n in names if not (exclude_internal and n.startswith("__"))]

    def create(self, topic: str, partitions: int, replication: int, configs: dict[str, str],
               if_not_exists: bool) -> None:  # fmt: skip
        new = self.api.NewTopic(topic, num_partitions=partitions, replication_factor=replication,
                                        config=configs)  # fmt: skip
        ignore = self.kafka.KafkaError.TOPIC_ALREADY_EXISTS if if_not_exists else None
        self._wait(self.admin.create_topics([new], request_timeout=self.timeout), "creating topic", ignore)

    def delete(self, topic: str, if_exists: bool) -> None:
        ignore = self.kafka.KafkaError.UNKNOWN_TOPIC_OR_PART if if_exists else None
        self._wait(self.admin.delete_topics([topic], request_timeout=self.timeout), "deleting topic", ignore)

    def describe(self, topic: str | None) -> list[str]:
        metadata = self._metadata(topic)
        names = [topic] if topic is not None else sorted(metadata.topics)
        lines: list[str] = []
        for name in names:
            entry = metadata.topics.get(name)
            if entry is None or entry.error is not None:
                reason = (
                    entry.error.str() if entry is not None and entry.error is not None else "unknown topic"
                )
                raise ConsoleError(f"topic {name!r}: {reason}; list them with: logstore topics list")
            configs = self._configs(name)
            partitions = [entry.partitions[p] for p in sorted(entry.partitions)]
            replication = len(partitions[0].replicas) if partitions else 0
            shown = ",".join(f"{k}={v}" for k, v in sorted(configs.items()))
            lines.append(f"Topic: {name}\tPartitionCount: {len(partitions)}\t"
                         f"ReplicationFactor: {replication}\tConfigs: {shown}")  # fmt: skip
            for p in partitions:
                lines.append(
                    f"\tTopic: {name}\tPartition: {p.id}\tLeader: {p.leader}\t"
                    f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isrs))}"
                )
        return lines

    def _configs(self, topic: str) -> dict[str, str]:
        """The topic's configs set for it (not broker defaults), as kafka-topics shows them."""
        resource = self.api.ConfigResource(self.api.ResourceType.TOPIC, topic)
        futures = self.admin.describe_configs([resource])
        entries = client_call(
            f"describing configs of {topic}", lambda: next(iter(futures.values())).result(self.timeout)
        )
        dynamic = self.api.ConfigSource.DYNAMIC_TOPIC_CONFIG.value
        return {name: entry.value for name, entry in entries.items()
                if getattr(entry.source, "value", entry.source) == dynamic}  # fmt: skip

    def alter(self, topic: str, partitions: int | None, set_configs: dict[str, str],
              delete_configs: Sequence[str]) -> None:  # fmt: skip
        admin = self.api
        if partitions is not None:
            futures = self.admin.create_partitions([admin.NewPartitions(topic, partitions)],
                                                   request_timeout=self.timeout)  # fmt: skip
            self._wait(futures, "adding partitions to")
        if set_configs or delete_configs:
            entries = [admin.ConfigEntry(k, v, incremental_operation=admin.AlterConfigOpType.SET)
                       for k, v in set_configs.items()]  # fmt: skip
            entries += [admin.ConfigEntry(k, None, incremental_operation=admin.AlterConfigOpType.DELETE)
                        for k in delete_configs]  # fmt: skip
            resource = admin.ConfigResource(admin.ResourceType.TOPIC, topic, incremental_configs=entries)
            self._wait(self.admin.incremental_alter_configs([resource]), "altering configs of")


@click.group()
def topics() -> None:
    """Topics, like kafka-topics.

    \b
    logstore topics list                              the topic names
    logstore topics create --topic T --partitions 3   a topic (--config KEY=VALUE, repeatable)
    logstore topics describe [--topic T]              partitions, leaders, replicas, configs
    logstore topics alter --topic T --partitions 6    more partitions; --config / --delete-config
    logstore topics delete --topic T                  a topic and its data
    """


def _topics(client_name: str, bootstrap_server: str, timeout: float, command_config: tuple[str, ...]) -> Topics:
    kafka = client_library(client_name, "logstore topics")
    props = props_option_value(command_config, "--command-config")
    with click_errors():
        topics_admin = Topics(kafka, bootstrap_server, timeout, props)
    return topics_admin


_COMMON_OPTIONS = with_options(
    BOOTSTRAP_OPTION,
    TIMEOUT_OPTION,
    CONSOLE_CLIENT_OPTION,
    command_config_option("A client config key (repeatable)."),
)


def _topics_command(name: str) -> Any:
    def decorate(fn: Any) -> Any:
        return topics.command(name)(_COMMON_OPTIONS(fn))

    return decorate


@_topics_command("list")
@click.option("--exclude-internal", is_flag=True, help="Leave out internal topics (__consumer_offsets, ...).")
def topics_list(bootstrap_server: str, timeout: float, client_name: str, command_config: tuple[str, ...],
                exclude_internal: bool) -> None:  # fmt: skip
    """Print the topic names, one per line."""
    admin = _topics(client_name, bootstrap_server, timeout, command_config)
    with click_errors():
        names = admin.names(exclude_internal)
    for name in names:
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
    values = props_option_value(configs, "--config")
    with click_errors():
        admin.create(topic, partitions or -1, replication_factor or -1, values, if_not_exists)
    click.echo(f"Created topic {topic}.")


@_topics_command("delete")
@click.option("--topic", required=True, help="The topic to delete.")
@click.option("--if-exists", is_flag=True, help="No error when the topic does not exist.")
def topics_delete(bootstrap_server: str, timeout: float, client_name: str, command_config: tuple[str, ...],
                  topic: str, if_exists: bool) -> None:  # fmt: skip
    """Delete a topic and its data."""
    admin = _topics(client_name, bootstrap_server, timeout, command_config)
    with click_errors():
        admin.delete(topic, if_exists)
    click.echo(f"Deleted topic {topic}.")


@_topics_command("describe")
@click.option("--topic", default=None, help="One topic (default: every topic).")
def topics_describe(bootstrap_server: str, timeout: float, client_name: str, command_config: tuple[str, ...],
                    topic: str | None) -> None:  # fmt: skip
    """Print each topic's partitions, leaders, replicas, ISR and configs, as kafka-topics --describe."""
    admin = _topics(client_name, bootstrap_server, timeout, command_config)
    with click_errors():
        lines = admin.describe(topic)
    for line in lines:
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
    values = props_option_value(configs, "--config")
    with click_errors():
        admin.alter(topic, partitions, values, delete_configs)
    click.echo(f"Altered topic {topic}.")

