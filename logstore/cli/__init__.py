"""The ``logstore`` command: the top group, with every command group registered.

One module per command group: :mod:`.broker`, :mod:`.cluster`, :mod:`.topics`,
:mod:`.console` (produce, consume), :mod:`.groups`, :mod:`.acls`, :mod:`.users`,
:mod:`.quotas`, :mod:`.schemas`, :mod:`.perf`, :mod:`.reassign` (reassign-partitions),
:mod:`.web_console` (console: the web console); what several
share is in the leaves :mod:`._clients`, :mod:`._options` and :mod:`._tables`.
None of them imports this module. The CLI is the top layer: it imports the
rest of logstore, and nothing in logstore imports it.
"""

from __future__ import annotations

import click

from logstore.cli.acls import acls
from logstore.cli.broker import broker
from logstore.cli.cluster import cluster
from logstore.cli.console import consume, produce
from logstore.cli.groups import groups
from logstore.cli.log_dirs import log_dirs
from logstore.cli.perf import perf
from logstore.cli.quotas import quotas
from logstore.cli.reassign import reassign_partitions
from logstore.cli.schemas import schemas
from logstore.cli.topics import topics
from logstore.cli.users import users
from logstore.cli.web_console import console

__all__ = ["main"]


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """logstore: a Kafka-compatible commit log in Python with a C core."""


for _command in (
    broker, cluster, topics, produce, consume, groups, acls, users, quotas, schemas, log_dirs, perf,
    reassign_partitions, console,
):
    main.add_command(_command)
