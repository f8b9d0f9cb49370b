"""The consumer's partition assignors and the consumer protocol's bytes.

Worked examples from the behaviour spec (seed 001, "消费端分区分配策略"), Kafka's own javadoc examples,
and cases whose expected results were computed by Kafka's Java assignors (``RangeAssignor``,
``RoundRobinAssignor``, ``StickyAssignor``, ``CooperativeStickyAssignor`` of apache/kafka trunk,
commit 1eb7644349cb, run on the same input). Member ids are single letters there, so Java's
``HashMap`` iteration order is the sorted order this module uses.
"""

from __future__ import annotations

import io
import time
from typing import Any

import pytest
from kio.schema.consumer_protocol_assignment.v0 import data as ca0
from kio.schema.consumer_protocol_assignment.v1 import data as ca1
from kio.schema.consumer_protocol_assignment.v2 import data as ca2
from kio.schema.consumer_protocol_assignment.v3 import data as ca3
from kio.schema.consumer_protocol_subscription.v0 import data as cs0
from kio.schema.consumer_protocol_subscription.v1 import data as cs1
from kio.schema.consumer_protocol_subscription.v2 import data as cs2
from kio.schema.consumer_protocol_subscription.v3 import data as cs3
from kio.schema.types import TopicName
from kio.serial import entity_writer
from kio.static.primitive import i32

from logstore.client.assignors import ASSIGNORS, Member, TopicPartition, assign, get_assignor
from logstore.client.consumer_protocol import (
    Assignment,
    ConsumerProtocolError,
    Subscription,
    decode_assignment,
    decode_sticky_user_data,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)

pytestmark = pytest.mark.unit

T4 = ["t0", "t1", "t2", "t3"]


def tps(text: str) -> list[TopicPartition]:
    """``"t0p0 t1p2"`` (the seed's notation) as sorted topic-partitions."""
    out = []
    for item in text.split():
        topic, partition = item.rsplit("p", 1)
        out.append((topic, int(partition)))
    return sorted(out)


def h(text: str) -> bytes:
    """Hex with spaces and ``|`` separators, for readable expected bytes."""
    return bytes.fromhex(text.replace("|", " "))


def subs(**topics: list[str]) -> dict[str, Subscription]:
    return {member: Subscription(ts) for member, ts in topics.items()}


def owning(
    result: dict[str, list[TopicPartition]], generation: int, **topics: list[str]
) -> dict[str, Subscription]:
    """Each member's next subscription, owning what ``result`` gave it (as librdkafka and the cooperative protocol send)."""
    return {m: Subscription(ts, None, result.get(m, []), generation) for m, ts in topics.items()}


# -- range -------------------------------------------------------------------------------------------


def test_range_even_split_per_topic() -> None:
    result = assign("range", subs(C0=["t0", "t1"], C1=["t0", "t1"]), {"t0": 4, "t1": 4})
    assert result == {"C0": tps("t0p0 t0p1 t1p0 t1p1"), "C1": tps("t0p2 t0p3 t1p2 t1p3")}


def test_range_uneven_split_gives_the_first_members_the_extra_partitions() -> None:
    result = assign("range", subs(C0=["t0", "t1"], C1=["t0", "t1"]), {"t0": 3, "t1": 3})
    assert result == {"C0": tps("t0p0 t0p1 t1p0 t1p1"), "C1": tps("t0p2 t1p2")}


def test_range_orders_static_members_by_instance_id_first() -> None:
    """RangeAssignor's javadoc: with group.instance.id set, new member ids do not shuffle the assignment."""
    members = [Member("C3", Subscription(["t0", "t1"]), "I0"), Member("C2", Subscription(["t0", "t1"]), "I1")]
    result = assign("range", members, {"t0": 3, "t1": 3})
    assert result == {"C3": tps("t0p0 t0p1 t1p0 t1p1"), "C2": tps("t0p2 t1p2")}
    dynamic_first = [Member("A", Subscription(["t0"])), Member("Z", Subscription(["t0"]), "I9")]
    assert assign("range", dynamic_first, {"t0": 1}) == {"A": [], "Z": [("t0", 0)]}


