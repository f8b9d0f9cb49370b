"""One record: what a producer hands in and what a reader gets back.

``Record`` is implemented in C (``logstore._speedups``) so that a read can
build millions per second; it behaves like a class with ``__slots__``.

>>> r = Record(key=b"k", value=b"v", headers=[("h", b"1")], timestamp=5)
>>> (r.key, r.value, r.headers, r.timestamp, r.offset)
(b'k', b'v', (('h', b'1'),), 5, -1)
>>> r == Record(key=b"k", value=b"v", headers=(("h", b"1"),), timestamp=5)
True
"""

from __future__ import annotations

from logstore._speedups import Record

Header = tuple[str, bytes | None]

__all__ = ["Header", "Record"]
