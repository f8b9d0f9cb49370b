"""Client errors shaped like confluent-kafka's: :class:`KafkaError` values inside :class:`KafkaException`.

A :class:`KafkaError` carries a code (Kafka's positive codes from the wire,
or librdkafka's negative local codes such as ``_MSG_TIMED_OUT``), its name,
a reason, and whether it is retriable or fatal. Every code has a class
attribute (``KafkaError.UNKNOWN_TOPIC_OR_PARTITION``, and librdkafka's
spellings where they differ, ``KafkaError.UNKNOWN_TOPIC_OR_PART``), so code
written against confluent-kafka compares codes the same way.

>>> e = KafkaError(3)
>>> e.name(), e.retriable(), e == KafkaError.UNKNOWN_TOPIC_OR_PART
('UNKNOWN_TOPIC_OR_PARTITION', True, True)
>>> str(KafkaException(KafkaError(KafkaError._TIMED_OUT, "no answer in 5.0 s")))
'KafkaError{code=_TIMED_OUT,val=-185,str="no answer in 5.0 s"}'
"""

from __future__ import annotations

import builtins
from typing import Any

from logstore.errors import LogstoreError
from logstore.protocol.errors import all_errors, error_info

# librdkafka's local (negative) codes that this client raises, with their meaning.
LOCAL_ERRORS: dict[str, tuple[int, str]] = {
    "_BAD_MSG": (-199, "a malformed message or response"),
    "_DESTROY": (-197, "the client is closing"),
    "_FAIL": (-196, "local failure"),
    "_TRANSPORT": (-195, "the connection to a broker failed"),
    "_MSG_TIMED_OUT": (-192, "the message was not delivered within delivery.timeout.ms"),
    "_PARTITION_EOF": (-191, "reached the end of the partition"),
    "_UNKNOWN_PARTITION": (-190, "the partition does not exist"),
    "_UNKNOWN_TOPIC": (-188, "the topic does not exist"),
    "_ALL_BROKERS_DOWN": (-187, "no broker could be reached"),
    "_INVALID_ARG": (-186, "an invalid argument or configuration"),
    "_TIMED_OUT": (-185, "the operation timed out"),
    "_QUEUE_FULL": (-184, "the producer's queue is full (buffer.memory)"),
    "_CONFLICT": (-173, "a conflicting operation is under way"),
    "_ASSIGN_PARTITIONS": (-175, "partitions assigned"),
    "_REVOKE_PARTITIONS": (-174, "partitions revoked"),
    "_STATE": (-172, "the operation is not valid in the client's state"),
    "_NO_OFFSET": (-168, "no committed offset and auto.offset.reset=none"),
    "_MAX_POLL_EXCEEDED": (-147, "the application did not call poll within max.poll.interval.ms"),
    "_FATAL": (-150, "a fatal error: the client must be closed"),
    "_PURGE_QUEUE": (-152, "purged from the queue before it was sent"),
    "_NOT_CONFIGURED": (-145, "the functionality is not configured"),
    "_AUTHENTICATION": (-169, "SASL authentication failed"),
    "_FENCED": (-144, "the producer was fenced by a newer instance"),
}
_LOCAL_BY_CODE = {code: (name, text) for name, (code, text) in LOCAL_ERRORS.items()}
# librdkafka's spellings of Kafka's codes, where they differ from Kafka's own names.
_ALIASES = {
    "UNKNOWN_TOPIC_OR_PART": 3,
    "NOT_LEADER_FOR_PARTITION": 6,
    "MSG_SIZE_TOO_LARGE": 10,
    "INVALID_MSG": 2,
    "TOPIC_EXCEPTION": 17,
    "GROUP_COORDINATOR_NOT_AVAILABLE": 15,
    "NOT_COORDINATOR_FOR_GROUP": 16,
    "UNKNOWN": -1,
    "NO_ERROR": 0,
}


class KafkaError:
    """One error: ``code()``, ``name()``, ``str()``, ``retriable()``, ``fatal()``,
    ``txn_requires_abort()`` (confluent-kafka's methods).

    ``fatal``: the client can do nothing more (a fenced transactional producer);
    ``retriable`` None takes Kafka's flag of the code; ``txn_requires_abort``:
    the producer's transaction failed and must be aborted (``abort_transaction()``)
    before a new one begins.
    """

    __slots__ = ("_code", "_fatal", "_reason", "_retriable", "_txn_requires_abort")

    def __init__(
        self, code: int, reason: str | None = None, fatal: bool = False, retriable: bool | None = None,
        txn_requires_abort: bool = False,
    ) -> None:  # fmt: skip
        self._code = int(code)
        self._reason = reason
        self._fatal = fatal
        self._retriable = retriable
        self._txn_requires_abort = txn_requires_abort

    def code(self) -> int:
        return self._code

    def name(self) -> builtins.str:
        local = _LOCAL_BY_CODE.get(self._code)
        return local[0] if local is not None else error_info(self._code).name

    def str(self) -> builtins.str:
        if self._reason:
            return self._reason
        local = _LOCAL_BY_CODE.get(self._code)
        return local[1] if local is not None else error_info(self._code).message or self.name()

    def fatal(self) -> bool:
        return self._fatal

    def retriable(self) -> bool:
        if self._retriable is not None:
            return self._retriable
        if self._code in _LOCAL_BY_CODE:
            return self._code in (LOCAL_ERRORS["_TRANSPORT"][0], LOCAL_ERRORS["_TIMED_OUT"][0])
        return error_info(self._code).retriable

    def txn_requires_abort(self) -> bool:
        return self._txn_requires_abort

    def __eq__(self, other: object) -> bool:
        if isinstance(other, KafkaError):
            return self._code == other._code
        if isinstance(other, int):
            return self._code == other
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self._code)

    def __str__(self) -> builtins.str:
        return f'KafkaError{{code={self.name()},val={self._code},str="{self.str()}"}}'

    __repr__ = __str__


def _install_codes() -> None:
    for code, info in all_errors().items():
        setattr(KafkaError, info.name, code)
    for name, (code, _) in LOCAL_ERRORS.items():
        setattr(KafkaError, name, code)
    for name, code in _ALIASES.items():
        setattr(KafkaError, name, code)


_install_codes()


class KafkaException(LogstoreError):
    """An error raised by the client; ``args[0]`` is the :class:`KafkaError` (as in confluent-kafka)."""

    def __init__(self, error: KafkaError | int | str, *args: Any) -> None:
        if isinstance(error, int):
            error = KafkaError(error)
        elif isinstance(error, str):
            error = KafkaError(LOCAL_ERRORS["_FAIL"][0], error)
        super().__init__(error, *args)

    @property
    def error(self) -> KafkaError:
        first: KafkaError = self.args[0]
        return first

    def __str__(self) -> str:
        return str(self.args[0])


def local(name: str, reason: str | None = None, *, fatal: bool = False) -> KafkaError:
    """A local error by librdkafka's name (``local("_TIMED_OUT", "...")``)."""
    return KafkaError(LOCAL_ERRORS[name][0], reason, fatal=fatal)


def from_code(code: int, context: str | None = None) -> KafkaError:
    """The error a broker answered, its reason naming Kafka's message and ``context``."""
    info = error_info(code)
    reason = f"{context}: {info.name}: {info.message}" if context else None
    return KafkaError(code, reason)
