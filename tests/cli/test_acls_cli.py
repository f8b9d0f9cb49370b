"""``logstore acls add/list/remove`` as subprocesses, with either client, against brokers with and
without an authorizer; the ACLs added take effect (a producer is refused, then served)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
from confluent_kafka import Producer

pytestmark = pytest.mark.integration

AUTHORIZER = {"authorizer.class.name": "logstore"}
CLIENTS = ["logstore", "confluent"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore", "acls", *args], capture_output=True, text=True, timeout=90
    )


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stderr
    return result.stdout


def produce_error(bootstrap: str, topic: str) -> int | None:
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 5000})
    producer.produce(topic, b"v", on_delivery=lambda err, msg: errors.append(err))
    producer.flush(10)
    return None if errors[0] is None else int(errors[0].code())


@pytest.mark.parametrize("client", CLIENTS)
def test_add_list_remove(broker_factory: Any, client: str) -> None:
    # ANONYMOUS is a super user here: it may manage ACLs; the ACLs are about User:alice.
    broker = broker_factory({**AUTHORIZER, "super.users": "User:ANONYMOUS"})

    def run(command: str, *args: str) -> subprocess.CompletedProcess[str]:
        return cli("--client", client, command, "--bootstrap-server", broker.bootstrap, *args)

    out = ok(run("add", "--allow-principal", "User:alice", "--operation", "Read",
                 "--operation", "describe-configs", "--topic", "orders", "--group", "g"))  # fmt: skip
    assert "Adding ACLs:" in out and "operation=READ" in out and "operation=DESCRIBE_CONFIGS" in out
    ok(run("add", "--deny-principal", "User:bob", "--operation", "All", "--topic", "ord",
           "--resource-pattern-type", "prefixed", "--host", "10.0.0.9"))  # fmt: skip
    listed = ok(run("list"))
    assert "ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)" in listed
    assert "(principal=User:bob, host=10.0.0.9, operation=ALL, permissionType=DENY)" in listed
    assert "resourceType=GROUP, name=g" in listed
    # MATCH lists the patterns that apply to a topic name: the literal and the prefix.
    matched = ok(run("list", "--topic", "orders", "--resource-pattern-type", "match"))
    assert "name=orders, patternType=LITERAL" in matched and "name=ord, patternType=PREFIXED" in matched
    assert "User:alice" not in ok(run("list", "--principal", "User:bob"))
    removed = ok(run("remove", "--topic", "orders", "--operation", "Read"))
    assert removed.startswith("Removed 1 ACL(s):")
    assert "operation=READ" not in ok(run("list", "--topic", "orders"))
    ok(run("remove", "--topic", "ord", "--resource-pattern-type", "prefixed"))
    ok(run("remove", "--topic", "orders", "--group", "g"))
    assert ok(run("list")).strip() == ""


def test_acls_take_effect_and_errors(broker_factory: Any) -> None:
    broker = broker_factory({**AUTHORIZER, "allow.everyone.if.no.acl.found": "true"})
    common = ("--bootstrap-server", broker.bootstrap)
    # No ACL anywhere: allow.everyone.if.no.acl.found lets everything through, ACL admin too.
    assert produce_error(broker.bootstrap, "cli-t") is None
    ok(cli("add", *common, "--allow-principal", "User:ANONYMOUS", "--operation", "Alter", "--cluster"))
    ok(
        cli(
            "add",
            *common,
            "--allow-principal",
            "User:someone-else",
            "--operation",
            "Write",
            "--topic",
            "cli-t",
        )
    )
    assert produce_error(broker.bootstrap, "cli-t") == 29  # the topic has ACLs now, none for ANONYMOUS
    ok(cli("add", *common, "--allow-principal", "User:*", "--operation", "Write", "--topic", "cli-t"))
    assert produce_error(broker.bootstrap, "cli-t") is None
    bad = cli("add", *common, "--allow-principal", "User:a", "--operation", "Fly", "--topic", "t")
    assert bad.returncode != 0 and "unknown operation 'Fly'" in bad.stderr
    bad = cli("add", *common, "--allow-principal", "alice", "--operation", "Read", "--topic", "t")
    assert bad.returncode != 0 and "principal" in bad.stderr.lower()
    bad = cli("add", *common, "--operation", "Read", "--topic", "t")
    assert bad.returncode != 0 and "--allow-principal" in bad.stderr


def test_broker_without_authorizer(broker: Any) -> None:
    failed = cli("list", "--bootstrap-server", broker.bootstrap)
    assert failed.returncode != 0 and "authorizer.class.name" in failed.stderr
