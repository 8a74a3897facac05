"""Tumbling windows by event time: fixed, non-overlapping [start, start + size) slots.

The arithmetic never overflows: a window that would begin before ``datetime.min`` or end after
``datetime.max`` is clamped to them (validation keeps such timestamps out of the stream; this keeps one
that slips through from stopping every other window).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from schemas.utc import MAX_TIME, MIN_TIME, utc

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def shift(ts: datetime, delta: timedelta) -> datetime:
    """``ts + delta``, clamped to [MIN_TIME, MAX_TIME] instead of raising OverflowError."""
    try:
        return utc(ts) + delta
    except OverflowError:
        return MAX_TIME if delta > timedelta(0) else MIN_TIME


@dataclass(frozen=True)
class TumblingWindows:
    size_seconds: int

    def start_of(self, ts: datetime) -> datetime:
        """The start of the window holding ``ts`` (aligned to the epoch, UTC)."""
        ms = int((utc(ts) - EPOCH) / timedelta(milliseconds=1))
        size_ms = self.size_seconds * 1000
        return shift(EPOCH, timedelta(milliseconds=ms - ms % size_ms))

    def end_of(self, start: datetime) -> datetime:
        return shift(start, timedelta(seconds=self.size_seconds))

    def last_k(self, start: datetime, k: int) -> tuple[datetime, datetime]:
        """The span of the k windows ending with the one that starts at ``start``."""
        end = self.end_of(start)
        return shift(start, -timedelta(seconds=self.size_seconds * (k - 1))), end
