"""The admin client's SCRAM credentials: describe and alter (DescribeUserScramCredentials 50,
AlterUserScramCredentials 51, KIP-554), shaped like confluent-kafka's.

``describe_user_scram_credentials(users=None)``: with no users one future of {user:
:class:`UserScramCredentialsDescription`} (failed with the answer's error); with users a dict
of futures, one per user (failed with that user's error, RESOURCE_NOT_FOUND for an unknown
user). ``alter_user_scram_credentials`` takes :class:`UserScramCredentialUpsertion` and
:class:`UserScramCredentialDeletion`; an upsertion's password is salted here (PBKDF2, the salt
random when not given), the broker stores only the derived keys; one future per user.
"""

from __future__ import annotations

import enum
import hashlib
import os
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from logstore.client.admin.client import AdminBase, kafka_error, new_future
from logstore.client.errors import KafkaException

DESCRIBE_USER_SCRAM_CREDENTIALS = 50
ALTER_USER_SCRAM_CREDENTIALS = 51


class ScramMechanism(enum.Enum):
    """confluent-kafka's ScramMechanism (values are Kafka's mechanism ids)."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2


_HASHES = {ScramMechanism.SCRAM_SHA_256: "sha256", ScramMechanism.SCRAM_SHA_512: "sha512"}


class ScramCredentialInfo:
    """A mechanism and its iteration count."""

    def __init__(self, mechanism: ScramMechanism, iterations: int) -> None:
        self.mechanism = mechanism
        self.iterations = iterations

    def __repr__(self) -> str:
        return f"ScramCredentialInfo({self.mechanism}, {self.iterations})"


class UserScramCredentialsDescription:
    """A user and its credentials' infos."""

    def __init__(self, user: str, scram_credential_infos: list[ScramCredentialInfo]) -> None:
        self.user = user
        self.scram_credential_infos = scram_credential_infos

    def __repr__(self) -> str:
        return f"UserScramCredentialsDescription({self.user!r}, {self.scram_credential_infos})"


class UserScramCredentialUpsertion:
    """Add or replace one credential of a user (the password is never sent, only salted)."""

    def __init__(
        self, user: str, scram_credential_info: ScramCredentialInfo, password: bytes, salt: bytes | None = None
    ) -> None:
        self.user = user
        self.scram_credential_info = scram_credential_info
        self.password = password
        self.salt = salt

    def __repr__(self) -> str:  # never the password
        return f"UserScramCredentialUpsertion({self.user!r}, {self.scram_credential_info})"


class UserScramCredentialDeletion:
    """Delete one credential (a mechanism) of a user."""

    def __init__(self, user: str, mechanism: ScramMechanism) -> None:
        self.user = user
        self.mechanism = mechanism

    def __repr__(self) -> str:
        return f"UserScramCredentialDeletion({self.user!r}, {self.mechanism})"


def _mechanism(value: int) -> ScramMechanism:
    try:
        return ScramMechanism(value)
    except ValueError:
        return ScramMechanism.UNKNOWN


def _upsertion_fields(u: UserScramCredentialUpsertion) -> dict[str, Any]:
    info = u.scram_credential_info
    if info.mechanism not in _HASHES:
        raise ValueError(f"unsupported SCRAM mechanism: {info.mechanism}")
    password = u.password.encode() if isinstance(u.password, str) else bytes(u.password)
    salt = u.salt if u.salt else os.urandom(32)
    salted = hashlib.pbkdf2_hmac(_HASHES[info.mechanism], password, salt, int(info.iterations))
    return {"name": u.user, "mechanism": info.mechanism.value, "iterations": int(info.iterations),
            "salt": salt, "salted_password": salted}  # fmt: skip


class ScramAdmin(AdminBase):
    """The calls on SCRAM credentials (see the module docstring)."""

    def describe_user_scram_credentials(
        self, users: Sequence[str] | None = None, *, request_timeout: float | None = None
    ) -> Any:
        """Credentials of users (all with None): one future, or a dict of futures per user."""
        if users is not None and (isinstance(users, str) or not all(isinstance(u, str) for u in users)):
            raise TypeError("users must be a list of strings or None")
        wanted = list(users) if users is not None else None
        if wanted is not None and len(set(wanted)) != len(wanted):
            raise ValueError("users must not contain duplicates")
        fields = {"users": None if not wanted else [{"name": u} for u in wanted]}
        deadline = self._deadline(request_timeout)
        whole: Future[Any] = new_future()
        per_user: dict[str, Future[Any]] = {u: new_future() for u in wanted or ()}

        def work() -> None:
            response = self._call(DESCRIBE_USER_SCRAM_CREDENTIALS, fields, deadline)
            if response.error_code:
                error = KafkaException(kafka_error(response.error_code, response.error_message))
                for f in (whole, *per_user.values()):
                    f.set_exception(error)
                return
            found: dict[str, UserScramCredentialsDescription] = {}
            for result in response.results:
                if result.error_code:
                    if result.user in per_user:
                        per_user[result.user].set_exception(
                            KafkaException(kafka_error(result.error_code, result.error_message))
                        )
                    continue
                infos = [ScramCredentialInfo(_mechanism(int(i.mechanism)), int(i.iterations))
                         for i in result.credential_infos]  # fmt: skip
                found[result.user] = UserScramCredentialsDescription(result.user, infos)
            for user, future in per_user.items():
                if not future.done():
                    future.set_result(found.get(user, UserScramCredentialsDescription(user, [])))
            whole.set_result(found)

        if wanted:
            self._submit([*per_user.values(), whole], work, deadline)
            return per_user
        self._submit([whole], work, deadline)
        return whole

    def alter_user_scram_credentials(
        self,
        alterations: Sequence[UserScramCredentialUpsertion | UserScramCredentialDeletion],
        *,
        request_timeout: float | None = None,
    ) -> dict[str, Future[None]]:
        """Upsert or delete credentials: one future per user, failed with that user's error."""
        if not alterations:
            raise ValueError("alterations must not be empty")
        upsertions, deletions = [], []
        for a in alterations:
            if isinstance(a, UserScramCredentialUpsertion):
                upsertions.append(_upsertion_fields(a))
            elif isinstance(a, UserScramCredentialDeletion):
                deletions.append({"name": a.user, "mechanism": a.mechanism.value})
            else:
                raise TypeError(f"not a SCRAM credential alteration: {a!r}")
        fields = {"deletions": deletions, "upsertions": upsertions}
        deadline = self._deadline(request_timeout)
        futures: dict[str, Future[None]] = {a.user: new_future() for a in alterations}

        def work() -> None:
            response = self._call(ALTER_USER_SCRAM_CREDENTIALS, fields, deadline)
            for result in response.results:
                future = futures.get(result.user)
                if future is None or future.done():
                    continue
                if result.error_code:
                    future.set_exception(KafkaException(kafka_error(result.error_code, result.error_message)))
                else:
                    future.set_result(None)
            for future in futures.values():
                if not future.done():
                    future.set_result(None)

        self._submit(futures.values(), work, deadline)
        return futures
