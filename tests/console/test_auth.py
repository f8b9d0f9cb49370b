"""Login with the cluster's own SASL credentials, sessions, ACLs as the principal's limits, logout.

Against a broker with a SCRAM listener and ACLs (tests/console/conftest.py):
``dave`` may read and write topic ``paid``; anything else he asks is refused by
the broker, and the console shows the broker's authorization error with a 403.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest

from logstore.console import ConsoleSettings
from tests.console.conftest import PASSWORDS, SaslBroker
from tests.kit.consolekit import ConsoleServer, Visitor

pytestmark = pytest.mark.integration

Start = Callable[[ConsoleSettings], ConsoleServer]


def _login(visitor: Visitor, user: str, password: str, next_page: str = "/") -> int:
    assert visitor.get("/login").status == 200
    answer = visitor.post("/login", {"username": user, "password": password, "mechanism": "SCRAM-SHA-512",
                                     "next": next_page})  # fmt: skip
    if answer.status == 303:
        visitor.get(answer.location)  # as a browser does: the next page (and its forms' new CSRF token)
    return answer.status


def test_pages_need_a_login_and_a_wrong_password_is_refused(console_for: Start, sasl_broker: SaslBroker) -> None:
    server = console_for(sasl_broker.settings())
    visitor = Visitor(server.url)
    first = visitor.get("/topics")
    assert first.status == 302 and first.location == "/login?next=/topics"
    assert visitor.request("GET", "/groups/x/lag.svg", accept="image/svg+xml").status == 401
    refresh = visitor.request("GET", "/traffic", headers={"X-Console-Fetch": "1"})  # a live part's refresh
    assert refresh.status == 401 and "log in first" in refresh.text
    assert visitor.post("/topics", {"name": "t"}).status == 401
    login_page = visitor.get("/login")
    assert login_page.status == 200 and 'name="password"' in login_page.text and "Topics</a>" not in login_page.text
    wrong = visitor.post("/login", {"username": "dave", "password": "not-his", "mechanism": "SCRAM-SHA-512"})
    assert wrong.status == 401 and "login failed" in wrong.error() and "invalid credentials" in wrong.error()
    assert visitor.get("/topics").status == 302
    empty = visitor.post("/login", {"username": "", "password": ""})
    assert empty.status == 400 and "give a user name and a password" in empty.error()
    odd = visitor.post("/login", {"username": "dave", "password": "x", "mechanism": "GSSAPI"})
    assert odd.status == 400 and "mechanism must be one of" in odd.error()
    no_csrf = visitor.post("/login", {"username": "dave", "password": PASSWORDS["dave"]}, csrf=False)
    assert no_csrf.status == 403 and "CSRF" in no_csrf.error()


def test_a_user_acts_within_the_acls_and_logs_out(console_for: Start, sasl_broker: SaslBroker) -> None:
    server = console_for(sasl_broker.settings())
    visitor = Visitor(server.url)
    visitor.get("/login")
    before = visitor.cookie
    assert _login(visitor, "dave", PASSWORDS["dave"], "/topics") == 303
    assert visitor.cookie is not None and visitor.cookie != before  # a new session id at login
    cookie = visitor.set_cookie_headers[-1]
    assert "Secure" in cookie and "HttpOnly" in cookie and "SameSite=Strict" in cookie
    page = visitor.get("/topics")
    assert page.status == 200 and 'id="principal">User:dave<' in page.text
    assert 'href="/topics/paid"' in page.text
    # what his ACLs allow: produce to and read paid
    produced = visitor.post("/topics/paid/produce", {"key": "k", "value": "from dave", "headers": "who=dave"})
    assert produced.status == 303, produced.error()
    found = visitor.get("/topics/paid/messages", start="beginning", header="who=dave")
    assert found.status == 200 and found.text.count('class="message"') == 1
    # what they do not: create a topic, change a config, delete paid
    created = visitor.post("/topics", {"name": "daves-own"})
    assert created.status == 403
    assert "not allowed: the broker answered TOPIC_AUTHORIZATION_FAILED" in created.error()
    assert "ask an administrator for an ACL" in created.error()
    altered = visitor.post("/topics/paid/configs", {"op": "set", "name": "retention.ms", "value": "1"})
    assert altered.status == 403 and "AUTHORIZATION_FAILED" in altered.error()
    deleted = visitor.post("/topics/paid/delete", {"confirm": "paid"})
    assert deleted.status == 403 and "TOPIC_AUTHORIZATION_FAILED" in deleted.error()
    # a second person has a client of their own: admin may create what dave may not
    other = Visitor(server.url)
    assert _login(other, "admin", PASSWORDS["admin"]) == 303
    assert other.post("/topics", {"name": "admins-own"}).status == 303
    assert 'id="principal">User:admin<' in other.get("/topics").text
    assert 'href="/topics/admins-own"' not in visitor.get("/topics").text  # dave may not describe it
    # logout ends the session: its cookie is worth nothing after
    old = visitor.cookie
    out = visitor.post("/logout")
    assert out.status == 303 and out.location == "/login"
    assert visitor.get("/topics").status == 302
    replay = Visitor(server.url)
    replay.cookie = old
    assert replay.get("/topics").status == 302
    assert 'id="principal">User:admin<' in other.get("/").text  # the other session lives on


def test_read_only_with_login(console_for: Start, sasl_broker: SaslBroker) -> None:
    server = console_for(sasl_broker.settings(read_only=True))
    visitor = Visitor(server.url)
    assert _login(visitor, "admin", PASSWORDS["admin"]) == 303
    page = visitor.get("/topics/paid/messages")
    assert page.status == 200 and "Produce a message" not in page.text and re.search(r">read-only<", page.text)
    refused = visitor.post("/topics/paid/produce", {"value": "x"})
    assert refused.status == 403 and "--read-only" in refused.error()
    assert visitor.post("/logout").status == 303  # logging out is not a change to the cluster


def test_acls_are_listed_added_and_removed_by_whom_the_broker_lets(console_for: Start,
                                                                    sasl_broker: SaslBroker) -> None:  # fmt: skip
    server = console_for(sasl_broker.settings())
    admin = Visitor(server.url)
    assert _login(admin, "admin", PASSWORDS["admin"]) == 303
    listed = admin.get("/acls")
    assert listed.status == 200 and "User:dave" in listed.text and "<b>paid</b>" in listed.text
    acl = {"principal": "User:dave", "permission": "ALLOW", "operation": "DESCRIBE", "resource_type": "TOPIC",
           "resource_name": "extra-", "pattern_type": "PREFIXED", "host": "*"}  # fmt: skip
    added = admin.post("/acls", acl)
    assert added.status == 303, added.error()
    page = admin.get("/acls", q="extra")
    assert page.status == 200 and "ACL added: User:dave ALLOW DESCRIBE on TOPIC extra-" in page.text
    assert re.search(r"<td>User:dave</td><td>ALLOW</td><td>DESCRIBE</td>\s*<td>TOPIC <b>extra-</b></td><td>PREFIXED</td>", page.text)
    removed = admin.post("/acls/delete", acl)
    assert removed.status == 303
    assert "1 ACL removed" in admin.get("/acls").text and "extra-" not in admin.get("/acls", q="extra").text
    bad = admin.post("/acls", {**acl, "principal": "dave"})
    assert bad.status == 400 and "principal is TYPE:NAME" in bad.error()
    bad_op = admin.post("/acls", {**acl, "operation": "FLY"})
    assert bad_op.status == 400 and "operation must be one of" in bad_op.error()
    # dave may not see the ACLs, nor add one
    dave = Visitor(server.url)
    assert _login(dave, "dave", PASSWORDS["dave"]) == 303
    refused = dave.get("/acls")
    assert refused.status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in refused.error(), refused.error()
    assert dave.post("/acls", acl).status == 403


def test_scram_users_are_listed_added_and_deleted_by_whom_the_broker_lets(console_for: Start,
                                                                           sasl_broker: SaslBroker) -> None:  # fmt: skip
    server = console_for(sasl_broker.settings())
    admin = Visitor(server.url)
    assert _login(admin, "admin", PASSWORDS["admin"]) == 303
    listed = admin.get("/users")
    assert listed.status == 200 and "<td>dave</td><td>SCRAM-SHA-512</td>" in listed.text, listed.text[-2000:]
    made = admin.post("/users", {"user": "erin", "password": "erins-secret", "mechanism": "SCRAM-SHA-512",
                                 "iterations": "4096"})  # fmt: skip
    assert made.status == 303, made.error()
    page = admin.get("/users")
    assert "erin: SCRAM-SHA-512 credential set" in page.text and "erins-secret" not in page.text
    assert re.search(r"<td>erin</td><td>SCRAM-SHA-512</td><td class=\"num\">4,096</td>", page.text)
    erin = Visitor(server.url)  # the new credential logs in (a principal with no ACLs: nothing to see)
    assert _login(erin, "erin", "erins-secret") == 303
    assert Visitor(server.url).post("/login", {"username": "erin", "password": "wrong",
                                               "mechanism": "SCRAM-SHA-512"}).status == 401  # fmt: skip
    for fields, message in (
        ({"user": "erin", "password": "x", "mechanism": "SCRAM-SHA-512", "iterations": "10"}, "iterations must be"),
        ({"user": "erin", "password": "x", "mechanism": "MD5"}, "mechanism must be one of"),
        ({"user": "", "password": "x", "mechanism": "SCRAM-SHA-512"}, "user"),
        ({"user": "erin", "password": "", "mechanism": "SCRAM-SHA-512"}, "password"),
    ):
        bad = admin.post("/users", fields)
        assert bad.status == 400 and message in bad.error(), (fields, bad.error())
    missing = admin.post("/users/delete", {"user": "erin", "mechanism": "SCRAM-SHA-256"})
    assert missing.status in (400, 404) and "RESOURCE_NOT_FOUND" in missing.error(), missing.error()
    # dave may neither see the users nor add one
    dave = Visitor(server.url)
    assert _login(dave, "dave", PASSWORDS["dave"]) == 303
    refused = dave.get("/users")
    assert refused.status == 403 and "CLUSTER_AUTHORIZATION_FAILED" in refused.error(), refused.error()
    assert dave.post("/users", {"user": "dave", "password": "mine", "mechanism": "SCRAM-SHA-512"}).status == 403
    deleted = admin.post("/users/delete", {"user": "erin", "mechanism": "SCRAM-SHA-512"})
    assert deleted.status == 303, deleted.error()
    assert "<td>erin</td>" not in admin.get("/users").text
    assert Visitor(server.url).post("/login", {"username": "erin", "password": "erins-secret",
                                               "mechanism": "SCRAM-SHA-512"}).status == 401  # fmt: skip
