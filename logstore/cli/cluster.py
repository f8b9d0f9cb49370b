"""``logstore cluster up``: ZooKeeper and N brokers on this machine (docs/cluster.md)."""

from __future__ import annotations

import click

from logstore.cli._options import click_errors


@click.group()
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
@click.option(
    "--registry-port",
    type=click.IntRange(min=0, max=65_000),
    default=8081,
    show_default=True,
    help="Broker i serves the schema registry on http://127.0.0.1:(registry-port + i - 1); 0: none.",
)
def cluster_up(
    directory: str, brokers: int, base_port: int, zookeeper_port: int, racks: str | None, registry_port: int
) -> None:
    """Start ZooKeeper and N brokers on 127.0.0.1, print the bootstrap list, stop all on Ctrl-C.

    Needs Debian's zookeeper package and Java 17 (`make test` installs both).
    """
    # deferred: the ZooKeeper and process code adds ~6 ms to every `logstore --help`
    from logstore.cluster.local import LocalCluster, run_until_stopped

    local = LocalCluster(directory, brokers, base_port, zookeeper_port,
                         racks.split(",") if racks else None, registry_port)  # fmt: skip
    with click_errors():
        code = run_until_stopped(local, lambda line: click.echo(line))
    raise SystemExit(code)
