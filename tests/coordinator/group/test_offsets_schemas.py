"""The ``__consumer_offsets`` keys and values against bytes computed by hand from Kafka's JSON schemas."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from logstore.coordinator.group.offsets_schemas import (
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataValue,
    OffsetCommitKey,
    OffsetCommitValue,
    UnknownKeyError,
    decode_key,
    group_metadata_record,
    offset_commit_record,
)
from logstore.coordinator.record_codec import OffsetsSchemaError

pytestmark = pytest.mark.unit


def h(text: str) -> bytes:
    """Hex with spaces and ``|`` separators, for readable expected bytes."""
    return bytes.fromhex(text.replace("|", " "))


# -- keys ------------------------------------------------------------------------

OFFSET_KEY = h("0001 | 0005 67726f7570 | 0005 746f706963 | 00000003")  # v1, "group", "topic", 3
GROUP_KEY = h("0002 | 0005 67726f7570")  # v2, "group"


def test_offset_commit_key_bytes() -> None:
    key = OffsetCommitKey("group", "topic", 3)
    assert key.encode() == OFFSET_KEY
    assert decode_key(OFFSET_KEY) == key


def test_legacy_offset_commit_key_version_0_reads_the_same() -> None:
    assert decode_key(b"\x00\x00" + OFFSET_KEY[2:]) == OffsetCommitKey("group", "topic", 3)
    assert OffsetCommitKey("group", "topic", 3).encode(version=0) == b"\x00\x00" + OFFSET_KEY[2:]


def test_group_metadata_key_bytes() -> None:
    assert GroupMetadataKey("group").encode() == GROUP_KEY
    assert decode_key(GROUP_KEY) == GroupMetadataKey("group")


def test_other_record_types_and_short_keys() -> None:
    with pytest.raises(UnknownKeyError):
        decode_key(h("0003 | 0001 67"))  # ConsumerGroupMetadataKey (KIP-848)
    with pytest.raises(OffsetsSchemaError):
        decode_key(OFFSET_KEY[:-1])
    with pytest.raises(OffsetsSchemaError):
        decode_key(b"\x00")


# -- offset commit values -------------------------------------------------------------

# v3: offset 100, leader epoch 7, metadata "m", commit timestamp 1_700_000_000_000 (0x18BCFE56800)
OFFSET_V3 = h("0003 | 0000000000000064 | 00000007 | 0001 6d | 0000018bcfe56800")


def test_offset_commit_value_v3_bytes() -> None:
    value = OffsetCommitValue(100, 7, "m", 1_700_000_000_000)
    assert value.encode() == OFFSET_V3
    assert OffsetCommitValue.decode(OFFSET_V3) == value


def test_offset_commit_value_old_versions() -> None:
    # v0 and v2: offset, metadata, commit timestamp; no leader epoch.
    for version in (0, 2):
        data = h(f"000{version} | 0000000000000005 | 0000 | 00000000000003e8")
        assert OffsetCommitValue.decode(data) == OffsetCommitValue(5, -1, "", 1000, None)
        assert OffsetCommitValue(5, 9, "", 1000).encode(version) == data
    # v1 carries the expire timestamp.
    v1 = h("0001 | 0000000000000005 | 0002 6162 | 00000000000003e8 | 00000000000007d0")
    assert OffsetCommitValue.decode(v1) == OffsetCommitValue(5, -1, "ab", 1000, 2000)
    no_expiry = h("0001 | 0000000000000005 | 0000 | 00000000000003e8 | ffffffffffffffff")
    assert OffsetCommitValue.decode(no_expiry).expire_timestamp is None


def test_offset_commit_value_v4_is_flexible() -> None:
    # compact string "" is the varint 1; the tagged-field section is one zero byte.
    data = h("0004 | 0000000000000001 | ffffffff | 01 | 0000000000000002 | 00")
    assert OffsetCommitValue.decode(data) == OffsetCommitValue(1, -1, "", 2)
    assert OffsetCommitValue(1, -1, "", 2).encode(4) == data


def test_offset_commit_value_errors() -> None:
    with pytest.raises(OffsetsSchemaError):
        OffsetCommitValue.decode(h("0005 | 0000000000000001"))
    with pytest.raises(OffsetsSchemaError):
        OffsetCommitValue.decode(OFFSET_V3[:-3])
    with pytest.raises(OffsetsSchemaError):
        OffsetCommitValue.decode(h("0003 | 0000000000000064 | 00000007 | ffff | 0000018bcfe56800"))


# -- group metadata values ------------------------------------------------------------------

MEMBER = MemberMetadataValue(
    member_id="m1",
    group_instance_id=None,
    client_id="c",
    client_host="/h",
    rebalance_timeout=300_000,
    session_timeout=10_000,
    subscription=b"\x00\x01",
    assignment=b"\x02",
)
GROUP_V3 = h(
    "0003 | 0008 636f6e73756d6572 | 00000001 | 0005 72616e6765 | 0002 6d31 | 00000000000003e8"
    "| 00000001"  # one member
    "| 0002 6d31 | ffff | 0001 63 | 0002 2f68 | 000493e0 | 00002710 | 00000002 0001 | 00000001 02"
)


def test_group_metadata_value_v3_bytes() -> None:
    value = GroupMetadataValue("consumer", 1, "range", "m1", 1000, (MEMBER,))
    assert value.encode() == GROUP_V3
    assert GroupMetadataValue.decode(GROUP_V3) == value


def test_empty_group_metadata_value_bytes() -> None:
    data = h("0003 | 0008 636f6e73756d6572 | 00000002 | ffff | ffff | 0000000000000005 | 00000000")
    value = GroupMetadataValue("consumer", 2, None, None, 5, ())
    assert value.encode() == data
    assert GroupMetadataValue.decode(data) == value


def test_group_metadata_value_v0_has_one_timeout() -> None:
    data = h(
        "0000 | 0008 636f6e73756d6572 | 00000001 | 0005 72616e6765 | 0002 6d31 | 00000001"
        "| 0002 6d31 | 0001 63 | 0002 2f68 | 00002710 | 00000002 0001 | 00000001 02"
    )
    decoded = GroupMetadataValue.decode(data)
    assert decoded.current_state_timestamp == -1
    assert decoded.members[0].rebalance_timeout == decoded.members[0].session_timeout == 10_000
    assert decoded.members[0].group_instance_id is None


def test_group_metadata_value_v4_is_flexible() -> None:
    member = MemberMetadataValue("m", "i", "c", "h", 1, 2, b"s", b"")
    data = h(
        "0004 | 02 6d | 00000007 | 00 | 00 | ffffffffffffffff"  # type "m", gen 7, null protocol and leader
        "| 02"  # one member
        "| 02 6d | 02 69 | 02 63 | 02 68 | 00000001 | 00000002 | 02 73 | 01 | 00"  # member + tags
        "| 00"  # top-level tags
    )
    value = GroupMetadataValue("m", 7, None, None, -1, (member,))
    assert value.encode(4) == data
    assert GroupMetadataValue.decode(data) == value


def test_records_and_tombstones() -> None:
    assert offset_commit_record("group", "topic", 3, None) == (OFFSET_KEY, None)
    assert offset_commit_record("group", "topic", 3, OffsetCommitValue(100, 7, "m", 1_700_000_000_000)) == (
        OFFSET_KEY,
        OFFSET_V3,
    )
    assert group_metadata_record("group", None) == (GROUP_KEY, None)


# -- round trips ---------------------------------------------------------------------------

names = st.text(max_size=20)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@given(names, names, int32, st.sampled_from([0, 1]))
def test_offset_key_round_trip(group: str, topic: str, partition: int, version: int) -> None:
    key = OffsetCommitKey(group, topic, partition)
    assert decode_key(key.encode(version)) == key


@given(names)
def test_group_key_round_trip(group: str) -> None:
    assert decode_key(GroupMetadataKey(group).encode()) == GroupMetadataKey(group)


@given(int64, int32, names, int64, st.one_of(st.none(), st.integers(0, 2**63 - 1)), st.integers(0, 4))
def test_offset_value_round_trip(
    offset: int, epoch: int, metadata: str, timestamp: int, expire: int | None, version: int
) -> None:
    value = OffsetCommitValue(offset, epoch, metadata, timestamp, expire)
    expected = OffsetCommitValue(
        offset,
        epoch if version >= 3 else -1,
        metadata,
        timestamp,
        expire if version == 1 else None,
    )
    assert OffsetCommitValue.decode(value.encode(version)) == expected


members = st.builds(
    MemberMetadataValue,
    member_id=names,
    group_instance_id=st.one_of(st.none(), names),
    client_id=names,
    client_host=names,
    rebalance_timeout=int32,
    session_timeout=int32,
    subscription=st.binary(max_size=40),
    assignment=st.binary(max_size=40),
)


@given(
    names,
    int32,
    st.one_of(st.none(), names),
    st.one_of(st.none(), names),
    int64,
    st.lists(members, max_size=4),
    st.integers(0, 4),
)
def test_group_value_round_trip(
    protocol_type: str,
    generation: int,
    protocol: str | None,
    leader: str | None,
    timestamp: int,
    group_members: list[MemberMetadataValue],
    version: int,
) -> None:
    value = GroupMetadataValue(protocol_type, generation, protocol, leader, timestamp, tuple(group_members))
    decoded = GroupMetadataValue.decode(value.encode(version))
    kept = tuple(
        MemberMetadataValue(
            m.member_id,
            m.group_instance_id if version >= 3 else None,
            m.client_id,
            m.client_host,
            m.rebalance_timeout if version >= 1 else m.session_timeout,
            m.session_timeout,
            m.subscription,
            m.assignment,
        )
        for m in group_members
    )
    assert decoded == GroupMetadataValue(
        protocol_type, generation, protocol, leader, timestamp if version >= 2 else -1, kept
    )


@settings(max_examples=200, deadline=None)
@given(
    offset=st.integers(-1, 2**63 - 1),
    epoch=st.integers(-1, 2**31 - 1),
    metadata=st.text(max_size=50),
    timestamp=st.integers(-1, 2**62),
)
def test_value_v3_fast_path_writes_the_schema_bytes(
    offset: int, epoch: int, metadata: str, timestamp: int
) -> None:
    """The one-pack encoding of version 3 is the field-by-field schema encoding."""
    from logstore.coordinator.record_codec import RecordWriter

    writer = RecordWriter(3, flexible=False)
    writer.int64(offset)
    writer.int32(epoch)
    writer.string(metadata)
    writer.int64(timestamp)
    value = OffsetCommitValue(offset, epoch, metadata, timestamp)
    assert value.encode(3) == bytes(writer.out)
    assert OffsetCommitValue.decode(value.encode()) == value
