"""The consumer's hot path: Message in C, and decode_fetch over Fetch record sets.

Message is checked against the Python class it replaced (kept here as the
oracle), method by method. decode_fetch is checked against parse_batches'
records: every codec, keys None/empty/bytes, headers, timestamps, log append
time, control batches, torn tails, fetch offsets inside a batch, corruption;
then a hypothesis property over random record sets, and a leak check.
"""

from __future__ import annotations

import gc
import pickle
import sys
import tracemalloc
import weakref
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore import _speedups
from logstore.client.errors import KafkaError
from logstore.client.types import Message
from logstore.errors import CorruptRecordError
from logstore.records import CODECS, Record, build_batch, parse_batches
from logstore.records.fetch import CorruptFetchError, decode_fetch
from tests.kit.batchkit import control_batch, reseal

pytestmark = pytest.mark.unit

TOPIC = "orders"
CODEC_NAMES = list(CODECS)


class PyMessage:
    """The Python Message class this C type replaced (logstore/client/types.py at 378a9e1)."""

    __slots__ = ("_error", "_headers", "_key", "_latency", "_offset", "_partition", "_timestamp",
                 "_topic", "_value")  # fmt: skip

    def __init__(
        self,
        topic: str | None,
        partition: int,
        offset: int,
        key: Any,
        value: Any,
        timestamp: tuple[int, int] = (0, 0),
        headers: list[tuple[str, bytes | None]] | None = None,
        error: KafkaError | None = None,
        latency: float | None = None,
    ) -> None:
        self._topic = topic
        self._partition = partition
        self._offset = offset
        self._key = key
        self._value = value
        self._timestamp = timestamp
        self._headers = headers
        self._error = error
        self._latency = latency

    def topic(self) -> str | None:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> Any:
        return self._key

    def value(self) -> Any:
        return self._value

    def timestamp(self) -> tuple[int, int]:
        return self._timestamp

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self._headers

    def error(self) -> KafkaError | None:
        return self._error

    def latency(self) -> float | None:
        return self._latency

    def len(self) -> int:
        return len(self._value) if self._value is not None else 0

    def __len__(self) -> int:
        return self.len()

    def set_value(self, value: Any) -> None:
        self._value = value

    def set_key(self, key: Any) -> None:
        self._key = key

    def set_headers(self, headers: list[tuple[str, bytes | None]] | None) -> None:
        self._headers = headers

    def __repr__(self) -> str:
        return (
            f"Message(topic={self._topic!r}, partition={self._partition}, offset={self._offset}, "
            f"key={self._key!r}, value={self._value!r}, error={self._error})"
        )


def observed(m: Any) -> tuple[Any, ...]:
    """Everything a Message shows through its methods."""
    return (
        m.topic(), m.partition(), m.offset(), m.key(), m.value(), m.timestamp(), m.headers(),
        m.error(), m.latency(), m.len(), len(m), bool(m), repr(m),
    )  # fmt: skip


# --- Message -----------------------------------------------------------------

CONSTRUCTIONS: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
    (("t", 0, 5, b"k", b"value"), {}),
    (("t", 3, 0, None, None), {}),
    (("t", 1, 2**63 - 1, b"", b""), {"timestamp": (1, 1_700_000_000_000)}),
    ((None, -1, -1001, None, None), {"error": KafkaError(-195, "broker down")}),
    (("t", 2, 9, b"k", b"v"), {"timestamp": (2, -1), "headers": [("h", b"1"), ("n", None)], "latency": 0.25}),
    (("t", 2, 9, b"k", b"v"), {"headers": [], "latency": 0.0}),
    (("t", 0, 1, "str key", {"deserialized": True}), {}),
    (("t", 0, 1, b"k", "a str value"), {"timestamp": [1, 5]}),
    ((), {"topic": "t", "partition": 4, "offset": 8, "key": b"k", "value": b"vv", "timestamp": (1, 3)}),
    (("t",), {"partition": 4, "offset": 8, "key": None, "value": b"x", "error": None, "latency": None}),
]


