"""``logstore topics``, ``logstore produce`` and ``logstore consume`` as subprocesses, with either client."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.kit.brokerkit import BrokerProcess

pytestmark = pytest.mark.integration

TIMEOUT_S = 90
CLIENTS = ["logstore", "confluent"]


def cli(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "logstore", *args], input=stdin, capture_output=True, timeout=TIMEOUT_S
    )


def ok(result: subprocess.CompletedProcess[bytes]) -> str:
    assert result.returncode == 0, result.stderr.decode()
    return result.stdout.decode()


@pytest.mark.parametrize("client", CLIENTS)
def test_topics_lifecycle(broker: BrokerProcess, client: str) -> None:
    common = ("--bootstrap-server", broker.bootstrap, "--client", client)
    assert "Created topic" in ok(cli("topics", "create", *common, "--topic", "tc", "--partitions", "3",
                                     "--config", "retention.ms=123456"))  # fmt: skip
    failed = cli("topics", "create", *common, "--topic", "tc", "--partitions", "3")
    assert failed.returncode != 0 and b"already exists" in failed.stderr.lower().replace(b"_", b" ")
    ok(cli("topics", "create", *common, "--topic", "tc", "--if-not-exists"))
    assert "tc" in ok(cli("topics", "list", *common)).split()
    lines = ok(cli("topics", "describe", *common, "--topic", "tc")).splitlines()
    assert lines[0].startswith("Topic: tc\tPartitionCount: 3\tReplicationFactor: 1\t")
    assert "retention.ms=123456" in lines[0]
    assert [line.split("\t")[2] for line in lines[1:]] == ["Partition: 0", "Partition: 1", "Partition: 2"]
    ok(cli("topics", "alter", *common, "--topic", "tc", "--partitions", "5", "--config", "retention.ms=999"))
    lines = ok(cli("topics", "describe", *common, "--topic", "tc")).splitlines()
    assert "PartitionCount: 5" in lines[0] and "retention.ms=999" in lines[0]
    ok(cli("topics", "delete", *common, "--topic", "tc"))
    assert "tc" not in ok(cli("topics", "list", *common)).split()
    missing = cli("topics", "delete", *common, "--topic", "tc")
    assert missing.returncode != 0 and missing.stderr
    ok(cli("topics", "delete", *common, "--topic", "tc", "--if-exists"))


@pytest.mark.parametrize("client", CLIENTS)
def test_produce_then_consume_with_keys_and_formats(broker: BrokerProcess, client: str) -> None:
    common = ("--bootstrap-server", broker.bootstrap, "--client", client)
    ok(cli("topics", "create", *common, "--topic", "lines", "--partitions", "1"))
    lines = b"".join(b"k%d:value %d\n" % (i, i) for i in range(1000))
    ok(cli("produce", *common, "--topic", "lines", "--property", "parse.key=true",
           "--property", "key.separator=:", stdin=lines))  # fmt: skip
    plain = cli("consume", *common, "--topic", "lines", "--from-beginning", "--max-messages", "1000")
    assert ok(plain).splitlines() == [f"value {i}" for i in range(1000)]
    assert b"Processed a total of 1000 messages" in plain.stderr
    keyed = ok(cli("consume", *common, "--topic", "lines", "--from-beginning", "--max-messages", "2",
                   "--property", "print.key=true", "--property", "print.offset=true",
                   "--property", "print.partition=true"))  # fmt: skip
    assert keyed.splitlines() == ["Partition:0\tOffset:0\tk0\tvalue 0", "Partition:0\tOffset:1\tk1\tvalue 1"]
    templated = ok(cli("consume", *common, "--topic", "lines", "--from-beginning", "--max-messages", "1",
                       "--format", "{partition}/{offset} {key}={value} @{timestamp}"))  # fmt: skip
    head, stamp = templated.strip().split(" @")
    assert head == "0/0 k0=value 0" and int(stamp) > 1_600_000_000_000


@pytest.mark.parametrize("client", CLIENTS)
def test_consume_with_a_group_resumes_from_its_commits(broker: BrokerProcess, client: str) -> None:
    common = ("--bootstrap-server", broker.bootstrap, "--client", client)
    ok(cli("topics", "create", *common, "--topic", "g", "--partitions", "2"))
    ok(cli("produce", *common, "--topic", "g", stdin=b"".join(b"%d\n" % i for i in range(100))))
    first = ok(cli("consume", *common, "--topic", "g", "--group", "cg", "--from-beginning",
                   "--max-messages", "100"))  # fmt: skip
    assert sorted(int(v) for v in first.split()) == list(range(100))
    ok(cli("produce", *common, "--topic", "g", stdin=b"100\n101\n"))
    # --from-beginning only where nothing is committed: the new records may sit on a partition
    # the first run never read; the committed ones resume from their commits (nothing re-read).
    second = ok(cli("consume", *common, "--topic", "g", "--group", "cg", "--from-beginning",
                    "--timeout-ms", "8000"))  # fmt: skip
    assert sorted(int(v) for v in second.split()) == [100, 101]


@pytest.mark.parametrize("client", CLIENTS)
def test_console_errors_say_what_to_do(broker: BrokerProcess, client: str) -> None:
    common = ("--bootstrap-server", broker.bootstrap, "--client", client)
    missing = cli("consume", *common, "--topic", "nope", "--max-messages", "1", "--connect-timeout", "5")
    assert missing.returncode != 0 and b"logstore topics create" in missing.stderr
    bad = cli("produce", *common, "--topic", "x", "--producer-property", "lingr.ms=5", stdin=b"a\n")
    assert bad.returncode != 0 and b"lingr.ms" in bad.stderr
    unkeyed = cli("produce", *common, "--topic", "x", "--property", "parse.key=true", stdin=b"no separator\n")
    assert unkeyed.returncode != 0 and b"key separator" in unkeyed.stderr
    usage = cli("topics", "alter", *common, "--topic", "x")
    assert usage.returncode != 0 and b"--partitions" in usage.stderr
