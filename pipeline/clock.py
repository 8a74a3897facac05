"""Time, injectable: everything that waits for time to pass or stamps "now" takes a ``Clock``, so a test
advances a ``ManualClock`` instead of sleeping and a replay can run on its own time.

The worker's one clock (``streams.resources.Resources.clock``) reaches the join's expiry, the sink's
batch age, the window closer, the alert engine and the sampling budgets; the judge client measures its
calls and waits out its backoff on its own (``pipeline.llm.client.JudgeClient``, ``clock=``)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar

from schemas.utc import utc

T = TypeVar("T")


class Clock(Protocol):
    def monotonic(self) -> float:
        """Seconds on a clock that never goes back (for durations and idle times)."""
        ...

    def now(self) -> datetime:
        """The wall time, timezone-aware UTC (for stamps and for comparing with event time)."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait until ``seconds`` have passed on this clock (backoff, timers)."""
        ...


class SystemClock:
    """The real clocks: ``time.monotonic`` and ``datetime.now(UTC)``."""

    def monotonic(self) -> float:
        return time.monotonic()

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


#: the real clock, for a caller that has no clock injected
SYSTEM_CLOCK = SystemClock()


class ManualClock:
    """A clock that moves only when told to: ``advance(seconds)`` moves both readings together, ``set``
    moves them to a wall time. ``sleep`` advances it by the wait at once (and lets other tasks run),
    and records each wait in ``slept``."""

    def __init__(self, start: datetime | None = None, monotonic: float = 0.0) -> None:
        self._wall = utc(start or datetime(2026, 1, 1, tzinfo=UTC))
        self._monotonic = monotonic
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self._monotonic

    def now(self) -> datetime:
        return self._wall

    def advance(self, seconds: float) -> None:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._monotonic += seconds
        self._wall += timedelta(seconds=seconds)

    def set(self, when: datetime) -> None:
        """Move to the wall time ``when`` (not earlier than now); the monotonic reading moves as far."""
        self.advance((utc(when) - self._wall).total_seconds())

    async def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)


async def wait_all(
    clock: Clock, tasks: Iterable[asyncio.Future[T]], seconds: float
) -> set[asyncio.Future[T]]:
    """Wait until every task is done or ``seconds`` have passed on ``clock``, whichever comes first; the
    tasks still running then (not cancelled: the caller decides). On a ``ManualClock`` the time passes
    at once: a task gets a turn of the loop, not a real wait."""
    pending = set(tasks)
    if not pending:
        return pending
    timer: asyncio.Future[Any] = asyncio.ensure_future(clock.sleep(seconds))
    try:
        while pending and not timer.done():
            racing: set[asyncio.Future[Any]] = {*pending, timer}
            done, _ = await asyncio.wait(racing, return_when=asyncio.FIRST_COMPLETED)
            pending -= done
    finally:
        timer.cancel()
    return pending


async def within(clock: Clock, seconds: float, work: Awaitable[T]) -> T:
    """``work``'s result if it finishes within ``seconds`` on ``clock``; else it is cancelled and
    ``TimeoutError`` raised (``asyncio.wait_for`` on the injected clock)."""
    task = asyncio.ensure_future(work)
    if await wait_all(clock, [task], seconds):
        task.cancel()
        await asyncio.wait([task])
        raise TimeoutError(f"not done within {seconds:g} s")
    return task.result()


class Stopwatch:
    """How long a piece of work took, on the process's own high-resolution counter
    (``time.perf_counter``): a duration measured, never waited on, so it is real whatever clock the
    worker runs on (a ``ManualClock`` does not move while the CPU works). The one way the pipeline and
    the stream time their stages and writes."""

    def __init__(self) -> None:
        self._started = time.perf_counter()

    def seconds(self) -> float:
        """Seconds since the stopwatch was made."""
        return time.perf_counter() - self._started
