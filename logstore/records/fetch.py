"""A Fetch response's record set, decoded in C into :class:`Message` objects.

The consumer's hot path: :func:`decode_fetch` turns the ``records`` bytes of
one partition of a Fetch response into the list ``consume()`` hands out,
with no per-record Python. A run of uncompressed batches decodes in one C
call (``_speedups.decode_fetch_batches``: header checks, CRC-32C and records,
batch by batch); a compressed batch costs one Python step, to decompress it
(:meth:`RecordBatch.records_section`), then its records decode in C too.

>>> from logstore.records import build_batch
>>> records = build_batch([b"a", (b"k", b"b")], base_offset=7, timestamp=1000)
>>> messages, next_offset = decode_fetch(records, "orders", 0, 8)
>>> [(m.offset(), m.key(), m.value(), m.timestamp()) for m in messages], next_offset
([(8, b'k', b'b', (1, 1000))], 9)
"""

from __future__ import annotations

from logstore._native import lib
from logstore._speedups import STOP_COMPRESSED, Message, decode_fetch_batches, decode_messages
from logstore.errors import CorruptRecordError
from logstore.records.batch import HEADER_SIZE, RecordBatch

_ATTR_LOG_APPEND_TIME = 0x08
_TIMESTAMP_CREATE_TIME = 1
_TIMESTAMP_LOG_APPEND_TIME = 2
_WHY = {
    lib.LS_ERR_CORRUPT: "is malformed (sizes, magic, varints or records)",
    lib.LS_ERR_CRC: "failed its CRC-32C check",
}


class CorruptFetchError(CorruptRecordError):
    """A batch of a Fetch response failed its checks.

    ``messages`` holds the messages of the whole batches before it and
    ``next_offset`` the offset after them (``decode_fetch``'s result had the
    record set ended at the bad batch): a consumer hands those out, then
    reports the error at ``next_offset`` instead of re-fetching it forever.
    """

    def __init__(self, reason: str, messages: list[Message], next_offset: int) -> None:
        super().__init__(reason)
        self.messages = messages
        self.next_offset = next_offset


def decode_fetch(
    records: bytes | bytearray | memoryview | None, topic: str, partition: int, fetch_offset: int
) -> tuple[list[Message], int]:
    """The messages of every whole batch in ``records``, and the next fetch offset.

    Records below ``fetch_offset`` are left out (a Fetch may return a batch
    that starts before it); control batches are skipped but consumed. A
    truncated last batch, normal in Fetch responses, ends the walk quietly.
    The next offset is the last whole batch's last offset + 1 (the highest, if
    offsets ever went backwards; never below ``fetch_offset``), or
    ``fetch_offset`` when no batch is whole. Timestamps
    are ``(1, ms)`` (create time) or ``(2, ms)`` (log append time).

    A batch that fails its CRC-32C or structural checks raises
    :class:`CorruptFetchError` (a :class:`~logstore.errors.CorruptRecordError`)
    carrying the messages before it.
    """
    if not records:
        return [], fetch_offset
    view = memoryview(records).cast("B")
    messages: list[Message] = []
    position, next_offset, stop = 0, fetch_offset, lib.LS_OK
    # Each pass either ends the walk or consumes a compressed batch (>= 61 bytes).
    for _ in range(len(view) // HEADER_SIZE + 1):
        run, position, run_next, stop = decode_fetch_batches(view, position, topic, partition, fetch_offset)
        if messages:
            messages += run
        else:
            messages = run  # the common case: one run, no copy
        next_offset = max(next_offset, run_next)
        if stop != STOP_COMPRESSED:
            break
        # The walker checked this batch's header and CRC; it is a data batch.
        batch = RecordBatch(view[position:])
        try:
            messages += _decode_compressed(batch, topic, partition, fetch_offset)
        except CorruptRecordError as exc:
            raise CorruptFetchError(f"{topic} [{partition}]: {exc}", messages, next_offset) from exc
        next_offset = max(next_offset, batch.next_offset)
        position += batch.size
    if stop not in (lib.LS_OK, lib.LS_ERR_INCOMPLETE):
        why = _WHY.get(stop, f"failed its checks (code {stop})")
        raise CorruptFetchError(
            f"{topic} [{partition}]: the record batch at byte {position} of the fetch {why}",
            messages,
            next_offset,
        )
    return messages, next_offset


def _decode_compressed(batch: RecordBatch, topic: str, partition: int, min_offset: int) -> list[Message]:
    log_append = bool(batch.attributes & _ATTR_LOG_APPEND_TIME)
    section = batch.records_section()  # CorruptRecordError when it does not decompress
    # Records that do not parse raise RecordDecodeError (a CorruptRecordError)
    # naming the record and the batch's base offset.
    return decode_messages(
        section,
        batch.record_count,
        batch.last_offset_delta,
        batch.base_offset,
        batch.base_timestamp,
        log_append,
        batch.max_timestamp,
        _TIMESTAMP_LOG_APPEND_TIME if log_append else _TIMESTAMP_CREATE_TIME,
        topic,
        partition,
        min_offset,
    )
