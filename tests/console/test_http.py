"""Every endpoint of the web console over HTTP, against a real broker process.

The console is served from a thread (tests/kit/consolekit.py) in front of a
``logstore broker`` child process; ``Visitor`` is a browser at the HTTP level
(its cookie, the CSRF token of its last page). Bad input gets a status and a
message that says what to do: a huge filter, a bad regular expression, a topic
that does not exist, a form without its CSRF token, a change in read-only mode.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest

from logstore.client import Consumer, Producer
from logstore.client.admin import AdminClient, NewTopic
from logstore.console import ConsoleSettings
from tests.kit.brokerkit import BrokerProcess, free_port
from tests.kit.consolekit import ConsoleServer, Visitor, wait_for

pytestmark = pytest.mark.integration

Start = Callable[[ConsoleSettings], ConsoleServer]


def _visitor(start: Start, broker: BrokerProcess, **kwargs: object) -> Visitor:
    server = start(ConsoleSettings(broker.bootstrap, **kwargs))  # type: ignore[arg-type]
    visitor = Visitor(server.url)
    assert visitor.get("/").status == 200
    return visitor


def _produce(bootstrap: str, topic: str, records: list[tuple[bytes | None, bytes, list[tuple[str, bytes]]]],
             partition: int = -1) -> None:  # fmt: skip
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    errors: list[object] = []
    for key, value, headers in records:
        producer.produce(topic, value=value, key=key, partition=partition, headers=headers or None,
                         on_delivery=lambda err, msg: errors.append(err) if err else None)  # fmt: skip
    assert producer.flush(30) == 0
    producer.close()
    assert not errors, errors


def test_overview_names_the_broker_and_counts_partitions(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker)
    page = visitor.get("/")
    assert page.status == 200
    assert re.search(r'id="brokers">1<', page.text)
    assert re.search(r'id="offline">0<', page.text) and re.search(r'id="under-replicated">0<', page.text)
    assert "controller" in page.text and str(plain_broker.port) in page.text
    cookie = next(h for h in visitor.set_cookie_headers if h.startswith("logstore_console="))
    assert "HttpOnly" in cookie and "Secure" in cookie and "SameSite=Strict" in cookie
    assert "default-src 'self'" in page.headers["Content-Security-Policy"]
    assert visitor.get("/healthz").text == "ok\n"
    css = visitor.request("GET", "/static/console.css", accept="text/css")
    assert css.status == 200 and "text/css" in css.headers["Content-Type"] and b"@media" in css.body
    js = visitor.request("GET", "/static/console.js", accept="*/*")
    assert js.status == 200 and b"data-refresh" in js.body


def test_topics_create_list_page_configure_grow_and_delete(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker, page_size=3)
    made = visitor.post("/topics", {"name": "orders", "partitions": "2", "configs": "retention.ms=3600000\n"})
    assert made.status == 303 and made.location == "/topics/orders"
    page = visitor.get("/topics/orders")
    assert page.status == 200 and "topic orders created with 2 partition(s)" in page.text
    assert len(re.findall(r"<tr[^>]*><td class=\"num\">\d+</td>", page.text)) == 2
    assert re.search(r"<tr class=\"set\"><td>retention.ms</td><td class=\"wrap\">3600000</td>", page.text)
    for i in range(4):
        assert visitor.post("/topics", {"name": f"paged-{i}", "partitions": "1"}).status == 303
    first = visitor.get("/topics", q="paged")
    assert first.status == 200 and "page 1 of 2" in first.text and first.text.count('href="/topics/paged-') == 3
    second = visitor.get("/topics", q="paged", page="2")
    assert "page 2 of 2" in second.text and "paged-3" in second.text and "paged-0" not in second.text
    listed = visitor.get("/topics", q="orders")
    row = re.search(r'href="/topics/orders">orders</a></td>\s*<td class="num">(\d+)</td>\s*<td class="num">(\d+)</td>'
                    r'\s*<td class="num">([^<]+)</td>', listed.text)  # fmt: skip
    assert row and row.group(1) == "2" and row.group(2) == "1" and row.group(3).endswith("B"), listed.text[-2000:]
    # configs: set one, then back to its default
    assert visitor.post("/topics/orders/configs", {"op": "set", "name": "cleanup.policy", "value": "compact"}).status == 303
    assert re.search(r'<tr class="set"><td>cleanup.policy</td><td class="wrap">compact</td>', visitor.get("/topics/orders").text)
    assert visitor.post("/topics/orders/configs", {"op": "delete", "name": "cleanup.policy"}).status == 303
    assert not re.search(r'<tr class="set"><td>cleanup.policy</td>', visitor.get("/topics/orders").text)
    bad = visitor.post("/topics/orders/configs", {"op": "set", "name": "no.such.config", "value": "1"})
    assert bad.status == 400 and "no.such.config" in bad.error()
    # partitions: grow to 3; shrinking is the broker's refusal, shown
    assert visitor.post("/topics/orders/partitions", {"total": "3"}).status == 303
    assert "topic orders now has 3 partitions" in visitor.get("/topics/orders").text
    shrink = visitor.post("/topics/orders/partitions", {"total": "1"})
    assert shrink.status == 400 and "INVALID_PARTITIONS" in shrink.error()
    # delete: only with the name typed again
    unconfirmed = visitor.post("/topics/orders/delete", {"confirm": "order"})
    assert unconfirmed.status == 400 and "type its name" in unconfirmed.error()
    assert visitor.post("/topics/orders/delete", {"confirm": "orders"}).status == 303
    gone = wait_for(lambda: (a := visitor.get("/topics/orders")).status == 404 and a, "the topic gone")
    assert "does not exist" in gone.error()
    again = visitor.post("/topics", {"name": "paged-0"})
    assert again.status == 409 and "TOPIC_ALREADY_EXISTS" in again.error()


@pytest.mark.parametrize(
    ("fields", "status", "says"),
    [
        ({"name": "bad name!"}, 400, "characters Kafka does not allow"),
        ({"name": "x" * 300}, 400, "at most 249"),
        ({"name": "ok", "partitions": "zero"}, 400, "partitions must be a whole number"),
        ({"name": "ok", "partitions": "0"}, 400, "partitions must be from 1"),
        ({"name": "ok", "configs": "no equals sign"}, 400, "configs line 1 is not key=value"),
        ({}, 400, "name is required"),
    ],
)  # fmt: skip
def test_a_bad_topic_form_says_which_field(console_for: Start, plain_broker: BrokerProcess,
                                           fields: dict[str, str], status: int, says: str) -> None:  # fmt: skip
    visitor = _visitor(console_for, plain_broker)
    answer = visitor.post("/topics", fields)
    assert answer.status == status and says in answer.error(), answer.error()


def test_messages_produce_browse_filter_decode_and_export(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker)
    assert visitor.post("/topics", {"name": "events", "partitions": "2"}).status == 303
    before = int(time.time() * 1000) - 1000
    _produce(plain_broker.bootstrap, "events", [(f"k{i}".encode(), f'{{"n": {i}}}'.encode(), []) for i in range(30)])
    made = visitor.post("/topics/events/produce", {"key": "needle-key", "value": '{"kind": "special"}',
                                                   "headers": "trace=abc-123\nsource=console", "partition": "1"})  # fmt: skip
    assert made.status == 303, made.error()
    shown = visitor.get(made.location)
    assert re.search(r"produced to partition 1 at offset \d+", shown.text)
    # by header (name=value, substring), by header name only, by key, by value with a regex
    found = visitor.get("/topics/events/messages", start="beginning", header="trace=abc")
    assert found.status == 200 and found.text.count('class="message"') == 1 and "needle-key" in found.text
    assert "trace=abc-123" in found.text and "source=console" in found.text
    assert visitor.get("/topics/events/messages", start="beginning", header="source").text.count('class="message"') == 1
    assert visitor.get("/topics/events/messages", start="beginning", header="trace=zzz").text.count('class="message"') == 0
    assert visitor.get("/topics/events/messages", start="beginning", key="k1").text.count('class="message"') == 11
    regex = visitor.get("/topics/events/messages", start="beginning", value=r'"n": 2\d', match="regex", limit="500")
    assert regex.text.count('class="message"') == 10
    # the end: the newest, limited
    end = visitor.get("/topics/events/messages", start="end", limit="5")
    assert end.text.count('class="message"') == 5
    # an offset and a partition; a time
    one = visitor.get("/topics/events/messages", start="offset", offset="0", partition="1", limit="1")
    assert one.text.count('class="message"') == 1 and "p1" in one.text
    since = visitor.get("/topics/events/messages", start="time", time=str(before), limit="500")
    assert since.text.count('class="message"') == 31
    future = visitor.get("/topics/events/messages", start="time", time="2100-01-01T00:00", limit="500")
    assert future.text.count('class="message"') == 0 and "nothing to read there" in future.text
    # bounded: scan at most 3 records
    bounded = visitor.get("/topics/events/messages", start="beginning", value="nothing-like-this", max_scan="3")
    assert "scanned 3 records (the limit)" in bounded.text
    # decoding
    as_json = visitor.get("/topics/events/messages", start="beginning", key="needle", decode="json")
    assert "&#34;kind&#34;: &#34;special&#34;" in as_json.text or '"kind": "special"' in as_json.text.replace("&#34;", '"')
    as_hex = visitor.get("/topics/events/messages", start="beginning", key="needle", decode="hex")
    assert '7b 22 6b 69 6e 64 22' in as_hex.text
    # export: JSON lines of the same selection
    export = visitor.request("GET", "/topics/events/export.jsonl?start=beginning&match=regex&key=%5Ek2%24", accept="*/*")
    assert export.status == 200 and export.headers["Content-Type"].startswith("application/x-ndjson")
    lines = [json.loads(line) for line in export.text.splitlines()]
    assert sorted(line["key"] for line in lines) == ["k2"]
    assert lines[0]["value"] == '{"n": 2}' and lines[0]["topic"] == "events"
    everything = visitor.request("GET", "/topics/events/export.jsonl", accept="*/*")
    records = [json.loads(line) for line in everything.text.splitlines()]
    assert len(records) == 31 and any(r["headers"] == [["trace", "abc-123"], ["source", "console"]] for r in records)


@pytest.mark.parametrize(
    ("query", "status", "says"),
    [
        ({"value": "x" * 5000}, 400, "value is 5000 characters long; the console takes at most 200"),
        ({"value": "(unclosed", "match": "regex"}, 400, "is not a valid regular expression"),
        ({"key": "[z-a]", "match": "regex"}, 400, "is not a valid regular expression"),
        ({"start": "sideways"}, 400, "start must be one of"),
        ({"start": "time", "time": "yesterday"}, 400, "is not YYYY-MM-DDTHH:MM"),
        ({"partition": "7"}, 404, "has partitions 0 to 0, not 7"),
        ({"max_scan": "99999999"}, 400, "max_scan must be from 1 to 1000000"),
        ({"limit": "-1"}, 400, "limit must be from 1"),
        ({"decode": "avro"}, 400, "decode must be one of text, json, hex"),
        ({"header": "=value"}, 400, "the name is missing"),
    ],
)  # fmt: skip
def test_bad_searches_are_answered_clearly(console_for: Start, plain_broker: BrokerProcess,
                                           query: dict[str, str], status: int, says: str) -> None:  # fmt: skip
    visitor = _visitor(console_for, plain_broker)
    if visitor.get("/topics/one-partition").status == 404:
        assert visitor.post("/topics", {"name": "one-partition", "partitions": "1"}).status == 303
    answer = visitor.get("/topics/one-partition/messages", **query)
    assert answer.status == status and says in answer.error(), answer.error()


def test_a_topic_that_does_not_exist(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker)
    for path in ("/topics/no-such-topic", "/topics/no-such-topic/messages"):
        answer = visitor.get(path)
        assert answer.status == 404 and "topic 'no-such-topic' does not exist" in answer.error()
    produced = visitor.post("/topics/no-such-topic/produce", {"value": "x"})
    assert produced.status == 404 and "does not exist" in produced.error()
    assert visitor.request("GET", "/topics/no-such-topic/export.jsonl", accept="*/*").status == 404
    bad_name = visitor.get("/topics/bad%20name")
    assert bad_name.status == 400 and "characters Kafka does not allow" in bad_name.error()
    assert visitor.get("/no/such/page").status == 404


def test_forms_need_the_sessions_csrf_token(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker)
    missing = visitor.post("/topics", {"name": "csrf-less"}, csrf=False)
    assert missing.status == 403 and "no CSRF token" in missing.error()
    wrong = visitor.post("/topics", {"name": "csrf-less", "csrf_token": "forged"})
    assert wrong.status == 403 and "not this session's" in wrong.error()
    stranger = Visitor(f"http://127.0.0.1:{visitor.port}")
    stolen = stranger.post("/topics", {"name": "csrf-less", "csrf_token": visitor.csrf})
    assert stolen.status == 403
    assert visitor.get("/topics/csrf-less").status == 404  # nothing was made


def test_read_only_hides_and_refuses_changes(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker, read_only=True)
    page = visitor.get("/topics")
    assert "read-only" in page.text and "Create a topic" not in page.text
    refused = visitor.post("/topics", {"name": "never"})
    assert refused.status == 403 and "--read-only" in refused.error()
    assert visitor.get("/topics/never").status == 404


def _group_with_lag(bootstrap: str, topic: str, group: str, consumed: int, total: int) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    admin.close()
    _produce(bootstrap, topic, [(None, f"v{i}".encode(), []) for i in range(total)])
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False})  # fmt: skip
    consumer.subscribe([topic])
    got: list[object] = []
    deadline = time.monotonic() + 30
    while len(got) < consumed and time.monotonic() < deadline:
        got += consumer.consume(consumed - len(got), 1)
    assert len(got) >= consumed
    consumer.commit(asynchronous=False)
    consumer.close()


def test_groups_lag_chart_reset_with_preview_and_delete(console_for: Start, plain_broker: BrokerProcess) -> None:
    _group_with_lag(plain_broker.bootstrap, "lagging", "workers", consumed=4, total=10)
    visitor = _visitor(console_for, plain_broker)
    listed = visitor.get("/groups")
    assert listed.status == 200 and 'href="/groups/workers"' in listed.text
    page = visitor.get("/groups/workers")
    assert page.status == 200 and re.search(r'id="total-lag">6<', page.text)
    assert "<svg" in page.text and "lagging/0" in page.text and "6 records" in page.text
    svg = visitor.request("GET", "/groups/workers/lag.svg", accept="image/svg+xml")
    assert svg.status == 200 and svg.headers["Content-Type"].startswith("image/svg+xml") and "6 records" in svg.text
    # preview: nothing changes yet
    preview = visitor.post("/groups/workers/reset", {"to": "earliest"})
    assert preview.status == 200 and re.search(r'<td class="num">4</td>\s*<td class="num"><b>0</b></td>', preview.text)
    assert re.search(r'id="total-lag">6<', visitor.get("/groups/workers").text)
    plan = re.search(r'name="plan" value="([^"]+)"', preview.text)
    assert plan and plan.group(1) == "lagging:0:0"
    applied = visitor.post("/groups/workers/reset/apply", {"plan": plan.group(1)})
    assert applied.status == 303
    assert re.search(r'id="total-lag">10<', visitor.get("/groups/workers").text)
    # to an offset (clamped to the log), to a time, to the latest
    offset = visitor.post("/groups/workers/reset", {"to": "offset", "offset": "99"})
    assert 'value="lagging:0:10"' in offset.text
    by_time = visitor.post("/groups/workers/reset", {"to": "timestamp", "time": "2000-01-01T00:00"})
    assert 'value="lagging:0:0"' in by_time.text
    latest = visitor.post("/groups/workers/reset", {"to": "latest"})
    assert visitor.post("/groups/workers/reset/apply", {"plan": re.search(r'name="plan" value="([^"]+)"', latest.text).group(1)}).status == 303  # type: ignore[union-attr]
    assert re.search(r'id="total-lag">0<', visitor.get("/groups/workers").text)
    # bad resets
    assert visitor.post("/groups/workers/reset", {"to": "sideways"}).status == 400
    assert "is not topic, partition, offset" in visitor.post("/groups/workers/reset/apply", {"plan": "lagging:x:1"}).error()
    assert visitor.post("/groups/workers/reset", {"to": "offset"}).status == 400
    # delete, confirmed
    assert visitor.post("/groups/workers/delete", {"confirm": "nope"}).status == 400
    assert visitor.post("/groups/workers/delete", {"confirm": "workers"}).status == 303
    assert 'href="/groups/workers"' not in visitor.get("/groups").text


def test_a_reset_of_a_group_with_members_is_refused_with_the_reason(console_for: Start,
                                                                    plain_broker: BrokerProcess) -> None:  # fmt: skip
    _group_with_lag(plain_broker.bootstrap, "busy-topic", "busy", consumed=1, total=3)
    member = Consumer({"bootstrap.servers": plain_broker.bootstrap, "group.id": "busy", "session.timeout.ms": 6000,
                       "enable.auto.commit": False})  # fmt: skip
    member.subscribe(["busy-topic"])
    try:
        visitor = _visitor(console_for, plain_broker)
        wait_for(lambda: member.consume(1, 0.2) is not None and 'id="group-state">Stable<' in visitor.get("/groups/busy").text,
                 "the member to join")  # fmt: skip
        preview = visitor.post("/groups/busy/reset", {"to": "earliest"})
        assert 'id="members-warning"' in preview.text
        plan = re.search(r'name="plan" value="([^"]+)"', preview.text)
        assert plan is not None
        refused = visitor.post("/groups/busy/reset/apply", {"plan": plan.group(1)})
        assert refused.status in (400, 409) and "resetting the offsets of 'busy'" in refused.error(), refused.error()
    finally:
        member.close()


def test_export_then_import_round_trips_and_csv(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker)
    for name in ("source", "copy"):
        assert visitor.post("/topics", {"name": name, "partitions": "2"}).status == 303
    _produce(plain_broker.bootstrap, "source", [(f"k{i}".encode(), f"v{i}".encode(), [("n", str(i).encode())])
                                                for i in range(20)], partition=1)  # fmt: skip
    _produce(plain_broker.bootstrap, "source", [(None, b"\xff\x00binary", [("raw", b"\x80")])], partition=0)
    exported = visitor.request("GET", "/topics/source/export.jsonl", accept="*/*")
    assert exported.status == 200 and len(exported.text.splitlines()) == 21
    visitor.get("/topics/copy/messages")
    imported = visitor.post_file("/topics/copy/import", {"keep_partitions": "1"}, "file", "source.jsonl", exported.body)
    assert imported.status == 303, imported.error()
    assert "imported 21 records into copy" in visitor.get(imported.location).text
    copied = visitor.request("GET", "/topics/copy/export.jsonl", accept="*/*")
    strip = [{k: v for k, v in json.loads(line).items() if k not in ("topic", "timestamp")} for line in copied.text.splitlines()]
    original = [{k: v for k, v in json.loads(line).items() if k not in ("topic", "timestamp")} for line in exported.text.splitlines()]
    assert sorted(map(json.dumps, strip)) == sorted(map(json.dumps, original))  # same partitions, offsets, bytes
    assert any(r["value"] == {"base64": "/wBiaW5hcnk="} and r["headers"] == [["raw", {"base64": "gA=="}]] for r in strip)
    table = visitor.request("GET", "/topics/source/export.csv?partition=1&limit=3", accept="*/*")
    assert table.status == 200 and table.headers["Content-Type"].startswith("text/csv")
    rows = table.text.splitlines()
    assert rows[0] == "partition,offset,timestamp,key,value,headers" and len(rows) == 4
    assert rows[1].startswith("1,0,") and ',k0,v0,"[[""n"", ""0""]]"' in rows[1]
    # bad files: named line, clear reason
    for content, says in ((b'{"value": "ok"}\nnot json\n', "line 2 is not JSON"),
                          (b'{"value": 5}\n', "line 1, value: a string, null or"),
                          (b'{"headers": [["h"]]}\n', "line 1: headers must be a list of [name, value] pairs"),
                          (b"\n\n", "the file has no records")):  # fmt: skip
        bad = visitor.post_file("/topics/copy/import", {}, "file", "bad.jsonl", content)
        assert bad.status == 400 and says in bad.error(), bad.error()
    missing = visitor.post("/topics/copy/import", {})
    assert missing.status == 400 and "choose a JSON lines file" in missing.error()


def test_a_live_tail_page_and_its_fragment(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker)
    assert visitor.post("/topics", {"name": "tailed", "partitions": "1"}).status == 303
    _produce(plain_broker.bootstrap, "tailed", [(b"k", b"first", [])])
    page = visitor.get("/topics/tailed/messages", live="1", limit="10")
    assert page.status == 200 and 'data-kind="html"' in page.text and 'id="live-stop"' in page.text
    fragment_url = re.search(r'data-refresh="([^"]+)"', page.text)
    assert fragment_url is not None
    _produce(plain_broker.bootstrap, "tailed", [(b"k", b"second", [])])
    fragment = visitor.get(fragment_url.group(1).replace("&amp;", "&"))
    assert fragment.status == 200 and "<html" not in fragment.text and "<header class=\"top\"" not in fragment.text
    assert fragment.text.count('class="message"') == 2 and "second" in fragment.text and "live: refreshes" in fragment.text
    refused = visitor.get("/topics/tailed/messages", live="1", start="beginning")
    assert refused.status == 400 and "a live tail reads from the end" in refused.error()


def test_acls_on_a_cluster_without_an_authorizer(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker)
    answer = visitor.get("/acls")
    assert answer.status == 400 and "SECURITY_DISABLED" in answer.error(), answer.error()


def test_bytes_in_and_out_from_the_brokers_metrics(console_for: Start, broker_factory: Any) -> None:
    metrics_port = free_port()
    broker = broker_factory({"metrics.listener": f"http://127.0.0.1:{metrics_port}"})
    dead = f"http://127.0.0.1:{free_port()}/metrics"
    visitor = _visitor(console_for, broker, metrics_urls=[f"http://127.0.0.1:{metrics_port}/metrics", dead])
    first = visitor.get("/")
    assert 'id="traffic" data-refresh="/traffic"' in first.text and "measuring" in first.text
    assert f"metrics not read from {dead}" in first.text  # named, not fatal
    AdminClient({"bootstrap.servers": broker.bootstrap}).create_topics([NewTopic("metered", 1, 1)])["metered"].result(30)
    visitor.get("/traffic")
    _produce(broker.bootstrap, "metered", [(None, b"x" * 1000, []) for _ in range(50)])
    time.sleep(0.6)  # the console reads the endpoints at most every 0.5 s
    box = visitor.get("/traffic")
    found = re.search(r'id="bytes-in">([0-9.]+) (B|KiB|MiB)/s<', box.text)
    assert found and float(found.group(1)) > 0, box.text
    assert 'href="/topics/metered">metered</a>' in box.text
    _produce(broker.bootstrap, "metered", [(None, b"y" * 1000, []) for _ in range(50)])
    time.sleep(0.6)
    listed = visitor.get("/topics")
    row = re.search(r'href="/topics/metered">metered</a>.*?</tr>', listed.text, re.S)
    assert row and "<th class=\"num\">in</th>" in listed.text and re.search(r">[1-9][0-9.]* (B|KiB|MiB)/s<", row.group(0)), row
    without = _visitor(console_for, broker)
    assert "--metrics-url" in without.get("/").text


def test_client_quotas_set_listed_and_removed(console_for: Start, plain_broker: BrokerProcess) -> None:
    visitor = _visitor(console_for, plain_broker)
    assert "no quotas set" in visitor.get("/quotas").text
    made = visitor.post("/quotas", {"entity_type": "user", "entity_name": "alice", "key": "producer_byte_rate",
                                    "value": "1048576"})  # fmt: skip
    assert made.status == 303, made.error()
    default = visitor.post("/quotas", {"entity_type": "client-id", "entity_name": "", "key": "consumer_byte_rate",
                                       "value": "2000"})  # fmt: skip
    assert default.status == 303, default.error()
    page = visitor.get("/quotas")
    assert re.search(r"user <b>alice</b></td>\s*<td>producer_byte_rate</td><td class=\"num\">1,048,576</td>", page.text)
    assert "client-id <b>&lt;default&gt;</b>" in page.text
    bad = visitor.post("/quotas", {"entity_type": "user", "entity_name": "alice", "key": "producer_byte_rate",
                                   "value": "fast"})  # fmt: skip
    assert bad.status == 400 and "value must be a number" in bad.error()
    odd = visitor.post("/quotas", {"entity_type": "user", "entity_name": "alice", "key": "no_such_quota", "value": "1"})
    assert odd.status == 400 and "INVALID_REQUEST" in odd.error(), odd.error()
    for entity_type, name, key in (("user", "alice", "producer_byte_rate"), ("client-id", "", "consumer_byte_rate")):
        assert visitor.post("/quotas", {"entity_type": entity_type, "entity_name": name, "key": key, "value": ""}).status == 303
    assert "no quotas set" in visitor.get("/quotas").text


def test_values_decode_through_the_schema_registry(console_for: Start, broker_factory: Any) -> None:
    from logstore.client.serdes import AvroSerializer, SchemaRegistryClient, SerializationContext

    registry_port = free_port()
    broker = broker_factory({"schema.registry.listeners": f"http://127.0.0.1:{registry_port}"})
    url = f"http://127.0.0.1:{registry_port}"
    schema = ('{"type": "record", "name": "Order", "fields": [{"name": "id", "type": "long"}, '
              '{"name": "item", "type": "string"}]}')  # fmt: skip
    AdminClient({"bootstrap.servers": broker.bootstrap}).create_topics([NewTopic("orders-avro", 1, 1)])["orders-avro"].result(30)
    serialize = AvroSerializer(SchemaRegistryClient({"url": url}), schema)
    framed = serialize({"id": 42, "item": "teapot"}, SerializationContext("orders-avro", "value"))
    _produce(broker.bootstrap, "orders-avro", [(b"k1", framed, []), (b"k2", b"plain text", [])])
    visitor = _visitor(console_for, broker, schema_registry_url=url)
    page = visitor.get("/topics/orders-avro/messages", start="beginning", decode="schema")
    assert page.status == 200, page.error()
    text = page.text.replace("&#34;", '"')
    assert '"id": 42' in text and '"item": "teapot"' in text and re.search(r"Avro, schema id \d+", text)
    assert "plain text" in text and "not in Confluent&#39;s wire format: shown as text" in page.text
    without = _visitor(console_for, broker)
    refused = without.get("/topics/orders-avro/messages", decode="schema")
    assert refused.status == 400 and "--schema-registry-url" in refused.error()
    wrong = _visitor(console_for, broker, schema_registry_url=f"http://127.0.0.1:{free_port()}")
    unreachable = wrong.get("/topics/orders-avro/messages", start="beginning", decode="schema")
    assert unreachable.status == 200 and "could not decode through" in unreachable.text
