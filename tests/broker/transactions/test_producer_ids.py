"""ProducerIds (broker/transactions/producer_ids.py, Kafka's ProducerIdManager of one broker): ids from blocks
reserved on disk, never handed out twice, not even across a restart."""

from __future__ import annotations

import pytest

from logstore.broker.transactions.producer_ids import ProducerIds

pytestmark = pytest.mark.unit


def test_producer_ids_are_never_reused(tmp_path: object) -> None:
    ids = ProducerIds(str(tmp_path))
    first = [ids.allocate() for _ in range(1500)]
    assert first == list(range(1500))
    again = ProducerIds(str(tmp_path))  # a restart skips the rest of the reserved block
    assert again.allocate() == 2000
