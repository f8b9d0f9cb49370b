"""The console's pieces in one process: parsing of form values, filters, decoding, charts, sessions, errors."""

from __future__ import annotations

import fnmatch
import re
import threading
import tomllib

import pytest

from logstore.client import KafkaError, KafkaException
from logstore.console import auth, charts, groups, kafka, messages, topics, traffic
from logstore.console.pages import HERE, ConsoleSettings, Session, check_topic_name, int_value, text_value

pytestmark = pytest.mark.unit


def test_settings_ask_for_login_only_with_sasl() -> None:
    assert not ConsoleSettings("127.0.0.1:9092").needs_login
    sasl = ConsoleSettings("127.0.0.1:9093", {"security.protocol": "sasl_plaintext", "sasl.mechanism": "scram-sha-256"})
    assert sasl.needs_login and sasl.mechanism == "SCRAM-SHA-256"
    assert sasl.client_config["bootstrap.servers"] == "127.0.0.1:9093"


def test_form_values_are_bounded_and_named_in_errors() -> None:
    assert text_value({"a": "x"}, "a") == "x"
    assert text_value({}, "a", required=False, default="d") == "d"
    with pytest.raises(kafka.ConsoleError, match="a is required"):
        text_value({"a": "  "}, "a")
    with pytest.raises(kafka.ConsoleError, match="a is 11 characters long; the console takes at most 10"):
        text_value({"a": "x" * 11}, "a", limit=10)
    assert int_value({"n": " 7 "}, "n") == 7 and int_value({}, "n", default=3) == 3
    with pytest.raises(kafka.ConsoleError, match="n must be from 1 to 5, not 6"):
        int_value({"n": "6"}, "n", low=1, high=5)
    with pytest.raises(kafka.ConsoleError, match="n must be a whole number"):
        int_value({"n": "1.5"}, "n")
    check_topic_name("a.b_c-1")
    for bad in ("", ".", "..", "a b", "x" * 250, "é"):
        with pytest.raises(kafka.ConsoleError):
            check_topic_name(bad)


def test_configs_headers_times_and_plans_parse_or_say_why_not() -> None:
    assert topics.parse_configs("# c\nretention.ms = 5\n\ncleanup.policy=compact") == {
        "retention.ms": "5", "cleanup.policy": "compact"}  # fmt: skip
    with pytest.raises(kafka.ConsoleError, match="configs line 1 is not key=value"):
        topics.parse_configs("=x")
    assert messages.parse_headers("a=1\n\nb = two=2") == [("a", b"1"), ("b", b"two=2")]
    with pytest.raises(kafka.ConsoleError, match="header line 1 is not name=value"):
        messages.parse_headers("novalue")
    assert messages.parse_time("1700000000000") == 1700000000000
    assert messages.parse_time("2023-11-14T22:13:20") == 1700000000000
    assert messages.parse_time("2023-11-14T22:13") == 1699999980000
    with pytest.raises(kafka.ConsoleError, match="is not YYYY-MM-DDTHH:MM"):
        messages.parse_time("tomorrow")
    plan = groups.parse_plan("a.b:0:5 c-d:12:0")
    assert [(tp.topic, tp.partition, tp.offset) for tp in plan] == [("a.b", 0, 5), ("c-d", 12, 0)]
    for bad in ("", "a:0", "a:x:1", "a:1:-1"):
        with pytest.raises(kafka.ConsoleError):
            groups.parse_plan(bad)


def test_filters_match_key_value_and_headers() -> None:
    search = messages.search_of({"key": "user-", "header": "trace=ab"}, "t")
    assert search.keep(b"user-1", b"v", [("trace", b"xaby")])
    assert not search.keep(b"user-1", b"v", [("trace", b"zzz")])
    assert not search.keep(b"user-1", b"v", [])
    assert not search.keep(None, b"v", [("trace", b"ab")])
    by_regex = messages.search_of({"value": r"^\d{3}$", "match": "regex", "header": "h"}, "t")
    assert by_regex.keep(None, b"123", [("h", None)])
    assert not by_regex.keep(None, b"1234", [("h", b"")])
    with pytest.raises(kafka.ConsoleError, match="not a valid regular expression"):
        messages.search_of({"value": "a(", "match": "regex"}, "t")
    with pytest.raises(kafka.ConsoleError, match="at most 200"):
        messages.search_of({"key": "k" * 201}, "t")
    assert not messages.search_of({}, "t").filtered


def test_decoding_as_text_json_and_hex() -> None:
    assert messages.decode(None, "text") == ("", "null")
    assert messages.decode(b'{"a":1}', "json") == ('{\n  "a": 1\n}', "")
    assert messages.decode(b"plain", "json") == ("plain", "not JSON")
    assert messages.decode(b"\xff", "text")[1] == "not valid UTF-8"
    assert messages.decode(b"\x00\xab", "hex") == ("00 ab", "")
    text, note = messages.decode(b"x" * 5000, "hex")
    assert len(text.split()) == 4096 and note == "first 4096 of 5000 bytes"
    line = messages.export_line("t", messages.Record(0, 5, 1, b"\xff", b"v", [("h", None)]))
    assert line == b'{"topic": "t", "partition": 0, "offset": 5, "timestamp": 1, "key": {"base64": "/w=="}, ' \
                   b'"value": "v", "headers": [["h", null]]}\n'


def test_the_lag_chart_scales_bars_and_escapes_labels() -> None:
    svg = charts.bar_chart([("a/0", 10), ("<b>/1", 5), ("c/2", 0)], title="lag & more")
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    widths = [int(w) for w in re.findall(r'<rect [^>]*width="(\d+)"', svg)]
    assert widths[0] == 2 * widths[1] and widths[2] == 0
    assert "&lt;b&gt;/1" in svg and "lag &amp; more" in svg and "<b>" not in svg
    many = charts.bar_chart([(f"t/{i}", i) for i in range(500)], title="many")
    assert many.count("<rect") == charts.MAX_BARS and "t/499" in many and "t/0<" not in many
    assert "nothing to show" in charts.bar_chart([], title="none")


