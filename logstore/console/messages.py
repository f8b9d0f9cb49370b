"""Messages: browse a topic from an offset, a time, the start or the end; filter; produce; export.

The search runs in the console, not in the browser: a consumer with no group
reads the chosen partitions from where the form says up to their ends as they
were when the search began, keeping the records whose key, value or header
match (substring or regular expression), and stops at the first of: enough
matches, :data:`MAX_SCAN` records scanned (the form may lower it), the time
limit, or the ends. The page says which bound stopped it, so a search that
found nothing in the first million records says so rather than "no match".

Values are shown as text (UTF-8), JSON (pretty-printed, or a note when it is
not JSON) or hex. Export writes the same selection as JSON lines (one object
per record: key and value as UTF-8 text, or ``{"base64": ...}`` when they
are not text).
"""

from __future__ import annotations

import base64
import calendar
import csv
import io
import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlencode

import regex
from aiohttp import web

from logstore.client import KafkaException, TopicPartition
from logstore.console.kafka import Clients, ConsoleError, blocking
from logstore.console.pages import (
    MAX_PRODUCE_BYTES,
    clients_of,
    flash,
    int_value,
    redirect,
    render,
    text_value,
    topic_name,
)
from logstore.console.schemas import Registry, decode_all

MAX_SCAN = 1_000_000
DEFAULT_SCAN = 100_000
MAX_SECONDS = 10
DEFAULT_SECONDS = 5
MAX_RESULTS = 500
DEFAULT_RESULTS = 50
MAX_EXPORT = 100_000
MAX_PATTERN = 200
"""The longest filter: a regular expression is compiled once and run against every record scanned."""
MAX_HEADERS = 50
BATCH = 2_000
DECODINGS = ("text", "json", "hex", "schema")
STARTS = ("end", "beginning", "offset", "time")


@dataclass
class Filter:
    """One filter: a substring or a compiled regular expression, on text decoded from bytes.

    A regular expression runs under the ``regex`` module with a timeout (the search's time left), so
    a pattern that backtracks for ever on some value cannot hold the search past its time limit.
    """

    text: str
    regex: Any = None

    def matches(self, data: bytes | None, timeout: float = MAX_SECONDS) -> bool:
        if data is None:
            return False
        decoded = data.decode("utf-8", "replace")
        if self.regex is None:
            return self.text in decoded
        return self.regex.search(decoded, timeout=max(timeout, 0.001)) is not None


@dataclass
class Search:
    """What to read and keep (from the form) and when to stop."""

    topic: str
    partition: int | None = None
    start: str = "end"
    offset: int = 0
    timestamp_ms: int = 0
    key: Filter | None = None
    value: Filter | None = None
    header_name: str | None = None
    header_value: Filter | None = None
    limit: int = DEFAULT_RESULTS
    max_scan: int = DEFAULT_SCAN
    max_seconds: float = DEFAULT_SECONDS

    @property
    def filtered(self) -> bool:
        return self.key is not None or self.value is not None or self.header_name is not None

    def keep(self, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes | None]],
             timeout: float = MAX_SECONDS) -> bool:  # fmt: skip
        """Does the record match every filter? TimeoutError when a regular expression runs past ``timeout``."""
        if self.key is not None and not self.key.matches(key, timeout):
            return False
        if self.value is not None and not self.value.matches(value, timeout):
            return False
        if self.header_name is not None:
            found = [v for name, v in headers if name == self.header_name]
            if not found:
                return False
            if self.header_value is not None and not any(self.header_value.matches(v, timeout) for v in found):
                return False
        return True


@dataclass
class Record:
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass
class Outcome:
    records: list[Record] = field(default_factory=list)
    scanned: int = 0
    stopped: str = ""
    seconds: float = 0.0
    ranges: dict[int, tuple[int, int]] = field(default_factory=dict)


def _filter(values: Any, name: str, use_regex: bool) -> Filter | None:
    text = text_value(values, name, required=False, limit=MAX_PATTERN)
    if not text:
        return None
    if not use_regex:
        return Filter(text)
    try:
        return Filter(text, regex.compile(text))
    except regex.error as e:
        raise ConsoleError(f"{name} filter {text!r} is not a valid regular expression: {e}; "
                           "fix it, or choose 'substring'") from None  # fmt: skip


