"""``logstore console``: its options, its refusals, and the command serving pages in front of a broker."""

from __future__ import annotations

import pathlib
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

import pytest
from click.testing import CliRunner

from logstore.cli import main
from tests.kit.brokerkit import BrokerProcess, free_port

pytestmark = pytest.mark.integration


def test_help_names_every_option() -> None:
    result = CliRunner().invoke(main, ["console", "--help"])
    assert result.exit_code == 0
    for option in ("--bootstrap-server", "--listen", "--read-only", "--command-config", "--metrics-url", "--schema-registry-url",
                   "--title"):
        assert option in result.output
    assert "console" in CliRunner().invoke(main, ["--help"]).output


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--listen", "8080"], "--listen takes HOST:PORT"),
        (["--listen", "127.0.0.1:99999"], "--listen takes HOST:PORT"),
        (["--command-config", "nonsense"], "--command-config takes KEY=VALUE"),
        (["--metrics-url", "127.0.0.1:9404"], "is not an http:// URL"),
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


def test_console_listeners_serves_the_console_in_the_broker_process(tmp_path: pathlib.Path) -> None:
    port = free_port()
    broker = BrokerProcess(str(tmp_path / "data"), {"console.listeners": f"http://127.0.0.1:{port}"}).start()
    try:
        body = ""
        deadline = time.monotonic() + 30
        while 'id="brokers">1<' not in body and time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=10) as page:
                    body = page.read().decode()
            except urllib.error.HTTPError as e:  # the broker not answering yet: a 502 page
                body = e.read().decode()
            time.sleep(0.1)
        assert 'id="brokers">1<' in body, body[-1000:]
        assert "logstore console listening on" in broker.log_text()
    finally:
        assert broker.stop() == 0, broker.log_text()[-3000:]


def test_console_listeners_must_be_one_http_address(tmp_path: pathlib.Path) -> None:
    for value, says in (("127.0.0.1:8080", "is not http://host:port"), ("https://127.0.0.1:8080", "http only")):
        result = subprocess.run(
            [sys.executable, "-m", "logstore", "broker", "--data-dir", str(tmp_path / "data"), "--listeners",
             f"PLAINTEXT://127.0.0.1:{free_port()}", "--override", f"console.listeners={value}"],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
        assert result.returncode == 1 and says in result.stderr, result.stderr
