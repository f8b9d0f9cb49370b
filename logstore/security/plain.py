"""SASL/PLAIN (RFC 4616) against Kafka's JAAS user list.

Kafka's broker takes PLAIN users from the ``PlainLoginModule`` JAAS entry of a
listener, ``listener.name.<listener>.plain.sasl.jaas.config``::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret"
        user_admin="admin-secret" user_alice="alice-secret";

Each ``user_<name>="<password>"`` option is a user (``username``/``password``
are the broker's own client credentials, unused here). PLAIN is verified
against these users only, never against the SCRAM credentials (Kafka's
behaviour). The client message is ``authzid NUL authcid NUL password``; an
authzid must be empty or the username. Passwords are compared with
:func:`hmac.compare_digest` (an unknown user is compared against a dummy).

>>> users = parse_jaas_users('org.apache.kafka.common.security.plain.PlainLoginModule required '
...                          'username="a" password="b" user_alice="s3cret";')
>>> users
{'alice': 's3cret'}
>>> server = PlainServer(users)
>>> server.evaluate(b"\\0alice\\0s3cret"), server.username
(b'', 'alice')
"""

from __future__ import annotations

import hmac
import re

from logstore.errors import InvalidConfigError
from logstore.security.errors import SaslAuthenticationError

PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"

_TOKEN = re.compile(r'\s*(?:(?P<word>[^\s=;"]+)|(?P<quoted>"(?:[^"\\]|\\.)*")|(?P<punct>[=;]))')


def parse_jaas(text: str, key: str = "sasl.jaas.config") -> list[tuple[str, str, dict[str, str]]]:
    """A JAAS config string -> [(login module class, control flag, options)].

    Grammar (Kafka's ``JaasConfig``): ``<class> <flag> [<name>=<value>]* ;`` repeated;
    a value is a bare word or a double-quoted string with backslash escapes.
    """
    tokens: list[tuple[str, str]] = []
    pos = 0
    text = text.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            if text[pos:].strip() == "":
                break
            raise InvalidConfigError(f"{key}: cannot parse the JAAS config near {text[pos : pos + 20]!r}")
        pos = match.end()
        if match["word"] is not None:
            tokens.append(("word", match["word"]))
        elif match["quoted"] is not None:
            tokens.append(("word", re.sub(r"\\(.)", r"\1", match["quoted"][1:-1])))
        else:
            tokens.append(("punct", match["punct"]))
    modules = []
    i = 0
    while i < len(tokens):
        if i + 1 >= len(tokens) or tokens[i][0] != "word" or tokens[i + 1][0] != "word":
            raise InvalidConfigError(f"{key}: expected '<LoginModule class> <required|requisite|...>'")
        module, flag = tokens[i][1], tokens[i + 1][1]
        if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
            raise InvalidConfigError(f"{key}: invalid control flag {flag!r} for {module}")
        i += 2
        options: dict[str, str] = {}
        while i < len(tokens) and tokens[i] != ("punct", ";"):
            if i + 2 >= len(tokens) or tokens[i + 1] != ("punct", "=") or tokens[i + 2][0] != "word":
                raise InvalidConfigError(f'{key}: expected name="value" options in {module}')
            options[tokens[i][1]] = tokens[i + 2][1]
            i += 3
        if i >= len(tokens):
            raise InvalidConfigError(f"{key}: the JAAS entry for {module} must end with ';'")
        i += 1
        modules.append((module, flag, options))
    if not modules:
        raise InvalidConfigError(f"{key}: no login module in the JAAS config")
    return modules


def parse_jaas_users(text: str, key: str = "sasl.jaas.config") -> dict[str, str]:
    """The ``user_<name>`` options of the PlainLoginModule entry: {name: password}."""
    users: dict[str, str] = {}
    found = False
    for module, _, options in parse_jaas(text, key):
        if module != PLAIN_LOGIN_MODULE:
            continue
        found = True
        for option, value in options.items():
            if option.startswith("user_") and len(option) > 5:
                users[option[5:]] = value
    if not found:
        raise InvalidConfigError(f"{key}: PLAIN needs a {PLAIN_LOGIN_MODULE} entry")
    return users


_DUMMY = b"\0" * 32


class PlainServer:
    """One PLAIN exchange: a single client message; ``complete`` and ``username`` once it passes."""

    mechanism_name = "PLAIN"

    def __init__(self, users: dict[str, str]) -> None:
        self._users = users
        self.username: str | None = None
        self.complete = False
        self._done = False

    def evaluate(self, token: bytes) -> bytes:
        if self._done:
            raise SaslAuthenticationError("Unexpected PLAIN message after the exchange")
        self._done = True
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise SaslAuthenticationError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authzid, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.get(username)
        given = password.encode("utf-8")
        matches = hmac.compare_digest(given, expected.encode("utf-8") if expected is not None else _DUMMY)
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authzid and authzid != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different from username"
            )
        self.username = username
        self.complete = True
        return b""
