from collections.abc import Sequence

def encode_plain(
    values: Sequence[object],
    base_offset: int,
    timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    partition_leader_epoch: int,
    attributes: int,
) -> bytes | None: ...
