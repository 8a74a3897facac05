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
from pathlib import Path
from types import SimpleNamespace

import pytest

from pipeline.clock import ManualClock
from schemas.evaluation_row import EvalRow
from schemas.settings import ConversationSettings, WindowSettings
from schemas.window import WindowAggregate
from streams.context import new_context
from streams.resources import Resources as WorkerResources
from streams.windows.closer import WindowCloser
from streams.windows.conversations import ConversationCloser
from tests.fixtures.conversations import FailingTurns
from tests.fixtures.store import store_settings
from tests.settings_factory import make_settings

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

    async def server_now(self) -> datetime:
        return self.clock.now()

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


def backlog(n: int, apps: int = 2) -> list[Row]:
    """One row in each of ``n`` windows of ``apps`` apps, every window due by the watermark."""
    return [Row(f"app{i % apps}", "m", T0 + timedelta(seconds=SIZE * (i // apps) + 1)) for i in range(n)]


async def closer_with(
    n: int, store: SlowStore, clock: ManualClock, batch: int = 100, apps: int = 2
) -> WindowCloser:
    settings = WindowSettings(size_seconds=SIZE, grace_seconds=0, idle_close_seconds=10**6, close_batch=batch)
    closer = WindowCloser(settings, store, Listener(), clock=clock)
    await closer.touch(backlog(n, apps))  # type: ignore[arg-type]
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
    # app1's first window failed; its later ones wait for the next round (its rules see them in order)
    assert closer.failed == 1 and closer.failures == {("app1", "m", T0): 1}
    assert [k[:2] for k in closer.pending()] == [("app1", "m")] * 10


class TimingOutStore(SlowStore):
    """Every read takes a second on the clock, then times out (ClickHouse does not answer)."""

    async def rows_of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[EvalRow]:
        self.reads += 1
        self.clock.advance(1.0)
        raise TimeoutError("ClickHouse did not answer in time")


class RefusingStore(SlowStore):
    """Every read takes a second on the clock, then is refused (not an outage: split, one by one)."""

    async def rows_of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[EvalRow]:
        self.reads += 1
        self.clock.advance(1.0)
        raise ValueError("Code: 6. DB::Exception: cannot parse")


async def test_a_failing_batch_on_stop_keeps_to_the_budget(caplog: pytest.LogCaptureFixture) -> None:
    clock = ManualClock(T0 + timedelta(days=1))
    store = TimingOutStore(clock)
    closer = await closer_with(2000, store, clock)
    result = await closer.finish(budget_s=10.0)
    assert result.seconds <= 10.0 + 2.0, result
    assert store.reads == 1  # an outage: the batch is not split into 100 reads, nothing more is begun
    assert (result.closed, result.left, result.failed) == (0, 2000, 100)
    assert closer.failures == {}  # an outage is not the windows' fault: no attempt counted against them
    assert len([r for r in caplog.records if r.levelno >= logging.WARNING]) <= 2
    summary = [r.getMessage() for r in caplog.records if r.getMessage().startswith("windows on stop")]
    assert len(summary) == 1 and "2000 LEFT" in summary[0] and "100 failed" in summary[0]
    assert "TimeoutError" in summary[0]


async def test_a_refused_batch_on_stop_is_closed_one_by_one_within_the_budget_with_few_lines(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    clock = ManualClock(T0 + timedelta(days=1))
    store = RefusingStore(clock)
    closer = await closer_with(2000, store, clock, apps=200)  # one by one: a window of each app in turn
    result = await closer.finish(budget_s=10.0)
    assert result.seconds <= 10.0 + 1.0, result  # at most one read begun past the budget's end
    assert result.closed == 0 and result.left == 2000 and 0 < result.failed <= 11
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) <= 5 + 2, [r.getMessage() for r in lines]  # a few windows, "N more", the summary
    assert any("more windows failed" in r.getMessage() for r in lines)
    summary = [r.getMessage() for r in lines if r.getMessage().startswith("windows on stop")]
    assert len(summary) == 1 and f"{result.failed} failed" in summary[0]


async def test_a_timer_round_closing_one_by_one_ends_when_the_stop_begins() -> None:
    clock = ManualClock(T0 + timedelta(days=1))

    class RefusesThenHolds(SlowStore):
        async def rows_of_windows(
            self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
        ) -> list[EvalRow]:
            self.reads += 1
            if self.reads == 3:  # the batch failed; the one-by-one closing is under way
                self.held.set()
                await self.release.wait()
            raise ValueError("refused")

    store = RefusesThenHolds(clock)
    closer = await closer_with(200, store, clock)
    timer = asyncio.create_task(closer.close_due())
    await store.held.wait()
    final = asyncio.create_task(closer.finish(budget_s=-1.0))  # (a stop's round that begins nothing)
    await asyncio.sleep(0)
    store.release.set()
    assert await timer == []
    result = await final
    assert store.reads == 3  # the timer round ended after the window under way, not after 100 of them
    assert result.left == 200 and closer.failed == 2


async def test_a_window_left_by_the_stop_is_recomputed_at_the_next_start() -> None:
    """A row stored while the closer reads its window's rows (the sink flushes meanwhile) is newer than
    the aggregate: after a stop that leaves that window, the next start finds it (real chDB)."""
    from streams.clickhouse.store import ClickHouseStore
    from tests.fixtures.evaluations import T0 as W0
    from tests.fixtures.evaluations import at

    store = ClickHouseStore.open_sync(store_settings())
    settings = WindowSettings(size_seconds=10, grace_seconds=0, idle_close_seconds=1000)
    closer: WindowCloser

    class SinkFlushesMeanwhile:
        def __getattr__(self, name: str) -> object:
            return getattr(store, name)

        async def rows_of_windows(
            self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
        ) -> list[EvalRow]:
            rows = await store.rows_of_windows(app, model, starts, size_seconds)
            late = at("late", 5, 0.1)
            await store.insert_evaluations([late])  # type: ignore[list-item]
            await closer.touch([late])  # type: ignore[list-item]  # as Resources._after_flush does
            return rows

    try:
        closer = WindowCloser(settings, SinkFlushesMeanwhile())  # type: ignore[arg-type]
        first = at("a", 1, 0.9)
        await store.insert_evaluations([first])  # type: ignore[list-item]
        await closer.touch([first])  # type: ignore[list-item]
        assert [w.count for w in await closer.close_due(final=True)] == [1]
        assert [k[2] for k in closer.pending()] == [W0]
        assert (await closer.finish(budget_s=-1.0)).left == 1
        again = WindowCloser(settings, store)
        found = await again.reconcile(timedelta(hours=24))
        assert [k[2] for k in again.pending()] == [W0], f"reconcile found {found}: the late row is lost"
    finally:
        store.close()


@dataclass
class Turn:
    app: str
    model: str
    timestamp: datetime
    conversation_id: str
    interaction: SimpleNamespace


async def test_the_stop_shares_one_budget_between_conversations_and_windows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A third of kafka.shutdown_timeout_s (10 s of 30): the due conversations first (4 s a batch: two
    begin, at 0 and 4 s), the windows in what is left (2 s: one batch of 2 s); the rest is left, logged."""
    caplog.set_level(logging.INFO)
    settings = make_settings(
        kafka={"shutdown_timeout_s": 30}, clickhouse={"status_file": str(tmp_path / "status.json")}
    )
    ctx = new_context(settings, app=None)  # type: ignore[arg-type]
    clock = ManualClock(T0 + timedelta(days=1))
    resources = WorkerResources(ctx, clock=clock)
    turns_store = FailingTurns(ValueError("refused"), clock, seconds=4.0)  # not an outage: the round goes on
    conversations = ConversationSettings(idle_seconds=100, close_batch=10)
    resources.conversations = ConversationCloser(conversations, settings.window, turns_store, clock=clock)
    ends = SimpleNamespace(metadata={"conversation_end": True})
    await resources.conversations.touch([Turn("a", "m", T0, f"c{i}", ends) for i in range(50)])  # all due
    window_store = SlowStore(clock, read_s=1.0)
    resources._windows = await closer_with(2000, window_store, clock)
    started = clock.monotonic()
    await resources.finish()
    assert turns_store.reads == 2
    assert sum(window_store.written().values()) == 100  # one batch, begun at 8 s (8 + 0 <= 10)
    assert clock.monotonic() - started <= 10.0
    left = [r.getMessage() for r in caplog.records if "LEFT for the next start" in r.getMessage()]
    assert len(left) == 2 and "conversations on stop" in left[0] and "windows on stop" in left[1], left
