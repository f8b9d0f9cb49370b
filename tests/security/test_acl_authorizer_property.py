"""The authorizer against a brute-force oracle of Kafka's rules (AclAuthorizer.authorizeAction).

Random ACL sets (literal, wildcard ``*`` and prefixed patterns; several principals incl. ``User:*``;
hosts ``*`` or an IP; every operation; ALLOW and DENY) and random queries: the indexed, cached
authorizer answers exactly as the oracle, which scans every ACL. Also after deletions (the index
and the cache follow changes), for ``authorized_operations``, and for ``authorizeByResourceType``
(against a transcription of Kafka's default implementation).
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from logstore.security.acls import (
    SUPPORTED_OPERATIONS,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourcePattern,
    ResourceType,
)
from logstore.security.authorizer import Authorizer, MemoryAclStore

pytestmark = pytest.mark.property

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
TYPES = [ResourceType.TOPIC, ResourceType.GROUP]
NAMES = ["a", "ab", "abc", "abd", "b", "ba", "*", "x"]
PRINCIPALS = ["User:alice", "User:*", "Group:ops"]
HOSTS = ["*", "10.0.0.1"]
OPS = [op for op in AclOperation if op not in (AclOperation.UNKNOWN, AclOperation.ANY)]
# Dense enough that DENY ALL, implications and wildcards meet the queries often.
ACL_OPS = [*OPS, AclOperation.ALL, AclOperation.ALL, AclOperation.READ, AclOperation.DESCRIBE, AclOperation.ALTER_CONFIGS]
QUERY_OPS = [op for op in OPS if op != AclOperation.ALL]

bindings = st.builds(
    lambda t, name, prefixed, principal, host, op, allow: AclBinding(
        ResourcePattern(t, name.rstrip("*") or "a" if prefixed else name, PatternType.PREFIXED if prefixed else PatternType.LITERAL),
        AccessControlEntry(principal, host, op, AclPermissionType.ALLOW if allow else AclPermissionType.DENY),
    ),
    st.sampled_from(TYPES), st.sampled_from(NAMES), st.booleans(), st.sampled_from(PRINCIPALS),
    st.sampled_from(HOSTS), st.sampled_from(ACL_OPS), st.booleans(),
)  # fmt: skip
queries = st.tuples(
    st.sampled_from(["User:alice", "User:bob", "Group:ops"]),
    st.sampled_from(["10.0.0.1", "10.0.0.2"]),
    st.sampled_from(QUERY_OPS),
    st.sampled_from(TYPES),
    st.sampled_from(["a", "ab", "abc", "abcd", "b", "ba", "bb", "x", "zz"]),
)


def oracle(
    acls: set[AclBinding], supers: set[str], allow_if_none: bool, principal: str, host: str,
    op: AclOperation, rtype: ResourceType, name: str,
) -> bool:  # fmt: skip
    """Kafka's rules, scanning every ACL."""
    if principal in supers:
        return True

    def applies(p: ResourcePattern) -> bool:
        if p.resource_type != rtype:
            return False
        if p.pattern_type == PatternType.LITERAL:
            return p.name in (name, "*")
        return name.startswith(p.name)

    matching = [b for b in acls if applies(b.pattern)]
    if not matching:
        return allow_if_none
    mine = [
        b.entry
        for b in matching
        if b.entry.principal in (principal, "User:*") and b.entry.host in (host, "*")
    ]
    if any(e.permission == AclPermissionType.DENY and e.operation in (op, AclOperation.ALL) for e in mine):
        return False
    allow_ops = {op}
    if op == AclOperation.DESCRIBE:
        allow_ops |= {AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
    if op == AclOperation.DESCRIBE_CONFIGS:
        allow_ops |= {AclOperation.ALTER_CONFIGS}
    return any(
        e.permission == AclPermissionType.ALLOW
        and (e.operation in allow_ops or e.operation == AclOperation.ALL)
        for e in mine
    )


def by_type_oracle(
    acls: set[AclBinding], supers: set[str], allow_if_none: bool, principal: str, host: str,
    op: AclOperation, rtype: ResourceType,
) -> bool:  # fmt: skip
    """Kafka's default Authorizer.authorizeByResourceType, transcribed."""
    if oracle(acls, supers, allow_if_none, principal, host, op, rtype, "hardcode"):
        return True
    deny_lit: set[str] = set()
    deny_pre: set[str] = set()
    allow: list[tuple[PatternType, str]] = []
    wildcard_allow = False
    for b in acls:
        e = b.entry
        if (
            b.pattern.resource_type != rtype
            or e.host not in (host, "*")
            or e.principal not in (principal, "User:*")
        ):
            continue
        if e.operation not in (op, AclOperation.ALL):
            continue
        if e.permission == AclPermissionType.DENY:
            if b.pattern.pattern_type == PatternType.LITERAL:
                if b.pattern.name == "*":
                    return False
                deny_lit.add(b.pattern.name)
            else:
                deny_pre.add(b.pattern.name)
        elif b.pattern.pattern_type == PatternType.LITERAL and b.pattern.name == "*":
            wildcard_allow = True
        else:
            allow.append((b.pattern.pattern_type, b.pattern.name))
    if wildcard_allow:
        return True
    for pattern_type, name in allow:
        if pattern_type == PatternType.LITERAL and name in deny_lit:
            continue
        if not any(name[: i + 1] in deny_pre for i in range(len(name))):
            return True
    return False


def _split(principal: str) -> tuple[str, str]:
    kind, _, name = principal.partition(":")
    return kind, name


@SETTINGS
@given(
    st.sets(bindings, max_size=40),
    st.sets(st.sampled_from(["User:bob", "Group:ops"]), max_size=1),
    st.booleans(),
    st.lists(queries, min_size=1, max_size=60),
    st.data(),
)
def test_authorize_matches_oracle(acls, supers, allow_if_none, qs, data) -> None:
    auth = Authorizer(MemoryAclStore(), supers, allow_if_none)
    assert auth.create_acls(sorted(acls, key=str)) == [None] * len(acls)
    assert set(auth.acls()) == acls
    for principal, host, op, rtype, name in qs * 2:  # the second pass answers from the cache
        got = auth.authorize(*_split(principal), host, op, rtype, name)
        assert got == oracle(acls, supers, allow_if_none, principal, host, op, rtype, name), (
            principal,
            host,
            op,
            rtype,
            name,
        )
    # Delete a random part; the index and the cache follow.
    gone = data.draw(
        st.sets(st.sampled_from(sorted(acls, key=str)), max_size=len(acls)) if acls else st.just(set())
    )
    for b in gone:
        p, e = b.pattern, b.entry
        removed = auth.delete_acls(
            [
                AclBindingFilter(
                    p.resource_type, p.name, p.pattern_type, e.principal, e.host, e.operation, e.permission
                )
            ]
        )
        assert removed == [[b]]
    left = acls - gone
    assert set(auth.acls()) == left
    for principal, host, op, rtype, name in qs:
        got = auth.authorize(*_split(principal), host, op, rtype, name)
        assert got == oracle(left, supers, allow_if_none, principal, host, op, rtype, name)
        expected_bits = 0
        for supported in SUPPORTED_OPERATIONS[rtype]:
            if oracle(left, supers, allow_if_none, principal, host, supported, rtype, name):
                expected_bits |= 1 << int(supported)
        assert auth.authorized_operations(*_split(principal), host, rtype, name) == expected_bits
        assert auth.authorize_by_resource_type(*_split(principal), host, op, rtype) == by_type_oracle(
            left, supers, allow_if_none, principal, host, op, rtype
        )


@SETTINGS
@given(
    st.sets(bindings, max_size=25), st.sampled_from(list(PatternType)[1:]), st.sampled_from([*NAMES, None])
)
def test_filters_match_kafka(acls, pattern_type, name) -> None:
    """DescribeAcls/DeleteAcls filters: Kafka's ResourcePatternFilter.matches."""
    auth = Authorizer(MemoryAclStore())
    auth.create_acls(list(acls))
    f = AclBindingFilter(
        ResourceType.ANY, name, pattern_type, None, None, AclOperation.ANY, AclPermissionType.ANY
    )

    def kafka_matches(p: ResourcePattern) -> bool:
        if pattern_type not in (PatternType.ANY, PatternType.MATCH) and pattern_type != p.pattern_type:
            return False
        if name is None:
            return True
        if pattern_type in (PatternType.ANY, p.pattern_type):
            return name == p.name
        if p.pattern_type == PatternType.LITERAL:
            return name == p.name or p.name == "*"
        return name.startswith(p.name)

    assert set(auth.acls(f)) == {b for b in acls if kafka_matches(b.pattern)}