# -- round robin -------------------------------------------------------------------------------------


def test_roundrobin_with_unequal_subscriptions_passes_over_unsubscribed_members() -> None:
    result = assign(
        "roundrobin", subs(C0=["t0"], C1=["t0", "t1"], C2=["t0", "t1", "t2"]), {"t0": 1, "t1": 2, "t2": 3}
    )
    assert result == {"C0": tps("t0p0"), "C1": tps("t1p0"), "C2": tps("t1p1 t2p0 t2p1 t2p2")}


def test_roundrobin_with_equal_subscriptions() -> None:
    """RoundRobinAssignor's javadoc example."""
    result = assign("roundrobin", subs(C0=["t0", "t1"], C1=["t0", "t1"]), {"t0": 3, "t1": 3})
    assert result == {"C0": tps("t0p0 t0p2 t1p1"), "C1": tps("t0p1 t1p0 t1p2")}


# -- sticky ------------------------------------------------------------------------------------------


def sticky_round(
    result: dict[str, list[TopicPartition]], generation: int, members: list[str], topics: list[str]
) -> dict[str, Subscription]:
    """The next subscriptions of eager sticky members: previous assignment in StickyAssignorUserData, as Java sends."""
    sticky = ASSIGNORS["sticky"]
    return {
        m: Subscription(topics, sticky.user_data(result.get(m), generation), (), generation) for m in members
    }


def test_sticky_first_assignment_is_the_seeds_figure() -> None:
    result = assign("sticky", subs(C0=T4, C1=T4, C2=T4), dict.fromkeys(T4, 2))
    assert result == {"C0": tps("t0p0 t1p1 t3p0"), "C1": tps("t0p1 t2p0 t3p1"), "C2": tps("t1p0 t2p1")}


def test_sticky_after_a_member_leaves_keeps_every_surviving_ownership() -> None:
    first = assign("sticky", subs(C0=T4, C1=T4, C2=T4), dict.fromkeys(T4, 2))
    second = assign("sticky", sticky_round(first, 1, ["C0", "C2"], T4), dict.fromkeys(T4, 2))
    # Kafka (2.8+, ConstrainedAssignmentBuilder, as Java computes for this input) deals C1's partitions
    # t0p1 t2p0 t3p1 round robin to C0, C2, C2. The seed's figure (C0 + t2p0; C2 + t0p1 t3p1) is what
    # the older general algorithm gives, which Kafka still uses when subscriptions differ (below) and
    # librdkafka uses always. Either way both survivors keep all they had and the result is balanced.
    assert second == {"C0": tps("t0p0 t1p1 t3p0 t0p1"), "C2": tps("t1p0 t2p1 t2p0 t3p1")}


def test_sticky_general_builder_gives_the_seeds_figure_when_a_member_leaves() -> None:
    first = assign("sticky", subs(C0=T4, C1=T4, C2=T4), dict.fromkeys(T4, 2))
    nxt = sticky_round(first, 1, ["C0", "C2"], T4)
    # C2 also subscribes to a topic that does not exist: the subscriptions differ, so the general builder runs.
    nxt["C2"] = Subscription([*T4, "absent"], nxt["C2"].user_data)
    second = assign("sticky", nxt, dict.fromkeys(T4, 2))
    assert second == {"C0": tps("t0p0 t1p1 t3p0 t2p0"), "C2": tps("t1p0 t2p1 t0p1 t3p1")}


def test_sticky_reads_owned_partitions_as_librdkafka_sends_them() -> None:
    first = assign("sticky", subs(C0=T4, C1=T4, C2=T4), dict.fromkeys(T4, 2))
    from_user_data = assign("sticky", sticky_round(first, 1, ["C0", "C2"], T4), dict.fromkeys(T4, 2))
    from_owned = assign("sticky", owning(first, 1, C0=T4, C2=T4), dict.fromkeys(T4, 2))
    assert from_owned == from_user_data


