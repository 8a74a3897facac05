"""Tumbling windows by event time: fixed, non-overlapping [start, start + size) slots."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _utc(ts: datetime) -> datetime:
    return ts.replace(tzinfo=UTC) if ts.tzinfo is None else ts.astimezone(UTC)


@dataclass(frozen=True)
class TumblingWindows:
    size_seconds: int

    def start_of(self, ts: datetime) -> datetime:
        """The start of the window holding ``ts`` (aligned to the epoch, UTC)."""
        ms = int((_utc(ts) - EPOCH) / timedelta(milliseconds=1))
        size_ms = self.size_seconds * 1000
        return EPOCH + timedelta(milliseconds=ms - ms % size_ms)

    def end_of(self, start: datetime) -> datetime:
        return _utc(start) + timedelta(seconds=self.size_seconds)

    def last_k(self, start: datetime, k: int) -> tuple[datetime, datetime]:
        """The span of the k windows ending with the one that starts at ``start``."""
        end = self.end_of(start)
        return _utc(start) - timedelta(seconds=self.size_seconds * (k - 1)), end
