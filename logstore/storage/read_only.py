"""A data directory opened read-only: read and tail its partitions from any process, no lock, no socket.

A process that only reads need not reach the process serving a store (the
embedded store's Unix socket, docs/embedded.md) nor take its lock: it reads
the segment files, beside whoever writes them, through
:class:`~logstore.storage.partition_files.PartitionFiles` (whose module says
how the writer's concurrency is met: sealed segments mapped, the active one
read with ``pread``, only whole batches returned).

    >>> import tempfile
    >>> from logstore.storage.store import Store
    >>> data = tempfile.mkdtemp()
    >>> with Store(data, scheduler=False) as store:
    ...     store.create_topic("events")
    ...     _ = store.log("events").append([b"a", b"b"])
    ...     with ReadOnlyStore(data) as reader:  # while the Store has the directory
    ...         [m.value() for m in reader.tail("events", 0, timeout=0)]
    [b'a', b'b']

What a reader sees is read_uncommitted: every whole batch written, records of
open or aborted transactions included (control batches are skipped). On a
single node the log end is the high watermark, so nothing shown can be taken
back, except by a crash of the writing process's machine before an fsync
(``flush.*``); a killed process loses nothing the kernel has.

Not thread-safe: one ReadOnlyStore per reading thread (a PartitionFiles each).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

from logstore.errors import InvalidArgumentError
from logstore.records.fetch import decode_fetch
from logstore.storage.partition_files import PartitionFiles, list_topics

READ_BYTES = 1 << 20


class ReadOnlyStore:
    """The topics of a data directory, read from their files (see the module's docstring)."""

    def __init__(self, data_dir: str) -> None:
        self.data_dir = data_dir
        list_topics(data_dir)  # fails now, saying why, if this is not a data directory
        self._files: dict[tuple[str, int], PartitionFiles] = {}

    def topics(self) -> dict[str, int]:
        """Topic -> partition count, as the directory has them now."""
        return list_topics(self.data_dir)

    def _partition(self, topic: str, partition: int) -> PartitionFiles:
        files = self._files.get((topic, partition))
        if files is None:
            files = self._files[(topic, partition)] = PartitionFiles(self.data_dir, topic, partition)
        return files

    def start_offset(self, topic: str, partition: int = 0) -> int:
        files = self._partition(topic, partition)
        files.refresh()
        return files.log_start_offset

    def end_offset(self, topic: str, partition: int = 0) -> int:
        """The offset after the last whole batch written."""
        return self._partition(topic, partition).end_offset()

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int = READ_BYTES
    ) -> tuple[list[Any], int]:
        """The messages from ``offset`` (about ``max_bytes`` of batches; at least one whole batch
        when there is one) and the offset to read from next. Below the log start:
        :class:`~logstore.errors.OffsetGoneError`."""
        view = self._partition(topic, partition).read(offset, max_bytes)
        if view is None:
            return [], offset
        return decode_fetch(view, topic, partition, offset)

    def tail(
        self,
        topic: str,
        partition: int = 0,
        offset: int = 0,
        *,
        timeout: float | None = None,
        poll_interval: float = 0.05,
    ) -> Iterator[Any]:
        """Every message from ``offset`` on, as it is written: when the end is reached, the files
        are looked at again every ``poll_interval`` seconds; the iteration ends once nothing new
        has come for ``timeout`` seconds (None: never; 0: at the end)."""
        if poll_interval <= 0:
            raise InvalidArgumentError(f"poll_interval must be > 0, not {poll_interval}")
        quiet_since = time.monotonic()
        while True:
            messages, offset = self.read(topic, partition, offset)
            if messages:
                yield from messages
                quiet_since = time.monotonic()
                continue
            if timeout is not None and time.monotonic() - quiet_since >= timeout:
                return
            time.sleep(poll_interval)

    def close(self) -> None:
        for files in self._files.values():
            files.close()
        self._files.clear()

    def __enter__(self) -> ReadOnlyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
