"""Requests from this broker to another (Kafka's inter-broker ``NetworkClient``).

A :class:`BrokerChannel` is one asyncio TCP connection to one broker, with
one request in flight at a time (a replica fetcher sends its next fetch only
after the last answer, as Kafka's does). It opens on first use and again
after any failure; a request that fails raises :class:`ChannelError` and the
caller backs off (``replica.fetch.backoff.ms``) before trying again.

Requests are dicts of kio field values, encoded and decoded by the same
codecs the client uses (:mod:`logstore.protocol.requests`), so the broker
speaks to its peers exactly as any Kafka client speaks to it.
"""

from __future__ import annotations

import asyncio
import itertools
import struct
from typing import Any

from logstore.protocol.requests import ResponseError, decode_response, encode_request

_SIZE = struct.Struct(">i")
_FRAME_MAX = 256 * 1024 * 1024  # a fetch answer is bounded by replica.fetch.response.max.bytes


class ChannelError(Exception):
    """A request to another broker failed (connection refused or lost, timeout, bad answer)."""


class BrokerChannel:
    """One connection to broker ``node_id`` (see the module doc). Not thread-safe: the event loop's."""

    def __init__(self, node_id: int, host: str, port: int, client_id: str) -> None:
        self.node_id = node_id
        self.host = host
        self.port = port
        self.client_id = client_id
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._lock = asyncio.Lock()
        self._correlation = itertools.count(1)

    def __repr__(self) -> str:
        return f"BrokerChannel(broker {self.node_id} at {self.host}:{self.port})"

    async def request(self, api_key: int, version: int, fields: dict[str, Any], timeout: float) -> Any:
        """Send one request and return its decoded response; ChannelError on any failure."""
        async with self._lock:
            try:
                return await asyncio.wait_for(self._round_trip(api_key, version, fields), timeout)
            except (TimeoutError, OSError, asyncio.IncompleteReadError, ResponseError) as e:
                self.close()
                raise ChannelError(f"{self}: API {api_key} v{version} failed: {e!r}") from None

    async def _round_trip(self, api_key: int, version: int, fields: dict[str, Any]) -> Any:
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        correlation = next(self._correlation)
        self._writer.write(encode_request(api_key, version, correlation, self.client_id, fields))
        await self._writer.drain()
        (size,) = _SIZE.unpack(await self._reader.readexactly(4))
        if not 4 <= size <= _FRAME_MAX:
            raise OSError(f"answer of {size} bytes is outside [4, {_FRAME_MAX}]")
        frame = await self._reader.readexactly(size)
        (answered,) = _SIZE.unpack_from(frame, 0)
        if answered != correlation:
            raise OSError(f"answer to request {answered} where {correlation} was expected")
        return decode_response(api_key, version, frame, repr(self))

    def close(self) -> None:
        """Drop the connection (the next request opens a new one). Idempotent."""
        if self._writer is not None:
            self._writer.close()
        self._reader = self._writer = None
