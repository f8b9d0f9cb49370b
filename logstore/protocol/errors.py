"""Kafka's error codes as one table, for both ends of a connection.

The broker answers a logstore exception with the code :func:`error_for`
names; the client turns a code from the wire into an exception whose text is
Kafka's name and message for it (:func:`error_info`). Codes, names and the
retriable flag come from kio's ``ErrorCode`` (generated from Kafka's own
``Errors.java``), and so do the messages: kio keeps each code's message as
the docstring under its member, read here from kio's source once, on first use.
"""

from __future__ import annotations

import functools
import inspect
import re
from dataclasses import dataclass

from kio.schema import errors as kio_errors
from kio.schema.errors import ErrorCode

from logstore.errors import (
    ClosedError,
    CorruptRecordError,
    InvalidArgumentError,
    InvalidConfigError,
    InvalidRecordError,
    InvalidTimestampError,
    LogstoreError,
    OffsetOutOfRangeError,
    RecordTooLargeError,
    TopicExistsError,
    UnknownTopicError,
    UnsupportedMessageFormatError,
)


@dataclass(frozen=True)
class ErrorInfo:
    """One Kafka error code: its number, Kafka's name (``UNKNOWN_TOPIC_OR_PARTITION``), whether a
    client may retry, and Kafka's message."""

    code: int
    name: str
    retriable: bool
    message: str


_MEMBER_DOC = re.compile(r'^    (\w+) = (-?\d+), (?:True|False)\n    """(.*?)"""', re.M | re.S)


@functools.cache
def _messages() -> dict[int, str]:
    try:
        source = inspect.getsource(kio_errors)
    except (OSError, TypeError):  # kio installed without sources: names stand in
        return {}
    return {int(code): " ".join(doc.split()) for _, code, doc in _MEMBER_DOC.findall(source)}


@functools.cache
def _table() -> dict[int, ErrorInfo]:
    messages = _messages()
    return {
        int(code): ErrorInfo(int(code), code.name.upper(), code.retriable, messages.get(int(code), ""))
        for code in ErrorCode
    }


def error_info(code: int) -> ErrorInfo:
    """The table's row for ``code``; a code kio does not know is reported as such, not raised.

    >>> error_info(3).name, error_info(3).retriable
    ('UNKNOWN_TOPIC_OR_PARTITION', True)
    >>> error_info(9999).name
    'UNKNOWN_ERROR_9999'
    """
    info = _table().get(code)
    if info is None:
        return ErrorInfo(code, f"UNKNOWN_ERROR_{code}", False, "an error code this client does not know")
    return info


def all_errors() -> dict[int, ErrorInfo]:
    """Every known code's row."""
    return dict(_table())


ERRORS = ErrorCode
"""Kafka's error codes by name (``ERRORS.unknown_topic_or_partition``): kio's enum."""

_ERROR_CODES: tuple[tuple[type[BaseException], ErrorCode], ...] = (
    (UnknownTopicError, ErrorCode.unknown_topic_or_partition),
    (TopicExistsError, ErrorCode.topic_already_exists),
    (OffsetOutOfRangeError, ErrorCode.offset_out_of_range),
    (CorruptRecordError, ErrorCode.corrupt_message),
    (RecordTooLargeError, ErrorCode.message_too_large),
    (InvalidTimestampError, ErrorCode.invalid_timestamp),
    (InvalidRecordError, ErrorCode.invalid_record),
    (UnsupportedMessageFormatError, ErrorCode.unsupported_for_message_format),
    (InvalidConfigError, ErrorCode.invalid_config),
    (InvalidArgumentError, ErrorCode.invalid_request),
    (OSError, ErrorCode.kafka_storage_error),
    # A log closed under the request (its directory failed, its topic was deleted, the broker is
    # stopping): retriable. UNKNOWN_SERVER_ERROR is not, and an idempotent librdkafka producer
    # answers a non-retriable error on one batch by bumping its epoch and sending the batches
    # after it again under new sequences, which the broker cannot tell from new records: a
    # duplicate (the fsync-failure cluster test saw one).
    (ClosedError, ErrorCode.kafka_storage_error),
    (LogstoreError, ErrorCode.unknown_server_error),
)
"""logstore exceptions and their Kafka error codes, most specific first."""


def error_for(exc: BaseException) -> ErrorCode:
    """The Kafka error code for a logstore exception.

    >>> error_for(UnknownTopicError("t")).name
    'unknown_topic_or_partition'
    """
    for kind, code in _ERROR_CODES:
        if isinstance(exc, kind):
            return code
    return ErrorCode.unknown_server_error
