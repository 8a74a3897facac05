"""The one UTC helper: every datetime groundwatch compares, stores or prints is aware and in UTC."""

from __future__ import annotations

from datetime import UTC, datetime

MIN_TIME = datetime.min.replace(tzinfo=UTC)
MAX_TIME = datetime.max.replace(tzinfo=UTC)


def utc(ts: datetime, *, clamp: bool = True) -> datetime:
    """``ts`` in UTC; a naive datetime is read as UTC (ClickHouse hands back naive UTC times). A time
    with no UTC equivalent (0001-01-01T00:00+01:00) is clamped to the first or last one, or without
    ``clamp`` refused (OverflowError, as ``astimezone`` raises it)."""
    if ts.tzinfo is None:
        return ts.replace(tzinfo=UTC)
    try:
        return ts.astimezone(UTC)
    except (OverflowError, ValueError):
        if not clamp:
            raise
        return MIN_TIME if ts.year == 1 else MAX_TIME
