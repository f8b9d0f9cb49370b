"""Producer ids (KIP-98): ``ProducerIds`` hands out producer ids that are never reused.

It reserves blocks of ids in ``producer-id-block`` (written tmp + fsync +
rename before any id of the block is given out), so a restart continues past
the block; in a cluster, the blocks come from ZooKeeper. Each partition's
producer state (epochs, sequences, transactions) is storage's:
:mod:`logstore.storage.producer_state`.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable

from logstore.storage.checkpoints import write_atomically

ID_BLOCK = 1000


class ProducerIds:
    """Producer ids unique across restarts: reserved in durable blocks of 1,000.

    Alone, a block is reserved in the data directory's ``producer-id-block``
    file; in a cluster, from the cluster (:meth:`use_blocks_from`: ZooKeeper's
    ``/latest_producer_id_block``), so no two brokers hand out one id. A
    reservation blocks the caller (a file write, or a ZooKeeper round trip)
    once per 1,000 ids.
    """

    def __init__(self, data_dir: str) -> None:
        self._path = os.path.join(data_dir, "producer-id-block")
        self._lock = threading.Lock()
        self._next = self._block_end = self._read()
        self._reserve: Callable[[int], tuple[int, int]] | None = None

    def use_blocks_from(self, reserve: Callable[[int], tuple[int, int]]) -> None:
        """Take blocks from ``reserve(size) -> (first, last)`` (the cluster's), from the next id on."""
        with self._lock:
            self._reserve = reserve
            self._next = self._block_end = 0

    def _read(self) -> int:
        with contextlib.suppress(FileNotFoundError, ValueError), open(self._path, encoding="ascii") as f:
            return int(f.read().strip())
        return 0

    def allocate(self) -> int:
        with self._lock:
            if self._next >= self._block_end:
                if self._reserve is not None:
                    first, last = self._reserve(ID_BLOCK)
                    self._next, self._block_end = first, last + 1
                else:
                    end = self._next + ID_BLOCK
                    write_atomically(self._path, f"{end}\n".encode("ascii"))
                    self._block_end = end
            producer_id = self._next
            self._next += 1
            return producer_id
