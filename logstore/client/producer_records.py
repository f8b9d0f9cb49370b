"""The producer's records as bytes, and back as Messages.

``produce()`` takes keys and values as bytes or str (utf-8; other buffers are copied to
bytes), or anything its ``key.serializer`` / ``value.serializer`` turns into those
(:func:`serialized`: a serializer that raises is ``_INVALID_ARG``); headers as a list of
(str, bytes | str | None) pairs or a dict (:func:`header_pairs`). Anything else is
TypeError. ``produce_batch`` measures its values and keys in one pass
(:func:`byte_lengths`). A delivery report's :class:`~logstore.client.types.Message` is
rebuilt from its batch (:func:`delivery_message`): key, value, headers, timestamp
(LogAppendTime when the broker set it) and offset.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from logstore.client.accumulator import ENQUEUE_TIME, ProducerBatch
from logstore.client.errors import KafkaError, KafkaException, local
from logstore.client.types import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME, Message

Headers = Sequence[tuple[str, Any]] | Mapping[str, Any] | None


def to_bytes(value: Any, what: str) -> bytes:
    """``value`` (str as utf-8, any buffer) as bytes; TypeError for anything else."""
    if isinstance(value, str):
        return value.encode("utf-8")
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, bytes):
        return bytes(value)
    raise TypeError(
        f"{what} must be bytes or str (or configure {what}.serializer), not {type(value).__name__}"
    )


def _len_or_zero(value: bytes | None) -> int:
    return 0 if value is None else len(value)


def byte_lengths(items: list[Any], what: str) -> np.ndarray[Any, np.dtype[np.int64]]:
    """The byte lengths of ``items`` (None: 0), converting str and other buffers to bytes
    in place. All bytes: two passes in C (``map(type)``, ``map(len)``)."""
    kinds = set(map(type, items))
    if kinds == {bytes}:
        return np.fromiter(map(len, items), dtype=np.int64, count=len(items))
    if kinds - {bytes, type(None)}:
        items[:] = [v if v is None or v.__class__ is bytes else to_bytes(v, what) for v in items]
    return np.fromiter(map(_len_or_zero, items), dtype=np.int64, count=len(items))


def serialized(serializer: Callable[[Any], Any], obj: Any, what: str) -> bytes | None:
    """``serializer(obj)`` as bytes (or None); KafkaException ``_INVALID_ARG`` if it raises."""
    try:
        out = serializer(obj)
    except Exception as e:
        raise KafkaException(local("_INVALID_ARG", f"{what}.serializer failed: {e!r}")) from e
    if out is None or out.__class__ is bytes:
        return out
    return to_bytes(out, what)


def header_pairs(headers: Headers) -> list[tuple[str, bytes | None]] | None:
    """``headers`` as (name, bytes or None) pairs, in order; None for None."""
    if headers is None:
        return None
    pairs = headers.items() if isinstance(headers, Mapping) else headers
    out = []
    for pair in pairs:
        try:
            name, data = pair
        except (TypeError, ValueError):
            raise TypeError(f"headers must be (str, bytes|str|None) pairs or a dict, not {pair!r}") from None
        if not isinstance(name, str):
            raise TypeError(f"a header name must be a str, not {type(name).__name__}")
        if data is not None and data.__class__ is not bytes:
            data = to_bytes(data, f"header {name!r}")
        out.append((name, data))
    return out


def delivery_message(
    batch: ProducerBatch, index: int, error: KafkaError | None, base_offset: int, append_time: int
) -> Message:
    """The ``index``-th record of a delivered (or failed) ``batch`` as its delivery report's Message."""
    item = batch.records[index]
    headers = None
    stamp = batch.timestamp
    if item is None or item.__class__ is bytes:
        key, value = None, item
    elif item.__class__ is tuple:
        key, value = item
    else:
        key, value = item.key, item.value
        headers = list(item.headers) or None
        if item.timestamp is not None:
            stamp = item.timestamp
    timestamp = (
        (TIMESTAMP_LOG_APPEND_TIME, append_time) if append_time >= 0 else (TIMESTAMP_CREATE_TIME, stamp)
    )
    offset = base_offset + index if base_offset >= 0 else -1
    times = batch.times
    latency = (
        batch.done_at - ENQUEUE_TIME.unpack_from(times, index * ENQUEUE_TIME.size)[0]
        if times is not None and len(times) >= (index + 1) * ENQUEUE_TIME.size
        else None
    )
    return Message(batch.topic, batch.partition, offset, key, value, timestamp, headers, error, latency)
