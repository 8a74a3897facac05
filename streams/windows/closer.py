"""Closes tumbling windows and writes their aggregates, computed from deduplicated ClickHouse rows.

The sink tells the closer which (app, model, window) got rows (``touch``) after each flush. A window is
due when the event-time watermark of its app and model (the latest timestamp seen for them, each
timestamp taken at most wall clock + ``max_skew_seconds``, so one event stamped in the future cannot
close every window) has passed its end plus the grace period, or when no row has landed in it for
``idle_close_seconds`` and its end is past on the wall clock (so a stream that goes quiet still gets its
last window written, and a window still running is not closed early). Its aggregate is then
recomputed from the ``evaluations`` table with FINAL, so
redelivered or replayed rows never count twice, and written to ``window_aggregates`` (a rewrite
replaces). Rows that arrive after a window closed touch it again and it is recomputed.

Windows close in batches of ``close_batch`` (oldest first): the rows of a batch's windows are read in
one query per app and model, their aggregates written in one insert, then each is handed to the
listener in order. One closer round runs at a time (a lock): the sink's timer round and the final round
of a stop never overlap, so a window is closed, and its alerts evaluated, once per round that finds it
due.

Each due window closes or fails on its own: when a batch's read or insert fails, its windows are closed
one by one, and a failure (ClickHouse refuses its query, its alerts cannot be published) is logged with
the window's key and counted, the others are closed regardless, and it is tried again at the next tick,
``max_close_attempts`` times in all; then it is dropped from the pending windows with an ERROR log (it
is no message, so it cannot be dead-lettered; rows that arrive for it later touch it again).

With a conversation source (``conversations``: the ``conversations`` table), a window also counts the
conversations whose last turn falls in it (schemas/metrics.py, the conversation metrics); the
conversation closer touches a window again when it writes a conversation that counts there.

The stop (``finish``): a timer round under way ends after its current batch; then one final round
closes every pending window, oldest first, for as long as its time budget lasts (a batch is begun only
while the time the last one took still fits). The windows left are logged as left and not closed: their
rows are stored after their last aggregate, so the next start finds and recomputes them
(``reconcile``). After ``finish`` the closer closes nothing more.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from pipeline.clock import Clock, SystemClock
from schemas.conversation import ConversationRollup
from schemas.evaluation_row import EvalRow
from schemas.settings import WindowSettings
from schemas.window import WindowAggregate
from streams.windows.aggregator import aggregate
from streams.windows.tumbling import TumblingWindows, shift, utc

log = logging.getLogger(__name__)

WindowKey = tuple[str, str, datetime]  # app, model, window start


class Located(Protocol):
    """Where a written row counts: its app, model and event time."""

    app: str
    model: str
    timestamp: datetime


class WindowStore(Protocol):
    """What the closer needs from storage (streams.clickhouse.store.ClickHouseStore is one)."""

    async def rows_of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[EvalRow]: ...

    async def insert_windows(self, windows: Sequence[WindowAggregate], computed_at: datetime) -> None: ...

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[WindowKey]: ...


class ConversationSource(Protocol):
    """The closed conversations a window counts (streams.clickhouse.conversations.ConversationRows)."""

    async def of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[ConversationRollup]: ...


class WindowListener(Protocol):
    """What hears of closed windows (streams.alerts.engine.AlertEngine is one)."""

    async def on_window(self, window: WindowAggregate) -> object: ...

    async def on_windows(self, windows: Sequence[WindowAggregate]) -> object:
        """Windows closed together, in order; raises at the first failure (the windows are then handed
        to ``on_window`` one by one, which must make nothing twice)."""
        ...


@dataclass(frozen=True)
class FinalRound:
    """What the stop's round did: windows closed, windows left for the next start, seconds it took."""

    closed: int
    left: int
    failed: int
    seconds: float