@pytest.mark.parametrize(("args", "kwargs"), CONSTRUCTIONS)
def test_message_behaves_like_the_python_class(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    kw = dict(kwargs)
    if isinstance(kw.get("timestamp"), list):  # the Python class kept what it was given
        kw["timestamp"] = tuple(kw["timestamp"])
    expected, m = PyMessage(*args, **kw), Message(*args, **kwargs)
    assert observed(m) == observed(expected)
    for setter, value in (("set_value", b"new"), ("set_key", None), ("set_headers", [("a", None)]),
                          ("set_value", None), ("set_headers", None), ("set_key", {"any": "object"})):  # fmt: skip
        assert getattr(m, setter)(value) is None
        getattr(expected, setter)(value)
        assert observed(m) == observed(expected)


def test_message_values_are_the_objects_given_not_copies() -> None:
    headers: list[tuple[str, bytes | None]] = [("h", b"1")]
    value, error = bytearray(b"abc"), KafkaError(1)
    m = Message("t", 0, 0, None, value, headers=headers, error=error)
    assert m.value() is value and m.headers() is headers and m.error() is error
    assert m.headers() is m.headers()


def test_message_pickles() -> None:
    m = Message("t", 2, 9, b"k", b"v", (2, 77), [("h", b"1"), ("n", None)], None, 1.5)
    assert observed(pickle.loads(pickle.dumps(m))) == observed(m)


def test_message_refuses_what_it_cannot_store() -> None:
    with pytest.raises(TypeError):
        Message("t", "0", 0, None, None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Message("t", 0, 0, None, None, timestamp=(1,))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        Message("t", 0, 0, None, None, latency="soon")  # type: ignore[arg-type]
    with pytest.raises(OverflowError):
        Message("t", 2**31, 0, None, None)
    with pytest.raises(TypeError):
        Message("t", 0, 0, None)  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        len(Message("t", 0, 0, None, 5))
    with pytest.raises(TypeError):
        type("Sub", (Message,), {})  # as confluent-kafka's: not subclassable


class _Box:
    """A weak-referenceable object to put inside reference cycles."""

    message: Any = None


def test_message_cycles_are_collected() -> None:
    m = Message("t", 0, 0, None, None)
    assert not gc.is_tracked(m)  # atoms only: nothing for the collector
    box = _Box()
    box.message = m
    m.set_value(box)
    assert gc.is_tracked(m)
    alive = weakref.ref(box)
    del m, box
    gc.collect()
    assert alive() is None


def test_decoded_messages_are_tracked_only_when_they_hold_containers() -> None:
    buf = build_batch([Record(value=b"a"), Record(value=b"b", headers=[("h", b"1")])], timestamp=1)
    plain, with_headers = decode_fetch(buf, TOPIC, 0, 0)[0]
    assert not gc.is_tracked(plain) and gc.is_tracked(with_headers)
    box = _Box()
    box.message = with_headers
    headers = with_headers.headers()
    assert headers is not None
    headers.append(("box", box))  # type: ignore[arg-type]
    alive = weakref.ref(box)
    del plain, with_headers, box, headers
    gc.collect()
    assert alive() is None


# --- decode_fetch against parse_batches ---------------------------------------


def oracle(buf: bytes, topic: str, partition: int, fetch_offset: int) -> tuple[list[tuple[Any, ...]], int]:
    """decode_fetch's result, from parse_batches' records and the Python Message."""
    out, next_offset = [], fetch_offset
    for batch in parse_batches(buf, allow_partial=True):
        next_offset = max(next_offset, batch.next_offset)
        if batch.is_control:
            continue
        ts_type = 2 if batch.timestamp_type == "LogAppendTime" else 1
        for r in batch.records:
            assert r.timestamp is not None  # a decoded record always has one
            if r.offset >= fetch_offset:
                m = PyMessage(topic, partition, r.offset, r.key, r.value, (ts_type, r.timestamp),
                              list(r.headers) or None)  # fmt: skip
                out.append(observed(m))
    return out, next_offset


def check(buf: bytes | bytearray | memoryview, fetch_offset: int = 0, partition: int = 3) -> list[Message]:
    messages, next_offset = decode_fetch(buf, TOPIC, partition, fetch_offset)
    assert ([observed(m) for m in messages], next_offset) == oracle(
        bytes(buf), TOPIC, partition, fetch_offset
    )
    return messages


def log_append(batch: bytes, when: int = 1_800_000_000_000) -> bytes:
    return reseal(batch, attributes_or=0x08, max_timestamp=when)


MIXED_RECORDS = [
    Record(key=None, value=b"no key", timestamp=1_000),
    Record(key=b"", value=b"empty key", timestamp=1_005),
    Record(key=b"k1", value=None, timestamp=999),
    Record(key=b"k2", value=b"", headers=[("trace", b"abc"), ("null", None), ("", b"")], timestamp=1_002),
    Record(key=b"k3", value=b"x" * 300, headers=[(f"h{i}", bytes([i])) for i in range(40)]),
    Record(key="ключ".encode(), value=b"\x00\xff", headers=[("ключ", "значение".encode())], timestamp=-5),
]


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_every_codec_every_field(codec: str) -> None:
    batches = [
        build_batch(MIXED_RECORDS, base_offset=0, compression=codec, timestamp=1_000),
        build_batch([b"v1", (b"k", b"v2"), (None, None)], base_offset=6, compression=codec, timestamp=2_000),
        log_append(build_batch(MIXED_RECORDS, base_offset=9, compression=codec, timestamp=3_000)),
    ]
    messages = check(b"".join(batches))
    assert len(messages) == 15 and [m.offset() for m in messages] == list(range(15))
    assert {m.timestamp()[0] for m in messages[9:]} == {2}
    assert messages[9].timestamp() == (2, 1_800_000_000_000)
    assert messages[0].headers() is None and messages[3].headers() == [
        ("trace", b"abc"),
        ("null", None),
        ("", b""),
    ]
    assert all(m.topic() is messages[0].topic() for m in messages)  # one shared str


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_control_batches_are_skipped_but_consumed(codec: str) -> None:
    first = build_batch([b"a", b"b"], base_offset=0, compression=codec, timestamp=1)
    last = build_batch([b"c"], base_offset=3, compression=codec, timestamp=1)
    messages = check(first + control_batch(2) + last)
    assert [m.value() for m in messages] == [b"a", b"b", b"c"]
    assert decode_fetch(first + control_batch(2), TOPIC, 0, 0)[1] == 3
    assert decode_fetch(control_batch(2), TOPIC, 0, 2) == ([], 3)


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_a_torn_last_batch_ends_the_walk_quietly(codec: str) -> None:
    whole = build_batch([b"a", b"b"], base_offset=0, compression=codec, timestamp=1)
    torn = build_batch([b"c" * 100, b"d"], base_offset=2, compression=codec, timestamp=1)
    for cut in (1, 11, 12, 30, 60, 61, 62, len(torn) - 1):
        messages, next_offset = decode_fetch(whole + torn[:cut], TOPIC, 0, 0)
        assert [m.offset() for m in messages] == [0, 1] and next_offset == 2
        check(whole + torn[:cut])
        assert decode_fetch(torn[:cut], TOPIC, 0, 2) == ([], 2)  # nothing whole: stay put


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_records_before_the_fetch_offset_are_left_out(codec: str) -> None:
    buf = b"".join(
        build_batch(
            [b"%d" % i for i in range(base, base + 10)], base_offset=base, compression=codec, timestamp=1
        )
        for base in (0, 10, 20)
    )
    for fetch_offset in (0, 1, 9, 10, 15, 29, 30, 31):
        messages = check(buf, fetch_offset)
        assert [m.offset() for m in messages] == list(range(fetch_offset, 30))
        assert [m.value() for m in messages] == [b"%d" % i for i in range(fetch_offset, 30)]
    assert decode_fetch(buf, TOPIC, 0, 31)[1] == 31  # never moves backwards


def test_mixed_codecs_in_one_record_set() -> None:
    parts, offset = [], 0
    codecs = ["none", "lz4", "lz4", "none", "control", "none", "zstd", "gzip", "none", "snappy", "none"]
    for i, codec in enumerate(codecs):
        if codec == "control":
            parts.append(control_batch(offset))
            offset += 1
            continue
        records = [b"r%d" % j for j in range(i + 1)]
        parts.append(build_batch(records, base_offset=offset, compression=codec, timestamp=10 * i))
        offset += i + 1
    buf = b"".join(parts)
    check(buf)
    check(buf, 7)
    check(buf + parts[1][:70])


def test_buffers_of_every_kind() -> None:
    buf = build_batch([b"a", b"b"], base_offset=4, timestamp=1) + build_batch(
        [b"c"], base_offset=6, compression="lz4"
    )
    framed = b"xyz" + buf + b"tail"
    for records in (buf, bytearray(buf), memoryview(buf), memoryview(framed)[3 : 3 + len(buf)]):
        assert [m.value() for m in decode_fetch(records, TOPIC, 0, 0)[0]] == [b"a", b"b", b"c"]
    assert decode_fetch(None, TOPIC, 0, 7) == ([], 7)
    assert decode_fetch(b"", TOPIC, 0, 7) == ([], 7)


# --- corruption --------------------------------------------------------------


def _flip(batch: bytes, at: int) -> bytes:
    b = bytearray(batch)
    b[at] ^= 0x01
    return bytes(b)


@pytest.mark.parametrize("codec", CODEC_NAMES)
def test_a_crc_failure_raises_with_the_batches_before_it(codec: str) -> None:
    good = build_batch([b"a", b"b"], base_offset=0, compression=codec, timestamp=1)
    bad = _flip(build_batch([b"c"], base_offset=2, compression=codec, timestamp=1), -1)
    with pytest.raises(CorruptRecordError, match="CRC") as info:
        decode_fetch(good + bad + good, TOPIC, 0, 0)
    assert isinstance(info.value, CorruptFetchError)
    assert [m.value() for m in info.value.messages] == [b"a", b"b"] and info.value.next_offset == 2
    with pytest.raises(CorruptFetchError) as info:
        decode_fetch(bad, TOPIC, 0, 2)
    assert info.value.messages == [] and info.value.next_offset == 2


@pytest.mark.parametrize(
    "damage",
    [
        lambda b: reseal(b, record_count=4),  # one record short
        lambda b: reseal(b, record_count=2),  # bytes left over
        lambda b: _flip(b, 16),  # magic
        lambda b: reseal(b[:-1] + b"\x07"),  # the last record's header count
    ],
    ids=["count-high", "count-low", "magic", "record-bytes"],
)
def test_malformed_batches_raise(damage: Any) -> None:
    good = build_batch([b"a"], base_offset=0, timestamp=1)
    bad = damage(build_batch([b"x" * 20, b"y", b"z"], base_offset=1, timestamp=1))
    with pytest.raises(CorruptFetchError) as info:
        decode_fetch(good + bad, TOPIC, 0, 0)
    assert [m.value() for m in info.value.messages] == [b"a"] and info.value.next_offset == 1


def test_a_compressed_batch_that_does_not_decompress_raises() -> None:
    good = build_batch([b"a"], base_offset=0, timestamp=1)
    bad = bytearray(build_batch([b"x" * 200] * 5, base_offset=1, compression="lz4", timestamp=1))
    bad[80:90] = b"\xff" * 10
    with pytest.raises(CorruptFetchError) as info:
        decode_fetch(good + reseal(bytes(bad)), TOPIC, 0, 0)
    assert [m.value() for m in info.value.messages] == [b"a"]


def test_a_header_name_that_is_not_utf8_is_corrupt() -> None:
    for codec in ("none", "zstd"):
        batch = build_batch([Record(value=b"v", headers=[(b"\xff\xfe", b"x")])], compression=codec)  # type: ignore[list-item]
        with pytest.raises(CorruptFetchError):
            decode_fetch(batch, TOPIC, 0, 0)


def test_decoder_arguments_are_checked() -> None:
    section = memoryview(build_batch([b"a" * 10, b"b" * 10], timestamp=1))[61:]
    decode = _speedups.decode_messages
    assert [m.value() for m in decode(section, 2, 1, 0, 1, False, 1, 1, TOPIC, 0, 1)] == [b"b" * 10]
    with pytest.raises(ValueError, match="does not fit"):
        decode(section, 10**6, 1, 0, 1, False, 1, 1, TOPIC, 0, 0)
    with pytest.raises(ValueError, match="malformed"):
        decode(section, 3, 2, 0, 1, False, 1, 1, TOPIC, 0, 0)
    with pytest.raises(ValueError, match="left over"):
        decode(section, 1, 1, 0, 1, False, 1, 1, TOPIC, 0, 0)
    with pytest.raises(ValueError, match="malformed"):
        decode(section, 2, 0, 0, 1, False, 1, 1, TOPIC, 0, 0)  # delta past the last offset delta
    with pytest.raises(TypeError):
        decode(section, 2, 1, 0, 1, False, 1, 1, b"topic", 0, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="outside"):
        _speedups.decode_fetch_batches(b"abc", 4, TOPIC, 0, 0)


# --- property ----------------------------------------------------------------

_records = st.lists(
    st.builds(
        Record,
        key=st.none() | st.binary(max_size=24),
        value=st.none() | st.binary(max_size=300),
        headers=st.lists(st.tuples(st.text(max_size=6), st.none() | st.binary(max_size=8)), max_size=3),
        timestamp=st.none() | st.integers(-(2**40), 2**41),
    ),
    min_size=1,
    max_size=25,
)
_batches = st.lists(
    st.tuples(_records, st.sampled_from(CODEC_NAMES), st.booleans(), st.booleans()), min_size=1, max_size=6
)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_batches, st.integers(0, 200), st.integers(0, 10**6), st.integers(0, 10**9))
def test_decode_fetch_equals_the_oracle(
    batches: list[tuple[list[Record], str, bool, bool]], fetch_offset: int, start: int, cut: int
) -> None:
    parts, offset = [], start
    for records, codec, append_time, then_control in batches:
        batch = build_batch(records, base_offset=offset, compression=codec, timestamp=1_700_000_000_000)
        parts.append(log_append(batch) if append_time else batch)
        offset += len(records)
        if then_control:
            parts.append(control_batch(offset))
            offset += 1
    buf = b"".join(parts)
    check(buf[: len(buf) - cut % len(parts[-1])], start + fetch_offset)


# --- leaks -------------------------------------------------------------------


def test_decoding_leaks_no_references_and_no_memory() -> None:
    topic = "".join(["leak-", "check"])  # a str of its own, not an interned constant
    whole = b"".join(
        [
            build_batch([b"a", (b"k", b"b"), (b"", None)], base_offset=0, timestamp=1),
            build_batch([Record(key=b"h", value=b"c", headers=[("x", b"1"), ("y", None)])], base_offset=3),
            control_batch(4),
        ]
    )
    plain = whole + build_batch([b"d"], base_offset=5, timestamp=1)[:-3]  # a torn tail
    baseline = sys.getrefcount(topic)
    for _ in range(100_000):
        messages, _next = decode_fetch(plain, topic, 0, 1)
    assert len(messages) == 3 and sys.getrefcount(topic) == baseline + 3
    del messages
    assert sys.getrefcount(topic) == baseline

    compressed = build_batch([b"z"] * 3, base_offset=6, compression="lz4") + build_batch(
        [b"y"], base_offset=9
    )
    corrupt = whole + _flip(build_batch([b"e"], base_offset=5), -1)

    def rounds(n: int) -> None:
        for _ in range(n):
            decode_fetch(whole + compressed, topic, 0, 0)
            with pytest.raises(CorruptFetchError):
                decode_fetch(corrupt, topic, 0, 0)

    rounds(1_000)  # warm caches and free lists
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        rounds(20_000)
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert grown < 64 * 1024, f"{grown} bytes still allocated after 20,000 rounds"
    assert sys.getrefcount(topic) == baseline