COUNTS = {"t0": 3, "t1": 5, "t2": 4}
PREVIOUS = {
    "A": [("t1", p) for p in range(5)],
    "B": [*(("t2", p) for p in range(4)), ("t0", 0)],
    "C": [("t0", 1), ("t0", 2)],
}
TOPICS = {"A": ["t0", "t1"], "B": ["t1", "t2", "t0"], "C": ["t0", "t1", "t2"]}
GENERATIONS = {"A": 2, "B": 2, "C": 1}


def test_sticky_general_builder_matches_java_from_scratch() -> None:
    result = assign("sticky", subs(A=["t0", "t1"], B=["t1", "t2"], C=["t0", "t1", "t2"]), COUNTS)
    assert result == {
        "A": tps("t0p0 t0p2 t1p0 t1p2"),
        "B": tps("t1p3 t2p0 t2p1 t2p3"),
        "C": tps("t0p1 t1p1 t1p4 t2p2"),
    }


def test_sticky_general_builder_matches_java_with_previous_generations() -> None:
    sticky = ASSIGNORS["sticky"]
    members = {m: Subscription(TOPICS[m], sticky.user_data(PREVIOUS[m], GENERATIONS[m])) for m in TOPICS}
    assert assign("sticky", members, COUNTS) == {
        "A": tps("t1p1 t1p2 t1p3 t1p4"),
        "B": tps("t0p0 t2p1 t2p2 t2p3"),
        "C": tps("t0p1 t0p2 t1p0 t2p0"),
    }


def test_sticky_higher_generation_wins_a_partition_two_members_claim() -> None:
    """As Java computes it (there from the same claims in StickyAssignorUserData)."""
    members = {
        "A": Subscription(["t0"], None, [("t0", 0)], 5),
        "B": Subscription(["t0"], None, [("t0", 0), ("t0", 1)], 4),
    }
    assert assign("sticky", members, {"t0": 2}) == {"A": [("t0", 0)], "B": [("t0", 1)]}


def test_cooperative_sticky_claims_of_one_generation_on_one_partition_void_both() -> None:
    """A and B both claim t0p1 in generation 3: neither keeps it, and its new owner must wait a round
    (``ConstrainedAssignmentBuilder`` and the cooperative adjustment; Java's result for this input)."""
    previous = {"A": tps("t0p0 t0p1 t1p0"), "B": tps("t0p1 t1p1 t1p2")}
    members = owning(previous, 3, A=["t0", "t1"], B=["t0", "t1"], C=["t0", "t1"])
    result = assign("cooperative-sticky", members, {"t0": 4, "t1": 4})
    assert result == {"A": tps("t0p0 t0p3 t1p0"), "B": tps("t1p1 t1p2 t1p3"), "C": tps("t0p2")}


def test_sticky_user_data_is_stickyassignoruserdata_v1() -> None:
    data = ASSIGNORS["sticky"].user_data(tps("t1p0 t1p1 t1p2 t1p3 t1p4"), 2)
    assert data == h(
        "00000001 | 0002 7431 | 00000005 00000000 00000001 00000002 00000003 00000004 | 00000002"
    )
    assert ASSIGNORS["sticky"].user_data(None, 7) is None
    assert decode_sticky_user_data(data) == (tps("t1p0 t1p1 t1p2 t1p3 t1p4"), 2)


def test_sticky_user_data_v0_and_garbage_are_read_as_java_reads_them() -> None:
    v0 = h("00000001 | 0002 7430 | 00000002 00000000 00000001")  # no generation
    assert decode_sticky_user_data(v0) == ([("t0", 0), ("t0", 1)], -1)
    assert decode_sticky_user_data(h("0000")) == ([], -1)
    assert decode_sticky_user_data(h("ffffffff")) == ([], -1)
    assert decode_sticky_user_data(b"") == ([], -1)
    assert decode_sticky_user_data(None) == ([], -1)


