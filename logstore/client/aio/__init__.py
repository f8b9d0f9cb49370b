"""logstore's client for asyncio: ``AIOProducer``, ``AIOConsumer``, ``AIOAdminClient``.

Shaped like ``confluent_kafka.aio`` (2.13+), with aiokafka's conveniences
(``async for``, ``getmany``, ``send`` returning a delivery future):

>>> from logstore.client.aio import AIOProducer, AIOConsumer, AIOAdminClient   # doctest: +SKIP

They run over the synchronous client (``logstore.client``) on the event loop's own thread:
no thread pool and no thread per call. The client's threads (the producer's Sender, the
connections' readers, the admin workers) settle work as they always do, and the loop is woken
for it (:mod:`logstore.client.aio.bridge`). Over TCP and in-process (``embedded:///path``);
under asyncio's loops and uvloop. See docs/client.md, "asyncio".

``AIOShareConsumer`` (share groups, KIP-932) has its place in :mod:`logstore.client.aio.share`.
"""

from logstore.client.aio.admin import AIOAdminClient
from logstore.client.aio.consumer import AIOConsumer
from logstore.client.aio.producer import AIOProducer
from logstore.client.aio.share import AIOShareConsumer

__all__ = ["AIOAdminClient", "AIOConsumer", "AIOProducer", "AIOShareConsumer"]
