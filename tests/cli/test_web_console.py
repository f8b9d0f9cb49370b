"""``logstore console``: its options, its refusals, and the command serving pages in front of a broker."""

from __future__ import annotations

import subprocess
import sys
import threading
import urllib.request

import pytest
from click.testing import CliRunner

from logstore.cli import main
from tests.kit.brokerkit import BrokerProcess

pytestmark = pytest.mark.integration


def test_help_names_every_option() -> None:
    result = CliRunner().invoke(main, ["console", "--help"])
    assert result.exit_code == 0
    for option in ("--bootstrap-server", "--listen", "--read-only", "--command-config", "--title"):
        assert option in result.output
    assert "console" in CliRunner().invoke(main, ["--help"]).output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--listen", "8080"], "--listen takes HOST:PORT"),
        (["--listen", "127.0.0.1:99999"], "--listen takes HOST:PORT"),
        (["--command-config", "nonsense"], "--command-config takes KEY=VALUE"),
        (["--command-config", "security.protocol=SASL_PLAINTEXT", "--command-config", "sasl.password=x"],
         "each person logs in with their own user"),
    ],
)  # fmt: skip
def test_bad_options_are_usage_errors(args: list[str], says: str) -> None:
    result = CliRunner().invoke(main, ["console", *args])
    assert result.exit_code == 2 and says in result.output, result.output


def test_the_command_serves_the_console(broker: BrokerProcess) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "logstore", "console", "--bootstrap-server", broker.bootstrap, "--listen",
         "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        first: list[str] = []
        reader = threading.Thread(target=lambda: first.append(process.stdout.readline()), daemon=True)  # type: ignore[union-attr]
        reader.start()
        reader.join(60)
        assert first and first[0].startswith("logstore console listening on http://127.0.0.1:"), first
        url = first[0].split(" on ", 1)[1].strip()
        with urllib.request.urlopen(url, timeout=30) as page:
            body = page.read().decode()
        assert page.status == 200 and 'id="brokers">1<' in body
    finally:
        process.terminate()
        process.wait(30)