def parse_time(text: str) -> int:
    """Milliseconds since the epoch from ``YYYY-MM-DDTHH:MM[:SS]`` (UTC) or a number of milliseconds."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    for fmt in ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d %H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"):
        try:
            return calendar.timegm(time.strptime(text.removesuffix("Z"), fmt)) * 1000
        except ValueError:
            continue
    raise ConsoleError(f"time {text[:40]!r} is not YYYY-MM-DDTHH:MM[:SS] (UTC) nor milliseconds since 1970")


def search_of(values: Any, topic: str, *, export: bool = False) -> Search:
    """The search a form or query asks for; a 400 for any bad field."""
    use_regex = text_value(values, "match", required=False, default="substring", limit=16) == "regex"
    start = text_value(values, "start", required=False, default="beginning" if export else "end", limit=16)
    if start not in STARTS:
        raise ConsoleError(f"start must be one of {', '.join(STARTS)}, not {start!r}")
    partition_text = text_value(values, "partition", required=False, limit=16)
    search = Search(topic, start=start)
    if partition_text not in ("", "all"):
        search.partition = int_value(values, "partition", low=0, high=1_000_000)
    if start == "offset":
        search.offset = int_value(values, "offset", default=0, low=0)
    elif start == "time":
        search.timestamp_ms = parse_time(text_value(values, "time", limit=40))
    search.key = _filter(values, "key", use_regex)
    search.value = _filter(values, "value", use_regex)
    header = text_value(values, "header", required=False, limit=MAX_PATTERN + 250)
    if header:
        name, sep, pattern = header.partition("=")
        search.header_name = name.strip()
        if not search.header_name:
            raise ConsoleError("header filter is NAME or NAME=VALUE; the name is missing")
        if sep and pattern:
            search.header_value = _filter({"header": pattern}, "header", use_regex)
    most = MAX_EXPORT if export else MAX_RESULTS
    search.limit = int_value(values, "limit", default=most if export else DEFAULT_RESULTS, low=1, high=most)
    search.max_scan = int_value(values, "max_scan", default=DEFAULT_SCAN, low=1, high=MAX_SCAN)
    search.max_seconds = int_value(values, "max_seconds", default=DEFAULT_SECONDS, low=1, high=MAX_SECONDS)
    return search


def _partitions(clients: Clients, search: Search) -> list[int]:
    metadata = clients.admin.list_topics(search.topic, timeout=10)
    topic = metadata.topics.get(search.topic)
    if topic is None or topic.error is not None:
        reason = topic.error.name() if topic is not None and topic.error is not None else "not listed"
        raise ConsoleError(f"topic {search.topic!r} does not exist or you may not describe it ({reason}); "
                           "see the list of topics", 403 if "AUTHORIZATION" in reason else 404)  # fmt: skip
    indexes = sorted(topic.partitions)
    if search.partition is not None:
        if search.partition not in topic.partitions:
            raise ConsoleError(f"topic {search.topic!r} has partitions 0 to {len(indexes) - 1}, "
                               f"not {search.partition}", 404)  # fmt: skip
        return [search.partition]
    return indexes


def _starts(consumer: Any, search: Search, ranges: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Where each partition's read begins (only partitions with something to read)."""
    starts: dict[int, int] = {}
    if search.start == "time":
        asked = [TopicPartition(search.topic, p, search.timestamp_ms) for p in ranges]
        for tp in consumer.offsets_for_times(asked, timeout=10):
            if tp.error is None and tp.offset >= 0:
                starts[tp.partition] = tp.offset
    for p, (low, high) in ranges.items():
        if search.start == "beginning":
            starts[p] = low
        elif search.start == "offset":
            starts[p] = max(low, search.offset)
        elif search.start == "end":
            window = search.limit if not search.filtered else max(search.limit, search.max_scan // len(ranges))
            starts[p] = max(low, high - window)
    return {p: o for p, o in starts.items() if o < ranges[p][1]}


def scan(clients: Clients, search: Search, outcome: Outcome) -> Iterator[Record]:
    """The matching records in the order read; ``outcome`` counts and says why it stopped."""
    began = time.monotonic()
    partitions = _partitions(clients, search)
    consumer = clients.consumer()
    try:
        for p in partitions:
            outcome.ranges[p] = consumer.get_watermark_offsets(TopicPartition(search.topic, p), timeout=10)
        starts = _starts(consumer, search, outcome.ranges)
        if not starts:
            outcome.stopped = "nothing to read there"
            return
        ends = {p: outcome.ranges[p][1] for p in starts}
        consumer.assign([TopicPartition(search.topic, p, o) for p, o in starts.items()])
        open_partitions = set(starts)
        positions = dict(starts)
        found = 0
        deadline = began + search.max_seconds
        for _ in range(search.max_scan + 1):  # bounded: each round scans at least one record or waits
            if not open_partitions:
                outcome.stopped = "read to the end"
                break
            if time.monotonic() > deadline:
                outcome.stopped = f"time limit ({search.max_seconds:g} s) reached"
                break
            remaining = sum(ends[p] - positions[p] for p in open_partitions)
            want = max(1, min(BATCH, search.max_scan - outcome.scanned, remaining))
            messages = consumer.consume(want, 0.5)
            for m in messages:
                error = m.error()
                if error is not None:
                    if error.code() == -191:  # _PARTITION_EOF
                        open_partitions.discard(m.partition())
                        continue
                    raise ConsoleError(f"reading {search.topic!r}: {error.name()} ({error.str()})",
                                       403 if "AUTHORIZATION" in error.name() else 502)  # fmt: skip
                p, offset = m.partition(), m.offset()
                if p not in open_partitions or offset >= ends[p]:
                    continue
                outcome.scanned += 1
                positions[p] = offset + 1
                if offset + 1 >= ends[p]:
                    open_partitions.discard(p)
                key, value, headers = m.key(), m.value(), list(m.headers() or [])
                try:
                    kept = search.keep(key, value, headers, deadline - time.monotonic())
                except TimeoutError:
                    outcome.stopped = (f"time limit ({search.max_seconds:g} s) reached inside the regular expression "
                                       f"at partition {p} offset {offset}: simplify the pattern")  # fmt: skip
                    return
                if kept:
                    found += 1
                    yield Record(p, offset, m.timestamp()[1], key, value, headers)
                    if found >= search.limit and search.start != "end":
                        outcome.stopped = f"found {search.limit} (the limit)"
                        return
                if outcome.scanned >= search.max_scan:
                    outcome.stopped = f"scanned {search.max_scan} records (the limit)"
                    return
        else:
            outcome.stopped = "scan bound reached"
    finally:
        outcome.seconds = time.monotonic() - began
        consumer.close()


SCHEMA_REGISTRY = web.AppKey("schema_registry", Registry)

MAX_SEARCHES = 4
"""Searches and exports running at once in one console; one more is a 503 (try again)."""
_SEARCHES = threading.BoundedSemaphore(MAX_SEARCHES)


def run_search(clients: Clients, search: Search) -> Outcome:
    """The search, if fewer than :data:`MAX_SEARCHES` run now (each holds a consumer and a thread)."""
    if not _SEARCHES.acquire(blocking=False):
        raise ConsoleError(f"{MAX_SEARCHES} searches are running already; try again in a few seconds", 503)
    try:
        return _run_search(clients, search)
    finally:
        _SEARCHES.release()


def _run_search(clients: Clients, search: Search) -> Outcome:
    outcome = Outcome()
    records = list(scan(clients, search, outcome))
    if search.start == "end":
        records.sort(key=lambda r: (r.timestamp, r.partition, r.offset))
        records = records[-search.limit:]
    outcome.records = records
    return outcome


def decode(data: bytes | None, how: str, where: tuple[int, int, str] | None = None) -> tuple[str, str]:
    """(the text to show, a note) for key or value bytes decoded as ``how``."""
    if data is None:
        return "", "null"
    if how == "hex":
        return data[:4096].hex(" "), "" if len(data) <= 4096 else f"first 4096 of {len(data)} bytes"
    text = data.decode("utf-8", "replace")
    note = "" if "\ufffd" not in text else "not valid UTF-8"
    if how == "json":
        try:
            return json.dumps(json.loads(text), indent=2, ensure_ascii=False), ""
        except ValueError:
            return text, "not JSON"
    return text, note


async def browse(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    topic = topic_name(request)
    decoding = text_value(request.query, "decode", required=False, default="text", limit=8)
    if decoding not in DECODINGS:
        raise ConsoleError(f"decode must be one of {', '.join(DECODINGS)}, not {decoding!r}")
    live = request.query.get("live") == "1"
    if live and request.query.get("start", "end") != "end":
        raise ConsoleError("a live tail reads from the end: choose 'the end' as where to start")
    search = search_of(request.query, topic)
    outcome = await blocking(f"searching {topic!r}", lambda: run_search(clients, search),
                             search.max_seconds + 20)  # fmt: skip
    decoder = decode
    if decoding == "schema":
        registry = request.app[SCHEMA_REGISTRY].decoder
        if registry is None:
            raise ConsoleError("decoding through a schema registry needs one: start the console with "
                               "--schema-registry-url http://HOST:PORT")  # fmt: skip
        shown = await blocking(f"decoding {topic!r} through {registry.url}",
                               lambda: decode_all(registry, outcome.records), 30)  # fmt: skip

        def decoder(data: bytes | None, how: str, where: tuple[int, int, str] | None = None) -> tuple[str, str]:
            if where is not None and where in shown:
                return shown[where]
            return decode(data, "text")

    context = {"outcome": outcome, "decoding": decoding, "decode": decoder, "live": live}
    if request.query.get("fragment") == "1":  # the records alone, for the live tail's refresh
        return render(request, "_records.html", context)
    query = {k: v for k, v in request.query.items() if k not in ("decode", "live", "fragment")}
    base = f"/topics/{quote(topic)}/messages?"
    here = {k: v for k, v in request.query.items() if k not in ("live", "fragment")}
    return render(request, "messages.html", {
        **context, "topic": topic, "search": search, "form": request.query,
        "live_url": base + urlencode({**here, "start": "end", "live": "1"}),
        "still_url": base + urlencode(here),
        "fragment_url": base + urlencode({**here, "live": "1", "fragment": "1"}),
        "export_url": f"/topics/{quote(topic)}/export.jsonl?" + urlencode(query),
        "csv_url": f"/topics/{quote(topic)}/export.csv?" + urlencode(query),
        "max_scan": MAX_SCAN, "max_seconds": MAX_SECONDS, "max_results": MAX_RESULTS,
    })  # fmt: skip


def _json_bytes(data: bytes | None) -> Any:
    if data is None:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode()}


def export_line(topic: str, r: Record) -> bytes:
    line = {"topic": topic, "partition": r.partition, "offset": r.offset, "timestamp": r.timestamp,
            "key": _json_bytes(r.key), "value": _json_bytes(r.value),
            "headers": [[name, _json_bytes(v)] for name, v in r.headers]}  # fmt: skip
    return json.dumps(line, ensure_ascii=False).encode() + b"\n"


async def export(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    topic = topic_name(request)
    search = search_of(request.query, topic, export=True)
    outcome = await blocking(f"exporting {topic!r}", lambda: run_search(clients, search), search.max_seconds + 20)
    body = b"".join(export_line(topic, r) for r in outcome.records)
    return web.Response(body=body, content_type="application/x-ndjson", headers={
        "Content-Disposition": f'attachment; filename="{topic}.jsonl"',
        "X-Logstore-Scanned": str(outcome.scanned), "X-Logstore-Stopped": outcome.stopped,
    })  # fmt: skip


async def export_csv(request: web.Request) -> web.StreamResponse:
    """The selection as CSV (partition, offset, timestamp, key, value, headers as JSON): for a
    spreadsheet; keys and values as UTF-8 text (bytes that are not become U+FFFD: JSON lines keep them)."""
    clients = clients_of(request)
    topic = topic_name(request)
    search = search_of(request.query, topic, export=True)
    outcome = await blocking(f"exporting {topic!r}", lambda: run_search(clients, search), search.max_seconds + 20)
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["partition", "offset", "timestamp", "key", "value", "headers"])
    for r in outcome.records:
        writer.writerow([r.partition, r.offset, r.timestamp, _csv_text(r.key), _csv_text(r.value),
                         json.dumps([[n, _json_bytes(v)] for n, v in r.headers], ensure_ascii=False)])  # fmt: skip
    return web.Response(text=out.getvalue(), content_type="text/csv", charset="utf-8", headers={
        "Content-Disposition": f'attachment; filename="{topic}.csv"',
        "X-Logstore-Scanned": str(outcome.scanned), "X-Logstore-Stopped": outcome.stopped,
    })  # fmt: skip


def _csv_text(data: bytes | None) -> str:
    return "" if data is None else data.decode("utf-8", "replace")


MAX_IMPORT_LINES = 100_000


def _from_json(value: Any, what: str) -> bytes | None:
    if value is None:
        return None
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        try:
            return base64.b64decode(value["base64"], validate=True)
        except ValueError:
            raise ConsoleError(f"{what}: base64 that does not decode") from None
    raise ConsoleError(f"{what}: a string, null or {{\"base64\": ...}}, not {type(value).__name__}")


def parse_import(data: bytes) -> list[tuple[int | None, bytes | None, bytes | None, list[tuple[str, bytes | None]]]]:
    """JSON lines as export writes them: (partition or None, key, value, headers) per line; a 400 naming
    the first bad line."""
    records = []
    lines = [line for line in data.splitlines() if line.strip()]
    if len(lines) > MAX_IMPORT_LINES:
        raise ConsoleError(f"an import takes at most {MAX_IMPORT_LINES} lines, not {len(lines)}")
    for number, line in enumerate(lines, 1):
        what = f"line {number}"
        try:
            item = json.loads(line)
        except ValueError as e:
            raise ConsoleError(f"{what} is not JSON ({e}); the file should be JSON lines as Export writes them") from None
        if not isinstance(item, dict):
            raise ConsoleError(f"{what} is not a JSON object")
        headers_in = item.get("headers") or []
        if not isinstance(headers_in, list) or not all(isinstance(h, list) and len(h) == 2 and isinstance(h[0], str)
                                                       for h in headers_in):  # fmt: skip
            raise ConsoleError(f"{what}: headers must be a list of [name, value] pairs")
        headers = [(h[0], _from_json(h[1], f"{what}, header {h[0]!r}")) for h in headers_in]
        partition = item.get("partition")
        if partition is not None and (not isinstance(partition, int) or partition < 0):
            raise ConsoleError(f"{what}: partition must be a number >= 0")
        records.append((partition, _from_json(item.get("key"), f"{what}, key"),
                        _from_json(item.get("value"), f"{what}, value"), headers))  # fmt: skip
    if not records:
        raise ConsoleError("the file has no records")
    return records


def produce_many(clients: Clients, topic: str, partitions: int,
                 records: list[tuple[int | None, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
                 keep_partitions: bool) -> tuple[int, list[str]]:  # fmt: skip
    """Send the records; (delivered, the first errors)."""
    producer = clients.producer()
    errors: list[str] = []
    delivered = [0]

    def report(error: Any, _message: Any) -> None:
        if error is None:
            delivered[0] += 1
        elif len(errors) < 5:
            errors.append(f"{error.name()} ({error.str()})")

    for partition, key, value, headers in records:
        target = partition if keep_partitions and partition is not None and partition < partitions else -1
        for _ in range(100):  # bounded: a full queue waits at most 100 polls of 0.1 s per record
            try:
                producer.produce(topic, value=value, key=key, partition=target, headers=headers or None,
                                 on_delivery=report)  # fmt: skip
                break
            except BufferError:
                producer.poll(0.1)
        else:
            errors.append("the producer's queue stayed full for 10 s")
            break
    left = producer.flush(30)
    if left:
        errors.append(f"{left} records not acknowledged within 30 s")
    return delivered[0], errors


async def import_lines(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    topic = topic_name(request)
    form = await request.post()
    upload = form.get("file")
    if upload is None or not hasattr(upload, "file"):
        raise ConsoleError("choose a JSON lines file to import (as Export writes them)")
    data = upload.file.read(MAX_IMPORT_BYTES + 1)
    if len(data) > MAX_IMPORT_BYTES:
        raise ConsoleError(f"the file is over {MAX_IMPORT_BYTES // 1_000_000} MB; split it", 413)
    records = parse_import(data)
    keep = form.get("keep_partitions") == "1"
    partitions = await blocking(f"checking topic {topic!r}", lambda: _partitions(clients, Search(topic)))
    delivered, errors = await blocking(
        f"importing into {topic!r}", lambda: produce_many(clients, topic, len(partitions), records, keep), 60)
    if errors:
        raise ConsoleError(f"importing into {topic!r}: {delivered} of {len(records)} records delivered; "
                           f"{'; '.join(errors)}", 502 if delivered else 400)  # fmt: skip
    flash(request, f"imported {delivered} records into {topic}")
    return redirect(f"/topics/{quote(topic)}/messages?start=end")


MAX_IMPORT_BYTES = 16_000_000


def parse_headers(text: str) -> list[tuple[str, bytes]]:
    """``name=value`` lines as record headers; a 400 for a line without a name."""
    headers: list[tuple[str, bytes]] = []
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > MAX_HEADERS:
        raise ConsoleError(f"headers: at most {MAX_HEADERS}, not {len(lines)}")
    for number, line in enumerate(lines, 1):
        name, sep, value = line.partition("=")
        if not sep or not name.strip():
            raise ConsoleError(f"header line {number} is not name=value: {line[:80]!r}")
        headers.append((name.strip(), value.strip().encode()))
    return headers


def produce_one(clients: Clients, topic: str, key: bytes | None, value: bytes, partition: int,
                headers: list[tuple[str, bytes]]) -> tuple[int, int]:  # fmt: skip
    """Send one record and wait for it: (partition, offset), or the broker's refusal."""
    producer = clients.producer()
    outcome: list[tuple[Any, Any]] = []
    producer.produce(topic, value=value, key=key, partition=partition, headers=headers or None,
                     on_delivery=lambda err, msg: outcome.append((err, msg)))  # fmt: skip
    producer.flush(12)
    if not outcome:
        raise ConsoleError(f"producing to {topic!r}: no acknowledgement within 12 s; check the cluster", 502)
    error, message = outcome[0]
    if error is not None:
        raise KafkaException(error)
    return message.partition(), message.offset()


async def produce(request: web.Request) -> web.StreamResponse:
    clients = clients_of(request)
    topic = topic_name(request)
    form = await request.post()
    key_text = text_value(form, "key", required=False, limit=MAX_PRODUCE_BYTES)
    value = text_value(form, "value", required=False, limit=MAX_PRODUCE_BYTES).replace("\r\n", "\n")
    headers = parse_headers(text_value(form, "headers", required=False, limit=100_000))
    partition = int_value(form, "partition", default=-1, low=-1, high=1_000_000)
    await blocking(f"checking topic {topic!r}", lambda: _partitions(clients, Search(topic, partition=None
                                                                                  if partition < 0 else partition)))  # fmt: skip
    where = await blocking(f"producing to {topic!r}", lambda: produce_one(
        clients, topic, key_text.encode() if key_text else None, value.encode(), partition, headers))  # fmt: skip
    flash(request, f"produced to partition {where[0]} at offset {where[1]}")
    return redirect(f"/topics/{quote(topic)}/messages?start=end")


def add_routes(router: web.UrlDispatcher) -> None:
    router.add_get("/topics/{topic}/messages", browse)
    router.add_post("/topics/{topic}/produce", produce)
    router.add_get("/topics/{topic}/export.jsonl", export)
    router.add_get("/topics/{topic}/export.csv", export_csv)
    router.add_post("/topics/{topic}/import", import_lines)

