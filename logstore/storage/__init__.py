"""Segments and sparse indexes in Kafka's on-disk format."""

from logstore.storage.index import IndexFullError, OffsetIndex, TimeIndex
from logstore.storage.segment import LogSegment, SegmentRead, segment_file_name

__all__ = ["IndexFullError", "LogSegment", "OffsetIndex", "SegmentRead", "TimeIndex", "segment_file_name"]