def test_sticky_is_fast_for_100_members_and_1000_partitions() -> None:
    topics = {f"topic-{i}": 100 for i in range(10)}
    members = {f"consumer-{i:03}": Subscription(list(topics)[: 1 + i % 10]) for i in range(100)}
    started = time.perf_counter()
    first = assign("sticky", members, topics)
    again = {m: Subscription(s.topics, None, first[m], 1) for m, s in members.items() if m != "consumer-000"}
    assign("sticky", again, topics)
    assert time.perf_counter() - started < 1.0


# -- cooperative sticky ------------------------------------------------------------------------------


def assert_no_partition_taken_from_its_owner(
    result: dict[str, list[TopicPartition]], members: dict[str, Subscription]
) -> None:
    for member, assigned in result.items():
        others = {tp for m, s in members.items() if m != member for tp in s.owned_partitions}
        assert not others & set(assigned), f"{member} was given partitions another member owns"


def test_cooperative_sticky_new_member_gets_its_share_in_the_second_round() -> None:
    counts = {"t0": 6}
    start = {"A": tps("t0p0 t0p1 t0p2"), "B": tps("t0p3 t0p4 t0p5")}
    round1 = owning(start, 1, A=["t0"], B=["t0"], C=["t0"])
    first = assign("cooperative-sticky", round1, counts)
    assert first == {"A": tps("t0p0 t0p1"), "B": tps("t0p3 t0p4"), "C": []}  # Java's result too
    assert_no_partition_taken_from_its_owner(first, round1)

    round2 = owning(first, 2, A=["t0"], B=["t0"], C=["t0"])  # A and B revoked t0p2 and t0p5
    second = assign("cooperative-sticky", round2, counts)
    assert second == {"A": tps("t0p0 t0p1"), "B": tps("t0p3 t0p4"), "C": tps("t0p2 t0p5")}
    assert_no_partition_taken_from_its_owner(second, round2)


def test_cooperative_sticky_general_builder_matches_java() -> None:
    members = {m: Subscription(TOPICS[m], None, PREVIOUS[m], GENERATIONS[m]) for m in TOPICS}
    result = assign("cooperative-sticky", members, COUNTS)
    assert result == {"A": tps("t1p1 t1p2 t1p3 t1p4"), "B": tps("t0p0 t2p1 t2p2 t2p3"), "C": tps("t0p1 t0p2")}
    assert_no_partition_taken_from_its_owner(result, members)


def test_cooperative_sticky_reads_the_generation_from_v1_user_data() -> None:
    coop = ASSIGNORS["cooperative-sticky"]
    assert coop.protocol == "COOPERATIVE" and ASSIGNORS["sticky"].protocol == "EAGER"
    assert coop.user_data(None, 7) == h("00000007")
    newer = Subscription(["t0"], coop.user_data(None, 7), [("t0", 0)])  # generation only in the user data
    older = Subscription(["t0"], None, [("t0", 0), ("t0", 1)], 6)
    assert assign("cooperative-sticky", {"A": newer, "B": older}, {"t0": 2}) == {
        "A": [("t0", 0)],
        "B": [("t0", 1)],
    }


# -- the common API ----------------------------------------------------------------------------------


def test_unknown_strategy_lists_the_valid_names() -> None:
    with pytest.raises(ValueError, match="range, roundrobin, sticky, cooperative-sticky"):
        get_assignor("leastloaded")
    with pytest.raises(ValueError, match="'leastloaded'"):
        assign("leastloaded", {}, {})


@pytest.mark.parametrize("strategy", list(ASSIGNORS))
def test_every_member_is_in_the_result_and_unknown_topics_are_ignored(strategy: str) -> None:
    members = [
        Member("B", Subscription(["t0", "gone"])),
        Member("A", Subscription(["gone"])),
        Member("C", Subscription(["empty"])),
    ]
    result = assign(strategy, members, {"t0": 2, "empty": 0, "unsubscribed": 5})
    assert result == {"A": [], "B": [("t0", 0), ("t0", 1)], "C": []}
    assert assign(strategy, {}, {"t0": 3}) == {}


