"""The exception hierarchy of logstore.

Every error derives from :class:`LogstoreError` and carries a message that
says what happened and what to do about it. Native return codes map onto these
classes in :mod:`logstore._native` (the cffi core) and in ``native/speedups_errors.c``'s
table (``logstore._speedups.ERRORS``: code -> name, class, hint).
"""

from __future__ import annotations


class LogstoreError(Exception):
    """Base class of every logstore error."""


class CorruptRecordError(LogstoreError):
    """A record batch failed its CRC-32C or structural checks.

    The bytes are never served. On disk, recovery truncates a log at the first
    such batch; elsewhere, the producer of the bytes must resend them.
    """


class RecordDecodeError(CorruptRecordError, ValueError):
    """Record bytes the C decoders (``logstore._speedups``) refuse: a batch that
    fails its CRC-32C, records whose varints, sizes, count or offsets do not
    parse, a header name that is not UTF-8.

    Also a ``ValueError``, like Python's own decode errors (``UnicodeDecodeError``,
    ``json.JSONDecodeError``), and as these failures were before they had a class.
    """


class CorruptIndexError(LogstoreError):
    """An offset or time index is damaged; it is rebuilt from the log."""


class OffsetOutOfRangeError(LogstoreError):
    """An offset below the log start or above the log end was asked for."""


class OffsetGoneError(OffsetOutOfRangeError):
    """Offsets below the log start offset were asked for: retention or delete_records removed them.

    ``log_start_offset`` is where the log starts now (-1 if unknown), so a
    caller can skip to it (Spark's ``failOnDataLoss=false``) or fail.
    """

    def __init__(
        self, topic: str, partition: int, offset: int, log_start_offset: int, where: str = ""
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.log_start_offset = log_start_offset
        start = (
            f"the log starts at offset {log_start_offset}"
            if log_start_offset >= 0
            else "the log start is unknown"
        )
        super().__init__(
            f"{topic}[{partition}]{where}: offset {offset} is no longer in the log ({start}; retention or "
            f"delete_records removed the records before it); read from offset {max(log_start_offset, 0)} "
            "or later, or accept the loss"
        )


class RecordTooLargeError(LogstoreError):
    """A batch is larger than the log accepts (``max.message.bytes``)."""


class InvalidRecordError(LogstoreError):
    """A record the log refuses by its topic's rules, e.g. a record without a key
    appended to a compacted topic (Kafka's INVALID_RECORD).

    Nothing of the append is written; fix the records (give each a key) or the
    topic's config (``cleanup.policy``) and append again. ``record_errors``:
    (index of the record in its batch, why) for each record at fault (KIP-467),
    empty when the batch as a whole is refused.
    """

    def __init__(self, message: str, record_errors: tuple[tuple[int, str | None], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors


class InvalidTimestampError(InvalidRecordError):
    """A record's CreateTime lies outside ``message.timestamp.before/after.max.ms`` of
    the log's clock (Kafka's INVALID_TIMESTAMP); ``record_errors`` names the records."""


class UnsupportedMessageFormatError(LogstoreError):
    """Record batches of a magic other than 2 (Kafka's UNSUPPORTED_FOR_MESSAGE_FORMAT)."""


class InvalidConfigError(LogstoreError, ValueError):
    """A configuration key is unknown or its value is out of range."""


class InvalidArgumentError(LogstoreError, ValueError):
    """An argument is outside its documented range."""


class TopicExistsError(LogstoreError):
    """create_topic was asked for a topic that exists."""


class UnknownTopicError(LogstoreError):
    """The topic or partition does not exist; create it first."""


class ClosedError(LogstoreError):
    """An operation on a closed segment, index, log or store."""


class MappedReadError(LogstoreError, OSError):
    """A page of a memory-mapped segment or index could not be read in (a bad block, or the file
    cut short under its map): the native core's guard turned the SIGBUS into this error. It is an
    OSError, so the log's directory fails as for any I/O error (storage/log_dir_failure.py); check
    the disk (``dmesg``), then restart the broker to try the directory again."""


class NativeCapacityError(LogstoreError):
    """An output buffer handed to the native core was too small (a bug)."""
