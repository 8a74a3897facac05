"""Time, injectable: everything that waits for time to pass or stamps "now" takes a ``Clock``, so a test
advances a ``ManualClock`` instead of sleeping and a replay can run on its own time."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for durations and idle times)."""
        ...

    def now(self) -> datetime:
        """The wall time, timezone-aware UTC (for stamps and for comparing with event time)."""
        ...


class SystemClock:
    """The real clocks: ``time.monotonic`` and ``datetime.now(UTC)``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to: ``advance(seconds)`` moves both readings together."""

    def __init__(self, start: datetime | None = None, monotonic: float = 0.0) -> None:
        self._wall = (start or datetime(2026, 1, 1, tzinfo=UTC)).astimezone(UTC)
        self._monotonic = monotonic

    def monotonic(self) -> float:
        return self._monotonic

    def now(self) -> datetime:
        return self._wall

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._monotonic += seconds
        self._wall += timedelta(seconds=seconds)