@pytest.mark.parametrize("strategy", list(ASSIGNORS))
def test_duplicate_member_ids_are_refused(strategy: str) -> None:
    with pytest.raises(ValueError, match="duplicate member ids"):
        assign(strategy, [Member("A", Subscription(["t0"])), Member("A", Subscription(["t0"]))], {"t0": 1})


def test_assignors_have_kafkas_names() -> None:
    assert [(a.name, a.protocol) for a in ASSIGNORS.values()] == [
        ("range", "EAGER"),
        ("roundrobin", "EAGER"),
        ("sticky", "EAGER"),
        ("cooperative-sticky", "COOPERATIVE"),
    ]
    assert ASSIGNORS["range"].user_data([("t0", 0)], 3) is None


# -- the consumer protocol ---------------------------------------------------------------------------

SUB = Subscription(["t1", "t0"], b"\x01\x02", [("t0", 2), ("t1", 0), ("t0", 1)], 7, "rack-a")
ASSIGN = Assignment([("t1", 3), ("t0", 0), ("t1", 1)], b"ud")


def test_subscription_v3_bytes_by_hand() -> None:
    assert encode_subscription(SUB) == h(
        "0003"  # version
        "| 00000002 | 0002 7430 | 0002 7431"  # topics, sorted as Java's serializeSubscription sorts them
        "| 00000002 0102"  # user_data
        "| 00000002 | 0002 7430 00000002 00000001 00000002 | 0002 7431 00000001 00000000"  # owned, sorted
        "| 00000007"  # generation_id
        "| 0006 7261636b2d61"  # rack_id
    )


def test_decoding_a_v0_subscription_written_byte_by_byte() -> None:
    data = bytes([0, 0, 0, 0, 0, 1, 0, 5]) + b"topic" + bytes([0xFF, 0xFF, 0xFF, 0xFF])
    assert decode_subscription(data) == Subscription(["topic"])
    with_user_data = bytes([0, 0, 0, 0, 0, 0, 0, 0, 0, 3]) + b"abc"
    assert decode_subscription(with_user_data) == Subscription([], b"abc")


@pytest.mark.parametrize("version", range(4))
def test_subscription_round_trips_keeping_the_fields_of_its_version(version: int) -> None:
    expected = Subscription(
        ["t0", "t1"],
        SUB.user_data,
        sorted(SUB.owned_partitions) if version >= 1 else (),
        SUB.generation_id if version >= 2 else -1,
        SUB.rack_id if version >= 3 else None,
    )
    assert decode_subscription(encode_subscription(SUB, version)) == expected


@pytest.mark.parametrize("version", range(4))
def test_assignment_round_trips(version: int) -> None:
    assert decode_assignment(encode_assignment(ASSIGN, version)) == Assignment(
        [("t1", 3), ("t1", 1), ("t0", 0)], b"ud"
    )
    assert decode_assignment(encode_assignment(Assignment([]), version)) == Assignment([])


