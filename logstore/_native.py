"""The native core, loaded as ``logstore._native``.

A thin layer over the cffi module ``logstore._native_c``: it re-exports
``ffi`` and ``lib`` and maps the core's return codes to exceptions with hints.
The C side releases the GIL for every call (cffi's default).
"""

from __future__ import annotations

from typing import Any, NoReturn

from logstore import errors

try:
    from logstore._native_c import ffi, lib
except ImportError as exc:  # pragma: no cover - only on a broken install
    raise ImportError(
        "logstore's native core is not built: run `make test` (or `pip install -e .`) "
        "in the repository, which compiles native/ with gcc"
    ) from exc

__all__ = ["check", "copy_mapped", "crc32c", "ffi", "lib", "raise_for"]

# A bad block under a memory map is a SIGBUS; the guard makes the reads of segments and indexes
# answer LS_ERR_IO instead (native/guard.c). Once per process; faults elsewhere go where they went.
if lib.ls_guard_install() != lib.LS_OK:  # pragma: no cover - sigaction does not fail for SIGBUS
    raise ImportError("logstore's native core could not install its SIGBUS guard (sigaction failed)")

_MESSAGES: dict[int, tuple[type[errors.LogstoreError], str]] = {
    lib.LS_ERR_INCOMPLETE: (
        errors.CorruptRecordError,
        "the buffer ends inside a record batch (torn or truncated)",
    ),
    lib.LS_ERR_CORRUPT: (errors.CorruptRecordError, "a record batch is malformed (sizes, magic or varints)"),
    lib.LS_ERR_CRC: (errors.CorruptRecordError, "a record batch failed its CRC-32C check"),
    lib.LS_ERR_CAPACITY: (errors.NativeCapacityError, "an output buffer was too small; please report this"),
    lib.LS_ERR_ARGUMENT: (errors.InvalidArgumentError, "an argument is out of range"),
    lib.LS_ERR_NOT_FOUND: (errors.OffsetOutOfRangeError, "no batch holds the requested offset or timestamp"),
    lib.LS_ERR_OFFSET: (errors.CorruptRecordError, "batch offsets do not increase, or overflow the segment"),
    lib.LS_ERR_IO: (
        errors.MappedReadError,
        "a page of a memory-mapped file could not be read in (I/O error or the file cut short)",
    ),
    lib.LS_ERR_INVALID: (
        errors.InvalidRecordError,
        "a record batch breaks Kafka's rules for a producer's batch (record count, control, sequence)",
    ),
}


def raise_for(rc: int, context: str = "") -> NoReturn:
    """Raise the exception that native return code ``rc`` stands for."""
    cls, message = _MESSAGES.get(rc, (errors.LogstoreError, f"native error {rc}"))
    raise cls(f"{context}: {message}" if context else message)


def check(rc: int, context: str = "") -> None:
    """Raise unless ``rc`` is ``LS_OK``."""
    if rc != 0:
        raise_for(rc, context)


def copy_mapped(view: Any, context: str = "") -> bytearray:
    """A copy of ``view``, a view of a memory-mapped file: a page that cannot be read in raises
    :class:`~logstore.errors.MappedReadError` (an OSError) instead of killing the process."""
    size = len(view)
    out = bytearray(size)
    if size:
        check(lib.ls_copy(ffi.from_buffer(out), ffi.from_buffer(view), size), context)
    return out


def crc32c(data: Any, crc: int = 0) -> int:
    """CRC-32C of a bytes-like object, chainable like the ``crc32c`` package.

    >>> hex(crc32c(b"123456789"))
    '0xe3069283'
    """
    buf = ffi.from_buffer(data)
    return int(lib.ls_crc32c(crc, buf, len(buf)))


def arena_bytes(size: int, flags: int | None = None) -> memoryview:
    """``size`` writable bytes (> 0) in an anonymous mapping from the arena cache (arrow.c).

    Given back to the cache when the last view of it goes, so a repeated large
    read (a Fetch answer, a table's columns) reuses pages already faulted in
    instead of fresh ones. The bytes are not zeroed: write before reading.
    Raises MemoryError when the OS refuses the mapping.
    """
    chosen = lib.LS_ARENA_SMALL if flags is None else flags
    raw = lib.ls_arena_map(size, chosen)
    if raw == ffi.NULL:
        raise MemoryError(f"mapping {size} bytes failed")
    pointer = ffi.gc(raw, lambda p: lib.ls_arena_release(p, size, chosen))
    return memoryview(ffi.buffer(pointer, size))  # the buffer keeps the pointer alive
