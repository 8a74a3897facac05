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

Each due window closes or fails on its own: a failure (ClickHouse refuses its query, its alerts cannot
be published) is logged with the window's key and counted, the others are closed regardless, and it is
tried again at the next tick, ``max_close_attempts`` times in all; then it is dropped from the pending
windows with an ERROR log (it is no message, so it cannot be dead-lettered; rows that arrive for it
later touch it again).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Protocol

from pipeline.clock import Clock, SystemClock
from schemas.evaluation_row import EvalRow
from schemas.settings import WindowSettings
from schemas.utc import utc
from schemas.window import WindowAggregate
from streams.windows.aggregator import aggregate
from streams.windows.tumbling import TumblingWindows, shift

log = logging.getLogger(__name__)

WindowKey = tuple[str, str, datetime]  # app, model, window start


class Located(Protocol):
    """Where a written row counts: its app, model and event time."""

    app: str
    model: str
    timestamp: datetime


class WindowStore(Protocol):
    """What the closer needs from storage (streams.clickhouse.store.ClickHouseStore is one)."""

    async def rows_between(self, app: str, model: str, start: datetime, end: datetime) -> list[EvalRow]: ...

    async def insert_window(self, window: WindowAggregate, computed_at: datetime) -> None: ...

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[WindowKey]: ...


class WindowListener(Protocol):
    async def on_window(self, window: WindowAggregate) -> object: ...


class WindowCloser:
    """The one place windows close: marks windows as rows land (``touch``), finds the due ones and
    writes their aggregates (``close_due``), handing each to the listener (the alert engine)."""

    def __init__(
        self,
        settings: WindowSettings,
        store: WindowStore,
        listener: WindowListener | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.listener = listener
        self.clock: Clock = clock or SystemClock()
        self.windows = TumblingWindows(settings.size_seconds)
        self._dirty: dict[WindowKey, float] = {}  # -> monotonic time of the last row
        self.watermarks: dict[tuple[str, str], datetime] = {}  # (app, model) -> event-time watermark
        self.written = 0
        self.failures: dict[WindowKey, int] = {}  # failed closes in a row, by window
        self.failed = 0  # failed closes in all
        self.dropped = 0  # windows given up after max_close_attempts

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

    async def compute(self, app: str, model: str, start: datetime) -> WindowAggregate:
        end = self.windows.end_of(start)
        rows = await self.store.rows_between(app, model, start, end)
        return aggregate(rows, window_start=start, window_end=end, app=app, model=model)

    async def close_due(self, final: bool = False) -> list[WindowAggregate]:
        """Close every due window, each on its own: one that fails is logged, counted and retried at the
        next call (``max_close_attempts`` in all, then dropped with an ERROR log); the others close."""
        out = []
        for key in self.due(final=final):
            try:
                window = await self._close(key)
            except Exception as exc:
                self._failed(key, exc)
                continue
            self.failures.pop(key, None)
            out.append(window)
        return out

    async def _close(self, key: WindowKey) -> WindowAggregate:
        """Write one window's aggregate and run its alert rules; raise when either fails (the window
        stays due)."""
        touched = self._dirty.get(key)
        app, model, start = key
        window = await self.compute(app, model, start)
        await self.store.insert_window(window, self.clock.now())
        self.written += 1
        log.info(
            "window %s %s/%s closed: %d interactions, hallucination rate %s",
            start.isoformat(),
            app,
            model,
            window.count,
            window.hallucination_rate,
        )
        if self.listener is not None:
            # a failure raises: the window stays due and its rules are evaluated (and sent) again
            await self.listener.on_window(window)
        if self._dirty.get(key) == touched:  # not touched again meanwhile
            self._dirty.pop(key, None)
        return window

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