def kio_bytes(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def kio_partitions(module: Any, groups: list[tuple[str, tuple[int, ...]]]) -> tuple[Any, ...]:
    return tuple(
        module.TopicPartition(topic=TopicName(t), partitions=tuple(map(i32, ps))) for t, ps in groups
    )


@pytest.mark.parametrize("version", range(4))
def test_bytes_equal_kios_for_every_version(version: int) -> None:
    """kio's classes are generated from Kafka's own ConsumerProtocol*.json."""
    module: Any = [cs0, cs1, cs2, cs3][version]
    fields: dict[str, Any] = {"topics": ("t0", "t1"), "user_data": b"\x01\x02"}
    if version >= 1:
        fields["owned_partitions"] = kio_partitions(module, [("t0", (1, 2)), ("t1", (0,))])
    if version >= 2:
        fields["generation_id"] = i32(7)
    if version >= 3:
        fields["rack_id"] = "rack-a"
    prefix = version.to_bytes(2, "big")
    assert encode_subscription(SUB, version) == prefix + kio_bytes(
        module.ConsumerProtocolSubscription(**fields)
    )
    module = [ca0, ca1, ca2, ca3][version]
    assigned = kio_partitions(module, [("t1", (3, 1)), ("t0", (0,))])
    entity = module.ConsumerProtocolAssignment(assigned_partitions=assigned, user_data=b"ud")
    assert encode_assignment(ASSIGN, version) == prefix + kio_bytes(entity)


def test_null_and_empty_user_data_stay_apart() -> None:
    for user_data in (None, b""):
        assert decode_subscription(encode_subscription(Subscription(["t"], user_data))).user_data == user_data
        assert decode_assignment(encode_assignment(Assignment([], user_data))).user_data == user_data


def test_a_newer_subscription_is_read_as_version_3_ignoring_what_follows() -> None:
    future = (9).to_bytes(2, "big") + encode_subscription(SUB)[2:] + h("00000042 | 0003 787878")
    assert decode_subscription(future) == decode_subscription(encode_subscription(SUB))
    assert decode_subscription(encode_subscription(SUB, 1) + b"\x00trailing") == decode_subscription(
        encode_subscription(SUB, 1)
    )
    assert decode_assignment(
        (5).to_bytes(2, "big") + encode_assignment(ASSIGN)[2:] + b"more"
    ) == decode_assignment(encode_assignment(ASSIGN))


def test_empty_rack_id_reads_as_none() -> None:
    assert decode_subscription(encode_subscription(Subscription(["t"], rack_id=""))).rack_id is None


def test_empty_assignment_bytes_are_an_empty_assignment() -> None:
    assert decode_assignment(b"") == Assignment([])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\x00", "version runs past the end"),
        (h("ffff 00000000 ffffffff"), "version -1 is negative"),
        (h("0000 00000001 0005 7430"), "topic runs past the end"),
        (h("0000 ffffffff ffffffff"), "topics has count -1"),
        (h("0000 00000001 ffff ffffffff"), "topic has length -1"),
        (h("0000 00000000 fffffffe"), "user_data has length -2"),
        (h("0000 00000000 00000005 0102"), "user_data runs past the end"),
        (h("0001 00000000 ffffffff"), "owned_partitions count runs past the end"),
        (
            h("0001 00000000 ffffffff 00000001 0002 7430 00000002 00000001"),
            "owned_partitions partition runs past",
        ),
        (h("0002 00000000 ffffffff 00000000 0000"), "generation_id runs past the end"),
        (h("0003 00000000 ffffffff 00000000 00000001 0004 61"), "rack_id runs past the end"),
        (h("0000 00000001 0002 c328 ffffffff"), "topic is not UTF-8"),
    ],
)
def test_malformed_subscriptions_raise_naming_the_field(data: bytes, message: str) -> None:
    with pytest.raises(ConsumerProtocolError, match=message) as caught:
        decode_subscription(data)
    assert isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (h("00"), "version runs past the end"),
        (h("0000 00000001 0002 7430 00000003 00000000"), "assigned_partitions partition runs past the end"),
        (h("0000 00000000"), "user_data length runs past the end"),
        (h("8000 00000000 ffffffff"), "negative"),
    ],
)
def test_malformed_assignments_raise_naming_the_field(data: bytes, message: str) -> None:
    with pytest.raises(ConsumerProtocolError, match=message):
        decode_assignment(data)


def test_every_cut_of_a_subscription_raises() -> None:
    data = encode_subscription(SUB)
    for end in range(1, len(data)):
        with pytest.raises(ConsumerProtocolError):
            decode_subscription(data[:end])


def test_encoding_refuses_what_the_schema_cannot_hold() -> None:
    with pytest.raises(ValueError, match="version 4"):
        encode_subscription(SUB, 4)
    with pytest.raises(ValueError, match="version -1"):
        encode_assignment(ASSIGN, -1)
    with pytest.raises(ValueError, match="partition 2147483648 does not fit an int32"):
        encode_assignment(Assignment([("t", 2**31)]))
    with pytest.raises(ValueError, match="32767"):
        encode_subscription(Subscription(["x" * 40000]))
    with pytest.raises(TypeError, match="not one string"):
        Subscription("t0")
