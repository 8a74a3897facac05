"""One closer round at a time, and a stop that ends: the timer's round and the stop's final round never
overlap (each window closed, and seen by the alert rules, once), the final round closes a backlog in
batches within its budget and leaves the rest, logged, for the next start."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from pipeline.clock import ManualClock
from schemas.evaluation_row import EvalRow
from schemas.settings import WindowSettings
from schemas.window import WindowAggregate
from streams.windows.closer import WindowCloser

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SIZE = 60


@dataclass
class Row:
    app: str
    model: str
    timestamp: datetime


class SlowStore:
    """Answers every read after ``read_s`` seconds on the clock (a ManualClock: advanced, not waited);
    the first read can be held until ``release`` is set, so a test can start a second round meanwhile."""

    def __init__(self, clock: ManualClock, read_s: float = 0.0, hold_first: bool = False) -> None:
        self.clock = clock
        self.read_s = read_s
        self.reads = 0
        self.inserts: list[list[tuple[str, str, datetime]]] = []
        self.held = asyncio.Event()
        self.release = asyncio.Event()
        self.hold_first = hold_first

    async def rows_of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[EvalRow]:
        self.reads += 1
        if self.hold_first and self.reads == 1:
            self.held.set()
            await self.release.wait()
        self.clock.advance(self.read_s)
        return []

    async def insert_windows(self, windows: Sequence[WindowAggregate], computed_at: datetime) -> None:
        self.inserts.append([(w.app, w.model, w.window_start) for w in windows])

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[tuple[str, str, datetime]]:
        return []

    def written(self) -> Counter[tuple[str, str, datetime]]:
        return Counter(key for batch in self.inserts for key in batch)


class Listener:
    def __init__(self) -> None:
        self.seen: Counter[tuple[str, str, datetime]] = Counter()

    async def on_window(self, window: WindowAggregate) -> object:
        self.seen[(window.app, window.model, window.window_start)] += 1
        await asyncio.sleep(0)  # lets another round run, were one allowed to
        return None

    async def on_windows(self, windows: Sequence[WindowAggregate]) -> object:
        for window in windows:
            await self.on_window(window)
        return None


def backlog(n: int) -> list[Row]:
    """One row in each of ``n`` windows of two apps, every window due by the watermark."""
    return [Row(f"app{i % 2}", "m", T0 + timedelta(seconds=SIZE * (i // 2) + 1)) for i in range(n)]


async def closer_with(n: int, store: SlowStore, clock: ManualClock, batch: int = 100) -> WindowCloser:
    settings = WindowSettings(size_seconds=SIZE, grace_seconds=0, idle_close_seconds=10**6, close_batch=batch)
    closer = WindowCloser(settings, store, Listener(), clock=clock)
    await closer.touch(backlog(n))  # type: ignore[arg-type]
    return closer


async def test_the_final_round_waits_for_the_timer_round_and_closes_each_window_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    clock = ManualClock(T0 + timedelta(days=1))
    store = SlowStore(clock, hold_first=True)
    closer = await closer_with(2000, store, clock)
    due = set(closer.due(final=True))
    assert len(due) == 2000
    timer = asyncio.create_task(closer.close_due())  # the sink's timer round
    await store.held.wait()  # ... is reading its first batch when the stop begins
    final = asyncio.create_task(closer.finish(budget_s=10.0))
    await asyncio.sleep(0)
    store.release.set()
    await timer
    result = await final
    written = store.written()
    assert set(written) == due and max(written.values()) == 1  # every window written once
    listener = closer.listener
    assert isinstance(listener, Listener)
    assert set(listener.seen) == due and max(listener.seen.values()) == 1  # its alerts evaluated once
    closed_lines = Counter(
        r.getMessage().split(" closed: ")[0] for r in caplog.records if " closed: " in r.getMessage()
    )
    assert len(closed_lines) == 2000 and max(closed_lines.values()) == 1
    assert result.closed + 100 == 2000 and result.left == 0  # the timer's one batch, then the stop's
    assert closer.pending() == []
    assert await closer.close_due(final=True) == []  # after the stop nothing more is closed


async def test_a_backlog_closes_in_batches(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(T0 + timedelta(days=1))
    store = SlowStore(clock)
    closer = await closer_with(2000, store, clock, batch=250)
    result = await closer.finish(budget_s=30.0)
    assert result.closed == 2000 and result.left == 0
    assert len(store.inserts) == 8  # 2,000 windows in 8 inserts
    assert store.reads == 16  # one read per batch and app


async def test_the_final_round_leaves_what_its_budget_cannot_close_and_says_so(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    clock = ManualClock(T0 + timedelta(days=1))
    store = SlowStore(clock, read_s=1.0)  # each read: 1 s, two a batch (two apps)
    closer = await closer_with(2000, store, clock)
    result = await closer.finish(budget_s=9.0)
    # batches of 2 s each: the fifth starts at 8 s (8 + 2 > 9 stops it): 4 batches, 400 windows
    assert (result.closed, result.left) == (400, 1600)
    assert result.seconds <= 9.0
    assert sum(store.written().values()) == 400
    left = [r for r in caplog.records if "LEFT for the next start" in r.getMessage()]
    assert len(left) == 1 and left[0].levelno == logging.WARNING
    assert "400 closed" in left[0].getMessage() and "1600 LEFT" in left[0].getMessage()
    assert len(closer.pending()) == 1600  # not closed: the next start recomputes them (reconcile)
    assert closer.left == 1600


async def test_a_failing_window_in_a_batch_does_not_keep_the_others(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(T0 + timedelta(days=1))

    class OneBadApp(SlowStore):
        async def rows_of_windows(
            self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
        ) -> list[EvalRow]:
            if app == "app1":
                raise ValueError("refused")
            return await super().rows_of_windows(app, model, starts, size_seconds)

    store = OneBadApp(clock)
    closer = await closer_with(20, store, clock)
    closed = await closer.close_due(final=True)
    assert len(closed) == 10 and {w.app for w in closed} == {"app0"}
    assert closer.failed == 10 and len(closer.pending()) == 10
