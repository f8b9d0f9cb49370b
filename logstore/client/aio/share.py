"""``AIOShareConsumer``: the place of share groups (KIP-932) for asyncio. Not built yet.

Share groups are being built on the broker and in the synchronous client
(``logstore.client.share``: ``ShareConsumer``, issue 25 points 1-2). When the synchronous
``ShareConsumer`` exists, this class wraps it the way :class:`~logstore.client.aio.AIOConsumer`
wraps ``Consumer``, with nothing new underneath:

- ``await poll(timeout)`` / ``await consume(n, timeout)`` / ``async for``: one non-waiting step
  of the ShareConsumer on the loop's thread (``consume(n, 0)``), and between steps a future
  the client's threads resolve when a ShareFetch response lands (its ``on_wake`` hook, bridged
  by :class:`~logstore.client.aio.bridge.Waker`); records are taken and handed out with no
  ``await`` in between, so a cancelled call takes none (they stay acquired, and the next call
  returns them);
- ``acknowledge(message, type)`` is local (as the sync one), and ``await commit()`` (Java's
  ``commitSync``) bridges the ShareAcknowledge request's future: cancelled, the request in
  flight completes, and the acknowledgements are then all applied or none;
- ``close()`` acknowledges what implicit acknowledgement requires, then leaves the group.

Until then, making one raises NotImplementedError, so that code written for it fails clearly.
"""

from __future__ import annotations

from typing import Any


class AIOShareConsumer:
    """A share-group consumer for asyncio (KIP-932): not available yet (see the module docstring)."""

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        raise NotImplementedError(
            "AIOShareConsumer waits for logstore.client's ShareConsumer (share groups, issue 25); "
            "use AIOConsumer with a consumer group meanwhile"
        )
