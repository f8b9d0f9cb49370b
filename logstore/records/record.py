"""One record: what a producer hands in and what a reader gets back."""

from __future__ import annotations

from collections.abc import Sequence

Header = tuple[str, bytes | None]


class Record:
    """A record of a v2 batch.

    ``key`` and ``value`` are bytes or None (null); ``headers`` is a sequence
    of ``(str, bytes | None)`` pairs; ``timestamp`` is milliseconds since the
    epoch (None: the batch's time). ``offset`` is -1 until the record is
    stored; records read back carry their offset.

    >>> r = Record(key=b"k", value=b"v", headers=[("h", b"1")], timestamp=5)
    >>> (r.key, r.value, r.headers, r.timestamp, r.offset)
    (b'k', b'v', (('h', b'1'),), 5, -1)
    """

    __slots__ = ("headers", "key", "offset", "timestamp", "value")

    def __init__(
        self,
        key: bytes | None = None,
        value: bytes | None = None,
        headers: Sequence[Header] = (),
        timestamp: int | None = None,
        offset: int = -1,
    ) -> None:
        self.key = key
        self.value = value
        self.headers = headers if type(headers) is tuple else tuple(headers)
        self.timestamp = timestamp
        self.offset = offset

    def _fields(self) -> tuple[object, ...]:
        return (self.offset, self.timestamp, self.key, self.value, self.headers)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Record):
            return NotImplemented
        return self._fields() == other._fields()

    def __hash__(self) -> int:
        return hash(self._fields())

    def __repr__(self) -> str:
        return (
            f"Record(offset={self.offset}, timestamp={self.timestamp}, key={self.key!r}, "
            f"value={self.value!r}, headers={self.headers!r})"
        )
