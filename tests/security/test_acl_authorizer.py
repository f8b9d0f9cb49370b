"""The authorizer's rules on hand-made cases, validation, and its file store."""

from __future__ import annotations

import json
import os

import pytest

from logstore.security.acls import (
    AclBindingFilter,
    AclOperation,
    ResourceType,
    binding_of,
    decode_entries,
    encode_entries,
    validate_binding,
)
from logstore.security.authorizer import Authorizer, FileAclStore, MemoryAclStore

pytestmark = pytest.mark.unit

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = 3, 4
ALLOW, DENY = 3, 2
A = ("User", "alice")


def acl(rtype, name, op, perm=ALLOW, principal="User:alice", host="*", pattern=LIT):
    return binding_of(rtype, name, pattern, principal, host, op, perm)


def test_rules() -> None:
    auth = Authorizer(MemoryAclStore(), ["User:root"])
    assert not auth.authorize(*A, "1.1.1.1", AclOperation.READ, T, "t")  # no ACL, default deny
    assert auth.authorize("User", "root", "1.1.1.1", AclOperation.DELETE, T, "t")  # super user
    auth.create_acls([acl(T, "t", AclOperation.READ)])
    assert auth.authorize(*A, "1.1.1.1", AclOperation.READ, T, "t")
    assert auth.authorize(*A, "1.1.1.1", AclOperation.DESCRIBE, T, "t")  # READ implies DESCRIBE
    assert not auth.authorize(*A, "1.1.1.1", AclOperation.WRITE, T, "t")
    assert not auth.authorize("User", "bob", "1.1.1.1", AclOperation.READ, T, "t")
    auth.create_acls([acl(T, "t", AclOperation.ALL, DENY, host="1.1.1.1")])  # DENY wins
    assert not auth.authorize(*A, "1.1.1.1", AclOperation.READ, T, "t")
    assert auth.authorize(*A, "2.2.2.2", AclOperation.READ, T, "t")
    auth.create_acls(
        [acl(T, "pre", AclOperation.WRITE, pattern=PRE), acl(T, "*", AclOperation.ALTER_CONFIGS)]
    )
    assert auth.authorize(*A, "2.2.2.2", AclOperation.WRITE, T, "prefix")
    assert not auth.authorize(*A, "2.2.2.2", AclOperation.WRITE, T, "pr")
    assert auth.authorize(*A, "2.2.2.2", AclOperation.DESCRIBE_CONFIGS, T, "anything")
    # DENY on READ does not deny DESCRIBE (implication is for ALLOW only)
    auth.create_acls([acl(G, "g", AclOperation.DESCRIBE), acl(G, "g", AclOperation.READ, DENY)])
    assert auth.authorize(*A, "2.2.2.2", AclOperation.DESCRIBE, G, "g")
    assert not auth.authorize(*A, "2.2.2.2", AclOperation.READ, G, "g")


def test_allow_everyone_if_no_acl_found() -> None:
    auth = Authorizer(MemoryAclStore(), allow_if_no_acl=True)
    assert auth.authorize(*A, "h", AclOperation.WRITE, T, "t")
    auth.create_acls([acl(T, "t", AclOperation.READ, principal="User:bob")])
    assert not auth.authorize(*A, "h", AclOperation.WRITE, T, "t")  # an ACL exists on t (for bob)
    assert auth.authorize(*A, "h", AclOperation.WRITE, T, "u")


def test_validation() -> None:
    assert validate_binding(acl(C, "kafka-cluster", AclOperation.ALTER)) is None
    assert "only valid name" in validate_binding(acl(C, "other", AclOperation.ALTER))
    assert "empty resource name" in validate_binding(acl(T, "", AclOperation.READ))
    assert "principal" in validate_binding(acl(T, "t", AclOperation.READ, principal="alice"))
    assert "Invalid operation" in validate_binding(acl(T, "t", AclOperation.ANY))
    assert "Invalid patternType" in validate_binding(acl(T, "t", AclOperation.READ, pattern=2))
    assert "Invalid resourceType" in validate_binding(acl(ResourceType.ANY, "t", AclOperation.READ))
    assert "Invalid resourceType" in validate_binding(acl(99, "t", AclOperation.READ))  # unknown code
    assert AclBindingFilter.ANY.is_unknown() is False


def test_json_is_kafkas() -> None:
    entry = acl(T, "t", AclOperation.CLUSTER_ACTION, DENY).entry
    doc = json.loads(encode_entries([entry]))
    assert doc == {
        "version": 1,
        "acls": [
            {"principal": "User:alice", "permissionType": "Deny", "operation": "ClusterAction", "host": "*"}
        ],
    }
    assert decode_entries(encode_entries([entry])) == [entry]
    with pytest.raises(ValueError):
        decode_entries(b'{"version":1,"acls":[{"principal":"User:a"}]}')


def test_file_store_survives_restart(tmp_path) -> None:
    auth = Authorizer(FileAclStore(str(tmp_path)))
    auth.create_acls([acl(T, "t", AclOperation.READ), acl(G, "g", AclOperation.READ, pattern=PRE)])
    again = Authorizer(FileAclStore(str(tmp_path)))
    assert set(again.acls()) == set(auth.acls())
    assert again.authorize(*A, "h", AclOperation.READ, G, "gx")
    again.delete_acls([AclBindingFilter.ANY])
    assert Authorizer(FileAclStore(str(tmp_path))).acls() == []
    with open(os.path.join(tmp_path, "acls.json"), "w") as f:
        f.write("{not json")
    with pytest.raises(ValueError, match="fix or remove it"):
        FileAclStore(str(tmp_path))


def test_every_served_api_is_in_the_table_and_the_docs() -> None:
    import pathlib

    from logstore.broker.apis import registry
    from logstore.security.operations import RULES, table_markdown

    served = set(registry())
    assert served - set(RULES) == {18}  # ApiVersions needs nothing
    for key, (name, _) in RULES.items():
        if key in served:
            assert registry()[key].name == name, key
    docs = pathlib.Path(__file__).resolve().parents[2] / "docs" / "acls.md"
    assert table_markdown() in docs.read_text(), "docs/acls.md's table is not the code's: paste table_markdown()"
