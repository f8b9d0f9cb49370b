"""The one path every request takes: decode → quota → handle → encode → metrics.

Kafka's ``RequestChannel`` and ``KafkaApis.handle`` in one place. A frame
(the request without its size prefix) is decoded with its API's decoder (kio's,
or a hand-written one on the hot paths), handed to the API module's handler
with a :class:`~logstore.broker.context.RequestContext`, and its response
encoded as the frame's chunks. Authorization is the handlers' (per resource,
through ``security/operations.py``), as in Kafka.

Quotas plug in here and nowhere else (client_quotas.py's :class:`QuotaCharge`: the
handler's time, the Produce bytes, a consumer fetch's response bytes), and
every request is counted in the metrics, throttled or not.

A handler that returns a :class:`~logstore.broker.context.Deferred` has done
its ordered work; :meth:`Dispatcher.dispatch` then returns a task that waits,
encodes and counts, and the connection serves the next request meanwhile
(network/connection.py keeps the answers in request order).

Errors: an unknown API key, an unsupported version (ApiVersions excepted: it
answers UNSUPPORTED_VERSION, KIP-511) or a body that cannot be decoded raise
:class:`ProtocolError`, and the connection closes; an exception in a handler
propagates (the connection logs it and closes).
"""

from __future__ import annotations

import asyncio
import functools
import time
from collections.abc import Callable, Mapping
from typing import Any

from logstore.broker.api_definition import Api
from logstore.broker.context import Deferred, RequestContext, Services
from logstore.broker.metrics.broker_metrics import BrokerMetrics
from logstore.broker.quotas.client_quotas import ClientQuotas, QuotaCharge
from logstore.protocol import (
    API_VERSIONS_KEY,
    HEADER,
    Codec,
    ProtocolError,
    RequestHeader,
    codec,
    encode_response,
    parse_header,
)

# What dispatch returns: the response frame's chunks, None (nothing to send: acks=0), or a task
# that resolves to one of those once a deferred handler's wait is over.
Answer = list[Any] | None | asyncio.Task[list[Any] | None]


class Dispatcher:
    """Serves request frames with the API modules in ``apis`` (key -> :class:`Api`)."""

    __slots__ = ("_apis", "_metrics", "_quotas", "_services", "_unsupported")

    def __init__(
        self,
        services: Services,
        apis: Mapping[int, Api],
        quotas: ClientQuotas,
        metrics: BrokerMetrics,
        unsupported: Any,
    ) -> None:
        """``services``: what :attr:`RequestContext.broker` hands the handlers; ``unsupported``:
        ApiVersions' answer to a version it does not serve (correlation id -> chunks)."""
        self._services = services
        self._apis = apis
        self._quotas = quotas
        self._metrics = metrics
        self._unsupported = unsupported

    async def dispatch(self, frame: bytes | memoryview, connection: Any) -> Answer:
        """Serve one request frame on ``connection`` (see :data:`Answer`)."""
        started = time.perf_counter()
        api_key, version, correlation_id = HEADER.unpack_from(frame, 0)
        api = self._apis.get(api_key)
        if api is None:
            raise ProtocolError(f"unknown API key {api_key}")
        if not api.min_version <= version <= api.max_version:
            if api_key == API_VERSIONS_KEY:
                return self._unsupported(correlation_id)
            raise ProtocolError(
                f"{api.name} v{version} is not supported (this broker serves v{api.min_version}-v{api.max_version})"
            )
        codec_ = codec(api_key, version)
        header = parse_header(frame, codec_.flexible)
        try:
            if api.decode is not None:
                request, _ = api.decode(frame, header.body_offset, version)
            else:  # kio reads only read-only buffers
                readonly = frame if isinstance(frame, bytes) else frame.toreadonly()
                request, _ = codec_.read(readonly, header.body_offset)  # type: ignore[arg-type]
        except Exception as e:
            raise ProtocolError(
                f"cannot decode {api.name} v{version} from {header.client_id!r}: {e}"
            ) from None
        ctx = RequestContext(self._services, connection, header)
        charge = None
        if self._quotas.active:
            charge = self._quotas.charge(
                connection.principal.name, header.client_id or "", api_key, version, request, len(frame)
            )
        if charge is None:
            response = await api.handle(ctx, request)
        else:
            response = await charge.timed(api.handle(ctx, request))
        if type(response) is Deferred:
            answer = functools.partial(self._answer, api, codec_, header, request, charge, connection, started)
            return asyncio.get_running_loop().create_task(_finish(response, charge, answer))
        return self._answer(api, codec_, header, request, charge, connection, started, response)

    def _answer(
        self,
        api: Api,
        codec_: Codec,
        header: RequestHeader,
        request: Any,
        charge: QuotaCharge | None,
        connection: Any,
        started: float,
        response: Any,
    ) -> list[Any] | None:
        """Encode ``response`` (throttled under a quota) and count the request."""
        chunks = None
        if charge is not None:
            response = charge.response(response, codec_.flexible)
        if response is not None:
            chunks = encode_response(
                codec_, header.correlation_id, response, header_v0=api.key == API_VERSIONS_KEY
            )
            if charge is not None:
                chunks = charge.chunks(chunks, codec_, request, header.correlation_id)
        if charge is not None and charge.throttle_ms:
            connection.throttle(charge.throttle_ms, charge.client_throttles)
        self._metrics.observe(api, header.api_version, time.perf_counter() - started, response)
        return chunks


async def _finish(
    deferred: Deferred, charge: QuotaCharge | None, answer: Callable[[Any], list[Any] | None]
) -> list[Any] | None:
    """A deferred handler's wait, then its answer as :meth:`Dispatcher.dispatch` would have made it."""
    response = await (deferred.waiting if charge is None else charge.timed(deferred.waiting))
    return answer(response)
