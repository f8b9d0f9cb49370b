"""``logstore perf produce`` / ``consume`` as subprocesses against a broker process."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

from tests.kit.brokerkit import BrokerProcess, free_port

pytestmark = pytest.mark.integration

RECORDS = 20_000
TIMEOUT_S = 60

PERIODIC = re.compile(
    r"^\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, [\d.]+ ms max latency\.$"
)
FINAL = re.compile(
    r"^(\d+) records sent, ([\d.]+) records/sec \(([\d.]+) MB/sec\), ([\d.]+) ms avg latency, "
    r"([\d.]+) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, (\d+) ms 99\.9th\.$"
)
HEADER = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
)
STAMP = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
ROW = re.compile(
    rf"^({STAMP}), ({STAMP}), ([\d.]+), ([\d.]+), (\d+), ([\d.]+), (\d+), (\d+), ([\d.]+), ([\d.]+)$"
)


def perf(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "logstore", "perf", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )


def test_produce_then_consume(broker: BrokerProcess) -> None:
    produced = perf(
        "produce", "--topic", "perf", "--num-records", str(RECORDS), "--record-size", "100",
        "--bootstrap-server", broker.bootstrap, "--duration-limit", "30",
        "--producer-props", "acks=1", "linger.ms=5", "--producer-props", "batch.size=1048576",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    lines = produced.stdout.strip().splitlines()
    assert lines, produced.stderr
    assert all(PERIODIC.match(line) for line in lines[:-1]), lines
    final = FINAL.match(lines[-1])
    assert final is not None, lines[-1]
    assert lines[-1].startswith(f"{RECORDS} records sent, ")
    assert float(final[2]) > 0 and float(final[3]) > 0
    avg, peak = float(final[4]), float(final[5])
    p50, p95, p99, p999 = (int(final[i]) for i in range(6, 10))
    assert 0 <= avg <= peak and p50 <= p95 <= p99 <= p999 <= peak + 1

    consumed = perf(
        "consume", "--topic", "perf", "--messages", str(RECORDS),
        "--bootstrap-server", broker.bootstrap, "--timeout", "20000", "--duration-limit", "30",
    )  # fmt: skip
    assert consumed.returncode == 0, consumed.stderr
    header, row = consumed.stdout.strip().splitlines()
    assert header == HEADER
    match = ROW.match(row)
    assert match is not None, row
    assert match[1] <= match[2]  # start.time, end.time
    assert int(match[5]) == RECORDS  # data.consumed.in.nMsg
    assert float(match[3]) == pytest.approx(RECORDS * 100 / 2**20, abs=1e-4)  # data.consumed.in.MB
    assert int(match[7]) == 0  # rebalance.time.ms: no group
    assert float(match[6]) > 0 and float(match[10]) > 0


@pytest.mark.parametrize("client", ["logstore", "confluent"])
def test_produce_latency_figures_are_measured_with_either_client(broker: BrokerProcess, client: str) -> None:
    """Each delivery report's latency (produce() to acknowledgement): logstore's client once
    reported none, and every figure printed 0.00 ms."""
    produced = perf(
        "--client", client, "produce", "--topic", f"lat-{client}", "--num-records", "2000",
        "--record-size", "100", "--throughput", "2000", "--bootstrap-server", broker.bootstrap,
        "--duration-limit", "30", "--producer-props", "acks=1", "linger.ms=20",
    )  # fmt: skip
    assert produced.returncode == 0, produced.stderr
    final = FINAL.match(produced.stdout.strip().splitlines()[-1])
    assert final is not None, produced.stdout
    avg, peak = float(final[4]), float(final[5])
    p50, p99 = int(final[6]), int(final[8])
    # linger.ms=20 at 2,000 records/s: a record waits up to 20 ms for its batch, 10 ms on average.
    assert 2.0 <= avg <= peak, final[0]
    assert peak >= 15.0 and 1 <= p50 <= p99, final[0]


def test_produce_prints_a_line_per_report_window(
    broker: BrokerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The periodic lines (the CLI run above ends within one window, so it prints none)."""
    from logstore.cli.perf import producer_perf as perf_module

    monkeypatch.setattr(perf_module, "REPORT_INTERVAL_S", 0.2)
    lines: list[str] = []
    perf_module.produce_perf(
        "perf-windows",
        3000,
        100,
        throughput=5000,
        bootstrap=broker.bootstrap,
        duration_limit_s=30,
        out=lines.append,
    )
    periodic, final = lines[:-1], lines[-1]
    assert len(periodic) >= 2, lines
    assert all(PERIODIC.match(line) for line in periodic), periodic
    assert FINAL.match(final) and final.startswith("3000 records sent, "), final


def test_unreachable_broker_says_what_to_do() -> None:
    port = free_port()
    result = perf("consume", "--topic", "t", "--messages", "1", "--bootstrap-server", f"127.0.0.1:{port}")
    assert result.returncode == 1
    assert f"cannot reach a broker at 127.0.0.1:{port}" in result.stderr
    assert "--bootstrap-server" in result.stderr