class WindowCloser:
    """The one place windows close: marks windows as rows land (``touch``), finds the due ones and
    writes their aggregates (``close_due``), handing each to the listener (the alert engine)."""

    def __init__(
        self,
        settings: WindowSettings,
        store: WindowStore,
        listener: WindowListener | None = None,
        clock: Clock | None = None,
        conversations: ConversationSource | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.listener = listener
        self.conversations = conversations  # None: no conversation metrics
        self.clock: Clock = clock or SystemClock()
        self.windows = TumblingWindows(settings.size_seconds)
        self._dirty: dict[WindowKey, float] = {}  # -> monotonic time of the last row
        self.watermarks: dict[tuple[str, str], datetime] = {}  # (app, model) -> event-time watermark
        self.written = 0
        self.failures: dict[WindowKey, int] = {}  # failed closes in a row, by window
        self.failed = 0  # failed closes in all
        self.dropped = 0  # windows given up after max_close_attempts
        self.left = 0  # windows the stop's round left for the next start
        self._lock = asyncio.Lock()  # one round at a time
        self._stopping = False  # finish() began: a round under way ends after its current batch
        self._finished = False  # finish() ended: nothing more is closed

    async def touch(self, evaluations: Sequence[Located]) -> None:
        now = self.clock.monotonic()
        cap = shift(self.clock.now(), timedelta(seconds=self.settings.max_skew_seconds))
        for e in evaluations:
            ts = utc(e.timestamp)
            self._dirty[(e.app, e.model, self.windows.start_of(ts))] = now
            mark = min(ts, cap)
            current = self.watermarks.get((e.app, e.model))
            if current is None or mark > current:
                self.watermarks[(e.app, e.model)] = mark

    async def reconcile(self, lookback: timedelta) -> int:
        """Mark the windows a crashed worker left unclosed (rows written after their aggregate): their
        in-memory marks died with it; ClickHouse still knows. Returns how many were marked."""
        since = self.clock.now() - lookback
        stale = await self.store.stale_windows(self.settings.size_seconds, since)
        for key in stale:
            self._dirty.setdefault(key, float("-inf"))
        return len(stale)

    def pending(self) -> list[WindowKey]:
        return sorted(self._dirty, key=lambda k: (k[2], k[0], k[1]))

    def due(self, final: bool = False) -> list[WindowKey]:
        now = self.clock.monotonic()
        wall = self.clock.now()
        grace = timedelta(seconds=self.settings.grace_seconds)
        out = []
        for key, touched in self._dirty.items():
            end = self.windows.end_of(key[2])
            watermark = self.watermarks.get((key[0], key[1]))
            by_watermark = watermark is not None and watermark >= shift(end, grace)
            idle = now - touched >= self.settings.idle_close_seconds and end <= wall
            if final or by_watermark or idle:
                out.append(key)
        return sorted(out, key=lambda k: (k[2], k[0], k[1]))

    async def compute(self, keys: Sequence[WindowKey]) -> dict[WindowKey, WindowAggregate]:
        """The aggregates of these windows from their stored rows: one read per app and model."""
        by_series: dict[tuple[str, str], list[datetime]] = defaultdict(list)
        for app, model, start in keys:
            by_series[(app, model)].append(start)
        out: dict[WindowKey, WindowAggregate] = {}
        for (app, model), starts in by_series.items():
            rows = await self.store.rows_of_windows(app, model, starts, self.settings.size_seconds)
            by_start: dict[datetime, list[EvalRow]] = defaultdict(list)
            for row in rows:
                by_start[self.windows.start_of(utc(row.timestamp))].append(row)
            closed: dict[datetime, list[ConversationRollup]] | None = None
            if self.conversations is not None:
                closed = defaultdict(list)
                size = self.settings.size_seconds
                for c in await self.conversations.of_windows(app, model, starts, size):
                    closed[self.windows.start_of(utc(c.last_turn_at))].append(c)
            for start in starts:
                end = self.windows.end_of(start)
                out[(app, model, start)] = aggregate(
                    by_start.get(start, []), window_start=start, window_end=end, app=app, model=model,
                    conversations=None if closed is None else closed.get(start, []),
                )  # fmt: skip
        return out

    async def close_due(self, final: bool = False) -> list[WindowAggregate]:
        """Close every due window (one round at a time), each on its own: one that fails is logged,
        counted and retried at the next call (``max_close_attempts`` in all, then dropped with an ERROR
        log); the others close. Closes nothing once ``finish`` began."""
        if self._stopping:
            return []
        async with self._lock:
            if self._stopping:
                return []
            closed, _ = await self._round(self.due(final=final), budget_s=None)
            return closed

    async def finish(self, budget_s: float) -> FinalRound:
        """The stop's round: let a round under way end after its batch, then close every pending window,
        oldest first, within ``budget_s`` seconds; the rest are left (logged) for the next start."""
        self._stopping = True
        started = self.clock.monotonic()
        async with self._lock:
            if self._finished:
                return FinalRound(0, 0, 0, 0.0)
            failed_before = self.failed
            try:
                closed, left = await self._round(self.due(final=True), budget_s=budget_s, started=started)
            finally:
                self._finished = True
        seconds = self.clock.monotonic() - started
        self.left += len(left)
        if left:
            first, last = left[0], left[-1]
            log.warning(
                "windows on stop: %d closed in %.1f s, %d LEFT for the next start to recompute (the stop's "
                "budget of %g s ran out; from %s %s/%s to %s %s/%s)",
                len(closed), seconds, len(left), budget_s, first[2].isoformat(), first[0], first[1],
                last[2].isoformat(), last[0], last[1],
            )  # fmt: skip
        else:
            log.info("windows on stop: %d closed in %.1f s, none left", len(closed), seconds)
        return FinalRound(len(closed), len(left), self.failed - failed_before, seconds)

    async def _round(
        self, keys: list[WindowKey], budget_s: float | None, started: float | None = None
    ) -> tuple[list[WindowAggregate], list[WindowKey]]:
        """Close ``keys`` in batches, oldest first. With ``budget_s``, a batch begins only while the time
        the last batch took still fits in what is left of it; returns the windows closed and the keys
        left. Without, a round ends early (its keys left) only when a stop begins."""
        size = self.settings.close_batch
        begun = self.clock.monotonic() if started is None else started
        last_batch = 0.0
        out: list[WindowAggregate] = []
        for i in range(0, len(keys), size):
            now = self.clock.monotonic()
            if budget_s is None and self._stopping:
                return out, keys[i:]
            if budget_s is not None and now - begun + last_batch > budget_s:
                return out, keys[i:]
            out += await self._close_batch(keys[i : i + size])
            last_batch = self.clock.monotonic() - now
        return out, []

    async def _close_batch(self, keys: Sequence[WindowKey]) -> list[WindowAggregate]:
        """Write the batch's aggregates in one insert, then run each window's alert rules in order; when
        the batch's read or insert fails, each window is closed on its own instead."""
        touched = {key: self._dirty.get(key) for key in keys}
        try:
            windows = await self.compute(keys)
            await self.store.insert_windows([windows[k] for k in keys], self.clock.now())
        except Exception as exc:
            if len(keys) == 1:
                self._failed(keys[0], exc)
                return []
            log.debug("windows: a batch of %d failed (%r); closing them one by one", len(keys), exc)
            return [w for key in keys for w in await self._close_batch([key])]
        self.written += len(keys)
        for key in keys:
            log.info(
                "window %s %s/%s closed: %d interactions, hallucination rate %s",
                key[2].isoformat(), key[0], key[1], windows[key].count, windows[key].hallucination_rate,
            )  # fmt: skip
        heard = await self._tell(keys, [windows[k] for k in keys]) if self.listener is not None else set(keys)
        out = []
        for key in keys:
            if key not in heard:
                continue  # its alert rules failed: it stays due and they are evaluated (and sent) again
            self.failures.pop(key, None)
            if self._dirty.get(key) == touched[key]:  # not touched again meanwhile
                self._dirty.pop(key, None)
            out.append(windows[key])
        return out

    async def _tell(self, keys: Sequence[WindowKey], windows: list[WindowAggregate]) -> set[WindowKey]:
        """Hand the batch to the listener at once; when that fails, each window on its own. Returns the
        windows it took (the others are counted as failed)."""
        assert self.listener is not None
        try:
            await self.listener.on_windows(windows)
            return set(keys)
        except Exception as exc:
            if len(windows) == 1:
                self._failed(keys[0], exc)
                return set()
            log.debug("windows: the alert rules of a batch of %d failed (%r); one by one", len(windows), exc)
        heard = set()
        for key, window in zip(keys, windows, strict=True):
            try:
                await self.listener.on_window(window)
            except Exception as exc:
                self._failed(key, exc)
                continue
            heard.add(key)
        return heard

    def _failed(self, key: WindowKey, exc: Exception) -> None:
        app, model, start = key
        attempts = self.failures.get(key, 0) + 1
        self.failed += 1
        limit = self.settings.max_close_attempts
        if attempts < limit:
            self.failures[key] = attempts
            log.warning(
                "window %s %s/%s: closing failed (attempt %d of %d; will retry): %s: %s",
                start.isoformat(), app, model, attempts, limit, type(exc).__name__, str(exc)[:500],
            )  # fmt: skip
            return
        self.failures.pop(key, None)
        self._dirty.pop(key, None)
        self.dropped += 1
        log.error(
            "window %s %s/%s: closing failed %d times; DROPPED from the pending windows (no aggregate "
            "or alert written for it; new rows in it will try again): %s: %s",
            start.isoformat(), app, model, attempts, type(exc).__name__, str(exc)[:500],
        )  # fmt: skip
