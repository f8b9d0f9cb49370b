"""The fault tests (slow tier, in CI): a replicated workload under a nemesis, then the checker.

ZooKeeper and three broker processes; idempotent acks=all producers into a
topic at replication factor 3 with min.insync.replicas=2; at least 50 faults,
one at a time: kill -9 (also of the controller), SIGSTOP/SIGCONT short of the
ZooKeeper session and past it (a zombie leader, or a zombie controller),
SIGTERM and restart. The engine is ``bench/chaos.py`` (its module doc says
what the checker proves); ``bench/chaos.py --faults 1000`` runs the same
for longer.
"""

from __future__ import annotations

import pathlib

import pytest

from bench import chaos

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.cluster]

FAULTS = 50


def test_fifty_faults_lose_and_duplicate_nothing(tmp_path: pathlib.Path) -> None:
    lines: list[str] = []
    report = chaos.run(
        FAULTS, 900, seed=12, session_ms=3000, rate=600, workdir=str(tmp_path), say=lines.append
    )
    table = report.table()
    assert sum(report.faults.values()) >= FAULTS, table
    assert set(report.faults) >= {"kill", "pause", "zombie", "term"}, table  # each kind at least once
    assert report.acknowledged > 1000 and report.read >= report.acknowledged, table
    assert report.ok, table + "\n" + "\n".join(lines[-20:])