def test_sessions_expire_are_bounded_and_renew_their_id() -> None:
    sessions = auth.Sessions(idle_s=60, max_sessions=3)
    made = [sessions.new() for _ in range(4)]
    assert len(sessions) == 3 and sessions.get(made[0].id) is None and sessions.get(made[3].id) is made[3]
    old_id, old_csrf = made[3].id, made[3].csrf
    sessions.renew(made[3])
    assert sessions.get(old_id) is None and sessions.get(made[3].id) is made[3] and made[3].csrf != old_csrf
    made[1].last_seen -= 61
    assert sessions.get(made[1].id) is None and made[1].id not in sessions


def test_csrf_and_the_page_after_login() -> None:
    session = Session("id")
    auth.check_csrf(session, session.csrf)
    for bad in (None, "", "x", session.csrf + "x"):
        with pytest.raises(kafka.ConsoleError) as caught:
            auth.check_csrf(session, bad)
        assert caught.value.status == 403 and "reload the page" in str(caught.value)
    assert auth._safe_next("/topics?q=a") == "/topics?q=a"
    for outside in ("https://evil.example/", "//evil.example/", "/\\evil", "", None):
        assert auth._safe_next(outside) == "/"


def test_kafka_errors_become_statuses_and_advice() -> None:
    denied = kafka.from_exception("creating topic 'x'", KafkaException(KafkaError(29, "Authorization failed.")))
    assert denied.status == 403 and "not allowed: the broker answered TOPIC_AUTHORIZATION_FAILED" in str(denied)
    assert "ask an administrator" in str(denied)
    missing = kafka.from_exception("reading", KafkaException(KafkaError(3)))
    assert missing.status == 404 and "UNKNOWN_TOPIC_OR_PARTITION" in str(missing)
    assert kafka.from_exception("x", TimeoutError()).status == 502
    assert kafka.from_exception("x", ValueError("bad")).status == 400
    assert kafka.status_of("GROUP_AUTHORIZATION_FAILED") == 403 and kafka.status_of("INVALID_CONFIG") == 400


def test_the_wheel_carries_every_template_and_static_file() -> None:
    pyproject = tomllib.loads((HERE.parent.parent / "pyproject.toml").read_text())
    patterns = pyproject["tool"]["setuptools"]["package-data"]["logstore"]
    files = [p.relative_to(HERE.parent).as_posix() for p in (HERE / "templates").iterdir()]
    files += [p.relative_to(HERE.parent).as_posix() for p in (HERE / "static").iterdir()]
    assert len(files) > 10
    uncovered = [f for f in files if not any(fnmatch.fnmatch(f, pattern) for pattern in patterns)]
    assert not uncovered, f"add these to [tool.setuptools.package-data] in pyproject.toml: {uncovered}"
    manifest = (HERE.parent.parent / "MANIFEST.in").read_text()
    assert "logstore/console/templates" in manifest and "logstore/console/static" in manifest


def test_searches_at_once_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(messages, "_SEARCHES", threading.BoundedSemaphore(1))
    assert messages._SEARCHES.acquire(blocking=False)  # one search runs
    with pytest.raises(kafka.ConsoleError, match="searches are running already; try again") as caught:
        messages.run_search(None, messages.Search("t"))  # type: ignore[arg-type]
    assert caught.value.status == 503


def test_byte_counters_are_read_from_a_prometheus_page() -> None:
    page = "\n".join([
        "# HELP logstore_topic_bytes_in_total Record batch bytes appended by Produce, by topic.",
        "# TYPE logstore_topic_bytes_in_total counter",
        'logstore_topic_bytes_in_total{topic="a"} 100.0',
        'logstore_topic_bytes_in_total{topic="b"} 2.5e3',
        'logstore_topic_bytes_out_total{topic="a"} 7',
        'kafka_server_brokertopicmetrics_bytesin_total{topic="a",instance="k1"} 1',
        'logstore_topic_records_in_total{topic="a"} 99',
        "garbage line",
    ])  # fmt: skip
    into_in: dict[str, float] = {}
    into_out: dict[str, float] = {}
    traffic.parse_counters(page, into_in, into_out)
    assert into_in == {"a": 101.0, "b": 2500.0} and into_out == {"a": 7.0}


def test_a_regular_expression_cannot_hold_a_search_past_its_time() -> None:
    search = messages.search_of({"value": "(a|aa)+$", "match": "regex"}, "t")
    assert search.keep(None, b"aaa", [])
    with pytest.raises(TimeoutError):
        search.keep(None, b"a" * 10_000 + b"b", [], timeout=0.0)  # no time left: the match stops at once

    class Paused:
        def search(self, text: str, timeout: float) -> None:
            raise TimeoutError("regex timed out")

    search.value = messages.Filter("slow", Paused())
    with pytest.raises(TimeoutError):
        search.keep(None, b"x", [])


def test_a_principals_cache_answers_within_its_ttl() -> None:
    clients = kafka.Clients.__new__(kafka.Clients)
    clients._lock = threading.Lock()
    clients._cache = {}
    calls: list[int] = []
    assert clients.cached("k", 60, lambda: calls.append(1) or 1) == 1
    assert clients.cached("k", 60, lambda: calls.append(2) or 2) == 1 and calls == [1]
    assert clients.cached("k", 0, lambda: calls.append(3) or 3) == 3 and calls == [1, 3]
