"""librdkafka's own test suite against a logstore broker (librdkafka_suite.py).

The smoke test runs only when ``LIBRDKAFKA_SRC`` points at a librdkafka source tree (it builds
the tree once, then runs tests 0001 and 0002 against a fresh broker); without it, it is skipped
and nothing is built or fetched. The parser tests need no tree.
"""

from __future__ import annotations

import json
import os
import pathlib

import pytest

from tests.kit.librdkafka_suite import (
    Entry,
    categorize,
    main,
    parse_entries,
    parse_output,
    parse_progress,
    select,
)

pytestmark = pytest.mark.external

SMOKE = "0001,0002"

SUMMARY = """\
|\x1b[32m 0001_multiobj                            |     PASSED |   1.234s \x1b[0m|
|\x1b[31m 0002_unkpart                             |     FAILED |   0.500s \x1b[0m|\x1b[31m do_test(): expected X\x1b[0m
|\x1b[36m 0028_long_topicnames                     |    SKIPPED |   0.000s \x1b[0m|\x1b[36m Filtered due to negative test flags\x1b[0m
"""


def test_summary_table_is_read_without_colours() -> None:
    assert parse_output(SUMMARY, "") == {
        "0001_multiobj": ("passed", "", 1.234),
        "0002_unkpart": ("failed", "do_test(): expected X", 0.5),
        "0028_long_topicnames": ("skipped", "Filtered due to negative test flags", 0.0),
    }


def test_progress_lines_stand_in_for_a_missing_summary() -> None:
    stderr = "\n".join(
        [
            "\x1b[36m[0055_a                      /  0.000s] ================= Running test 0055_a =================",
            '\x1b[31m### Test "0055_a (sub: x)" failed at t.c:1:f() at Tue Nov 24 20:07:57 2026: ###',
            "f():1: boom",
            "[0055_b                      /  0.000s] ================= Running test 0055_b =================",
            "[0055_b                      /  0.277s] ================= Test 0055_b PASSED =================",
            "[0055_c                      /  0.000s] WARN: SKIPPING TEST: needs SASL",
            "[0055_d                      /  0.000s] ================= Running test 0055_d =================",
        ]
    )
    progress = parse_progress(stderr)
    assert progress["0055_a"] == ("failed", "f():1: boom [t.c:1:f()]")
    assert progress["0055_b"] == ("passed", "")
    assert progress["0055_c"] == ("skipped", "needs SASL")
    assert progress["0055_d"] == ("running", "")


def test_entries_selection_and_categories() -> None:
    entries = parse_entries(
        "_TEST(0001_a, 0),\n_TEST(0002_b, TEST_F_LOCAL | TEST_F_KNOWN_ISSUE),\n_TEST(0151_c, 0),"
    )
    assert entries == [
        Entry("0001_a", "0001", ()),
        Entry("0002_b", "0002", ("TEST_F_LOCAL", "TEST_F_KNOWN_ISSUE")),
        Entry("0151_c", "0151", ()),
    ]
    assert entries[1].local and entries[1].known_issue
    assert select(entries, None, 0, 150) == ["0001", "0002"]
    assert select(entries, ["1"], 0, 150) == ["0001"]
    with pytest.raises(SystemExit):
        select(entries, ["0099"], 0, 150)
    assert categorize("skipped", "Cannot create topics (set KAFKA_PATH and BROKERS)") == "needs-kafka-tools"
    assert (
        categorize("skipped", "Test requires SASL_PLAINTEXT or SASL_SSL, got PLAINTEXT") == "needs-sasl-ssl"
    )
    assert categorize("failed", "timeout after 180 s") == "timeout"


@pytest.mark.integration
@pytest.mark.slow
def test_smoke_subset_passes(tmp_path: pathlib.Path) -> None:
    src = os.environ.get("LIBRDKAFKA_SRC")
    if not src:
        pytest.skip(
            "LIBRDKAFKA_SRC is not set: point it at a librdkafka source tree (e.g. v2.15.0) to run "
            "librdkafka's test suite against logstore (python -m tests.kit.librdkafka_suite)"
        )
    out = tmp_path / "results.json"
    code = main(["--src", src, "--only", SMOKE, "--json", str(out), "--workdir", str(tmp_path / "work")])
    results = json.loads(out.read_text())["results"]
    assert code == 0, [r for r in results if r["status"] == "failed"]
    assert {r["test"]: r["status"] for r in results} == {"0001_multiobj": "passed", "0002_unkpart": "passed"}
