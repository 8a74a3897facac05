"""Closes tumbling windows and writes their aggregates, computed from deduplicated ClickHouse rows.

The sink tells the closer which (app, model, window) got rows (``touch``) after each flush. A window is
due when the event-time watermark of its app and model (the latest timestamp seen for them, each
timestamp taken at most wall clock + ``max_skew_seconds``, so one event stamped in the future cannot
close every window) has passed its end plus the grace period, or when no row has landed in it for
``idle_close_seconds`` and its end is past on the wall clock (so a stream that goes quiet still gets its
last window written, and a window still running is not closed early). Its aggregate is then
recomputed from the ``evaluations`` table with FINAL, so
redelivered or replayed rows never count twice, and written to ``window_aggregates`` (a rewrite
replaces). Rows that arrive after a window closed touch it again and it is recomputed; a window closed
again whose aggregate comes out as the one this closer last wrote (the touch of rows it had already
counted) is neither evaluated by the alert rules nor written again.

Windows close in batches of ``close_batch`` (oldest first): the rows of a batch's windows are read in
one query per app and model, the windows handed to the listener (the alert rules) in order, then their
aggregates written in one insert. A window is written only once its alert rules were evaluated: one
whose rules failed stays due, and if a stop leaves it (or the worker dies) its stored aggregate, if any,
is older than its rows, so the next start finds it (``reconcile``) and evaluates its rules then (their
transition ids are deterministic: none is made twice). One closer round runs at a time (a lock): the
sink's timer round and the final round of a stop never overlap, so a window is closed, and its alerts
evaluated, once per round that finds it due.

Each due window closes or fails on its own: when a batch's read, rules or insert fail, its windows are
closed one by one, and a failure (ClickHouse refuses its query, its alerts cannot be published) is
logged with the window's key and counted, the windows of other apps and models are closed regardless,
and it is tried again at the next tick, ``max_close_attempts`` times in all, the later windows of its own
app and model waiting for it (alert rules see a series' windows in order: a transition decided for it
after a later window's would be out of order, a firing left open); then it is given up with an ERROR
log (it is no message, so it cannot be dead-lettered; rows that arrive for it later touch it again):
when its read and insert work and only its alert rules kept failing, its aggregate is still written
(no gap in the dashboard or in the later windows' rules), without its rules' transition; otherwise it
is dropped from the pending windows. A round logs at most ``rounds.LOG_FAILURES_PER_ROUND`` windows'
failures one by one, then one line with how many more failed. When ClickHouse is unavailable
(``streams.clickhouse.client.is_unavailable``: down, unreachable, a timeout; also the Kafka broker the
alerts are published to) the batch is not split, its windows are not counted against
``max_close_attempts`` and the round ends: one line, and every window stays pending for the next tick.

With a conversation source (``conversations``: the ``conversations`` table), a window also counts the
conversations whose last turn falls in it (schemas/metrics.py, the conversation metrics); the
conversation closer touches a window again when it writes a conversation that counts there.

A window's aggregate is stamped ``computed_at`` = the ClickHouse server's clock (``server_now``, the
clock its rows' ``inserted_at`` are stamped with) *before* its rows are read, so a row stored while they
are read is never older than the aggregate and ``reconcile`` finds that window again after a restart.
Both stamps come from the one server clock: a worker whose own clock is ahead or behind (skew between
machines, a clock moved) neither misses a stale window nor recomputes fresh ones, and workers writing
the same window order their rewrites on that one clock.

The stop (``finish``): a timer round under way ends after its current window; then one final round
closes every pending window, oldest first, for as long as its time budget lasts (a batch is begun only
while the time the last one took still fits, a window of a batch being closed one by one only while the
budget lasts) and not after ClickHouse turned out unavailable. The windows left (failed ones included)
are logged as left and not closed: their rows are stored after their last aggregate, so the next start
finds and recomputes them (``reconcile``). After ``finish`` the closer closes nothing more.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from pipeline.clock import Clock, SystemClock
from schemas.conversation import ConversationRollup
from schemas.evaluation_row import EvalRow
from schemas.settings import WindowSettings
from schemas.utc import utc
from schemas.window import WindowAggregate
from streams.clickhouse.client import is_unavailable
from streams.windows.aggregator import aggregate
from streams.windows.rounds import BatchOutcome, RoundLog, run_round
from streams.windows.tumbling import TumblingWindows, shift

log = logging.getLogger(__name__)

WindowKey = tuple[str, str, datetime]  # app, model, window start

#: the aggregates a closer remembers (the latest written), to tell a close that changes nothing
REMEMBERED_WINDOWS = 4096


class Located(Protocol):
    """Where a written row counts: its app, model and event time."""

    app: str
    model: str
    timestamp: datetime


class Owns(Protocol):
    """Whether this worker owns a series' windows (``app``, ``model``) or one of its conversations
    (``streams.ownership.Ownership.owns``)."""

    def __call__(self, app: str, model: str, conversation_id: str | None = None, /) -> bool: ...


class WindowStore(Protocol):
    """What the closer needs from storage (streams.clickhouse.store.ClickHouseStore is one)."""

    async def rows_of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[EvalRow]: ...

    async def insert_windows(self, windows: Sequence[WindowAggregate], computed_at: datetime) -> None: ...

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[WindowKey]: ...

    async def server_now(self) -> datetime:
        """The storage's own clock, the one its rows' ``inserted_at`` are stamped with."""
        ...


class ConversationSource(Protocol):
    """The closed conversations a window counts (streams.clickhouse.conversations.ConversationRows)."""

    async def of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[ConversationRollup]: ...


class WindowListener(Protocol):
    """What hears of closed windows before they are written (streams.alerts.engine.AlertEngine is one):
    the windows before them of their app and model are stored."""

    async def on_window(self, window: WindowAggregate) -> object: ...

    async def on_windows(self, windows: Sequence[WindowAggregate]) -> object:
        """Windows closed together, in order; raises at the first failure (the windows are then handed
        to ``on_window`` one by one, each written before the next, which must make nothing twice)."""
        ...


class Pausable:
    """A closer whose rounds a rebalance pauses (``streams.ownership``): ``pause`` lets the round under way
    end after its current batch, and none begins until ``resume``. The closer holds ``_lock`` (one round
    at a time) and ``paused``, which its rounds check between batches."""

    _lock: asyncio.Lock
    paused: bool

    async def pause(self, wait_s: float) -> bool:
        """Pause; wait up to ``wait_s`` seconds for the round under way to end, so the next owner does not
        close what this one is closing. Returns whether it ended."""
        self.paused = True
        try:
            await asyncio.wait_for(self._lock.acquire(), wait_s)
        except TimeoutError:
            return False
        self._lock.release()
        return True

    def resume(self) -> None:
        self.paused = False


@dataclass(frozen=True)
class FinalRound:
    """What the stop's round did: windows closed, windows left for the next start (the failed ones among
    them), windows whose close failed, seconds it took."""

    closed: int
    left: int
    failed: int
    seconds: float


def why_left(outage: str | None, out_of_time: bool, budget_s: float) -> str:
    """Why the stop's round left something for the next start (the windows' and the conversations')."""
    if outage:
        return f"ClickHouse unavailable: {outage}"
    return f"the stop's budget of {budget_s:g} s ran out" if out_of_time else "their close failed"


class WindowCloser(Pausable):
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
        self.unchanged = 0  # windows closed again with the aggregate last written: not written again
        # the aggregates last written, by window (the latest REMEMBERED_WINDOWS): a close that computes
        # the same is not written or evaluated again
        self._last: OrderedDict[WindowKey, WindowAggregate] = OrderedDict()
        self._lock = asyncio.Lock()  # one round at a time
        self._stopping = False  # finish() began: a round under way ends after its current batch
        self.paused = False  # ``pause``: a rebalance took the partitions; rounds wait for ``resume``
        self._finished = False  # finish() ended: nothing more is closed
        self._log = RoundLog()  # this round's failures, logged one by one up to a point
        self._outage: str | None = None  # why this round ended on an unavailable ClickHouse
        self._held: set[tuple[str, str]] = set()  # (app, model) with a window that failed this round

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

    async def reconcile(self, lookback: timedelta, owns: Owns | None = None) -> int:
        """Mark the windows a crashed worker (or the last owner of their series) left unclosed: rows
        written after their aggregate. Their in-memory marks died with it; ClickHouse still knows.
        ``owns``: only the series it says this worker owns. Returns how many were marked."""
        since = await self.store.server_now() - lookback  # (compared with the rows' inserted_at)
        stale = await self.store.stale_windows(self.settings.size_seconds, since)
        mine = [key for key in stale if owns is None or owns(key[0], key[1])]
        for key in mine:
            self._dirty.setdefault(key, float("-inf"))
        return len(mine)

    def forget(self, owns: Owns) -> int:
        """Drop the pending windows, watermarks, failure counts and last aggregates of the series ``owns``
        no longer says are this worker's (their new owner finds them in ClickHouse); returns how many
        windows."""
        gone = [key for key in self._dirty if not owns(key[0], key[1])]
        for key in gone:
            del self._dirty[key]
        for key in [k for k in self.failures if not owns(k[0], k[1])]:
            del self.failures[key]
        for series in [s for s in self.watermarks if not owns(*s)]:
            del self.watermarks[series]
        for key in [k for k in self._last if not owns(k[0], k[1])]:  # another owner may write it meanwhile
            del self._last[key]
        return len(gone)

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
        counted and retried at the next call (``max_close_attempts`` in all, then given up with an ERROR
        log: its aggregate written without its rules when only they failed); the others close. Closes
        nothing once ``finish`` began."""
        if self._stopping or self.paused:
            return []
        async with self._lock:
            if self._stopping or self.paused:
                return []
            closed, _ = await self._round(self.due(final=final), budget_s=None)
            return closed

    async def finish(self, budget_s: float) -> FinalRound:
        """The stop's round: let a round under way end after its current window, then close every pending
        window, oldest first, within ``budget_s`` seconds; the rest are left (logged) for the next start."""
        self._stopping = True
        started = self.clock.monotonic()
        async with self._lock:
            if self._finished:
                return FinalRound(0, 0, 0, 0.0)
            failed_before = self.failed
            try:
                closed, unbegun = await self._round(self.due(final=True), budget_s=budget_s, started=started)
            finally:
                self._finished = True
        seconds = self.clock.monotonic() - started
        left = self.pending()  # nothing closes after this: what is pending waits for the next start
        failed = self.failed - failed_before
        self.left += len(left)
        if left:
            first, last = left[0], left[-1]
            why = why_left(self._outage, bool(unbegun), budget_s)
            log.warning(
                "windows on stop: %d closed in %.1f s, %d LEFT for the next start to recompute, %d failed "
                "(%s; from %s %s/%s to %s %s/%s)",
                len(closed), seconds, len(left), failed, why, first[2].isoformat(), first[0], first[1],
                last[2].isoformat(), last[0], last[1],
            )  # fmt: skip
        else:
            log.info("windows on stop: %d closed in %.1f s, none left, %d failed", len(closed), seconds,
                     failed)  # fmt: skip
        return FinalRound(len(closed), len(left), failed, seconds)

    def _over(self, deadline: float | None) -> bool:
        """The round must begin nothing more: the stop's budget is spent (``deadline``, on the monotonic
        clock) or, for a timer round (no deadline), a stop began."""
        if deadline is None:
            return self._stopping or self.paused
        return self.clock.monotonic() > deadline

    async def _round(
        self, keys: list[WindowKey], budget_s: float | None, started: float | None = None
    ) -> tuple[list[WindowAggregate], list[WindowKey]]:
        """Close ``keys`` in batches, oldest first (``streams.windows.rounds.run_round``); returns the
        windows closed and the keys left."""
        begun = self.clock.monotonic() if started is None else started
        deadline = None if budget_s is None else begun + budget_s
        self._log = RoundLog()
        self._held = set()
        self._outage = None

        async def close(batch: list[WindowKey]) -> BatchOutcome[WindowAggregate, WindowKey]:
            closed, go_on = await self._close_batch(batch, deadline)
            return BatchOutcome(closed, [] if go_on else batch, go_on)

        try:
            done = await run_round(
                keys, self.settings.close_batch, close, self.clock, budget_s=budget_s, begun=begun,
                stopping=lambda: self._stopping or self.paused,
            )  # fmt: skip
        finally:
            self._log.end("windows")
        return done.closed, done.left

    async def _close_batch(
        self, keys: Sequence[WindowKey], deadline: float | None
    ) -> tuple[list[WindowAggregate], bool]:
        """Read the batch's windows, run their alert rules (in order), then write their aggregates in one
        insert: a window is stored once its rules were evaluated, so one whose rules failed stays due
        and, left by a stop or a crash, is found again at the next start (``reconcile``: its rows are
        newer than its stored aggregate). When the read, the rules or the insert fail for the batch, its
        windows are closed one by one instead, while the round may go on (``_over``); a window that
        fails holds the later windows of its app and model until the next round (the rules see each
        series' windows in order). Returns the windows closed and whether the round may go on (False
        once the round must end or ClickHouse is unavailable; the windows not closed stay pending)."""
        # not held by a failed window of its series; still pending (a rebalance may have forgotten it)
        keys = [k for k in keys if (k[0], k[1]) not in self._held and k in self._dirty]
        if not keys:
            return [], True
        touched = {key: self._dirty.get(key) for key in keys}
        try:
            # stamped before the read, on the storage's clock: a row stored meanwhile is newer than the
            # aggregate (``reconcile``), whatever the skew between this worker's clock and the server's
            computed_at = await self.store.server_now()
            windows = await self.compute(keys)
        except Exception as exc:
            return await self._split(keys, exc, deadline)
        keys = self._changed(keys, windows, touched)
        if not keys:
            return [], True
        if self.listener is not None:
            try:
                await self.listener.on_windows([windows[k] for k in keys])
            except Exception as exc:
                if is_unavailable(exc):
                    return await self._split(keys, exc, deadline)
                if len(keys) == 1:
                    return await self._rules_failed(keys[0], windows, touched, computed_at, exc)
                log.debug("windows: the alert rules of a batch of %d failed (%r); one by one", len(keys), exc)
                return await self._one_by_one(keys, windows, touched, computed_at, deadline)
        try:
            await self.store.insert_windows([windows[k] for k in keys], computed_at)
        except Exception as exc:
            return await self._split(keys, exc, deadline)
        return self._closed(keys, windows, touched), True

    async def _split(
        self, keys: Sequence[WindowKey], exc: Exception, deadline: float | None
    ) -> tuple[list[WindowAggregate], bool]:
        """The batch failed with ``exc``: ClickHouse unavailable ends the round; one window is counted as
        failed; more are closed one by one (each read, evaluated and written again: its rules make no
        transition twice)."""
        if is_unavailable(exc):
            self._unavailable(keys, exc)
            return [], False
        if len(keys) == 1:
            self._failed(keys[0], exc)
            return [], True
        log.debug("windows: a batch of %d failed (%r); closing them one by one", len(keys), exc)
        out: list[WindowAggregate] = []
        for key in keys:
            if self._over(deadline):
                return out, False
            closed, go_on = await self._close_batch([key], deadline)
            out += closed
            if not go_on:
                return out, False
        return out, True

    async def _one_by_one(
        self,
        keys: Sequence[WindowKey],
        windows: dict[WindowKey, WindowAggregate],
        touched: dict[WindowKey, float | None],
        computed_at: datetime,
        deadline: float | None,
    ) -> tuple[list[WindowAggregate], bool]:
        """The batch's rules failed: each window's rules, then its write, on its own (a window's rules
        read the windows before it as stored), while the round may go on."""
        assert self.listener is not None
        out: list[WindowAggregate] = []
        for key in keys:
            if self._over(deadline):
                return out, False
            if (key[0], key[1]) in self._held:
                continue
            try:
                await self.listener.on_window(windows[key])
            except Exception as exc:
                if is_unavailable(exc):
                    self._unavailable([key], exc)
                    return out, False
                closed, go_on = await self._rules_failed(key, windows, touched, computed_at, exc)
                out += closed
                if not go_on:
                    return out, False
                continue
            try:
                await self.store.insert_windows([windows[key]], computed_at)
            except Exception as exc:
                if is_unavailable(exc):
                    self._unavailable([key], exc)
                    return out, False
                self._failed(key, exc)
                continue
            out += self._closed([key], windows, touched)
        return out, True

    async def _rules_failed(
        self,
        key: WindowKey,
        windows: dict[WindowKey, WindowAggregate],
        touched: dict[WindowKey, float | None],
        computed_at: datetime,
        exc: Exception,
    ) -> tuple[list[WindowAggregate], bool]:
        """A window's alert rules failed with ``exc`` (not an outage): counted and tried again, or, after
        ``max_close_attempts``, given up and its aggregate written without them, so the dashboard and
        the later windows' rules have no gap. Returns the window when written and whether the round may
        go on."""
        if not self._failed(key, exc, rules_only=True):
            return [], True
        try:
            await self.store.insert_windows([windows[key]], computed_at)
        except Exception as write_exc:
            if is_unavailable(write_exc):
                self._unavailable([key], write_exc)  # stays pending: its rules are tried again
                return [], False
            self._dirty.pop(key, None)
            log.error(
                "window %s %s/%s: writing its aggregate failed too; DROPPED from the pending windows: %s: %s",
                key[2].isoformat(), key[0], key[1], type(write_exc).__name__, str(write_exc)[:500],
            )  # fmt: skip
            return [], True
        return self._closed([key], windows, touched), True

    def _changed(
        self, keys: Sequence[WindowKey], windows: dict[WindowKey, WindowAggregate],
        touched: dict[WindowKey, float | None],
    ) -> list[WindowKey]:  # fmt: skip
        """The windows whose aggregate differs from the one this closer last wrote for them; the others
        (touched again by rows they already counted: a touch that came after the read, a redelivery)
        are done, neither evaluated by the rules nor written again."""
        same = [k for k in keys if self._last.get(k) == windows[k]]
        for key in same:
            self.unchanged += 1
            self.failures.pop(key, None)
            if self._dirty.get(key) == touched[key]:
                self._dirty.pop(key, None)
        return [k for k in keys if k not in same] if same else list(keys)

    def _closed(
        self, keys: Sequence[WindowKey], windows: dict[WindowKey, WindowAggregate],
        touched: dict[WindowKey, float | None],
    ) -> list[WindowAggregate]:  # fmt: skip
        """Windows written, their rules evaluated: logged, and no longer pending unless touched again
        meanwhile."""
        self.written += len(keys)
        for key in keys:
            log.info(
                "window %s %s/%s closed: %d interactions, hallucination rate %s",
                key[2].isoformat(), key[0], key[1], windows[key].count, windows[key].hallucination_rate,
            )  # fmt: skip
            self.failures.pop(key, None)
            if self._dirty.get(key) == touched[key]:  # not touched again meanwhile
                self._dirty.pop(key, None)
            self._last.pop(key, None)
            self._last[key] = windows[key]
            if len(self._last) > REMEMBERED_WINDOWS:
                self._last.popitem(last=False)
        return [windows[k] for k in keys]

    def _unavailable(self, keys: Sequence[WindowKey], exc: Exception) -> None:
        """ClickHouse (or what the alert rules need) cannot answer now: the batch's windows stay pending,
        not counted against ``max_close_attempts``; one line, and the round ends."""
        self.failed += len(keys)
        self._outage = f"{type(exc).__name__}: {str(exc)[:300]}"
        first, last = keys[0], keys[-1]
        log.warning(
            "windows: closing %d windows (from %s %s/%s to %s %s/%s) failed, ClickHouse is unavailable: %s; "
            "they stay pending and this round ends",
            len(keys), first[2].isoformat(), first[0], first[1], last[2].isoformat(), last[0], last[1],
            self._outage,
        )  # fmt: skip

    def _failed(self, key: WindowKey, exc: Exception, rules_only: bool = False) -> bool:
        """Count a window's failed close; it is tried again (and holds the later windows of its app and
        model until then) or, after ``max_close_attempts``, given up: dropped from the pending windows,
        or, when only its alert rules failed (``rules_only``), left for the caller to write its
        aggregate. Returns True when it is given up."""
        app, model, start = key
        attempts = self.failures.get(key, 0) + 1
        self.failed += 1
        limit = self.settings.max_close_attempts
        quiet = not self._log.loud()  # past the round's first failures: counted in its last line instead
        if attempts < limit:
            self.failures[key] = attempts
            self._held.add((app, model))
            if not quiet:
                log.warning(
                    "window %s %s/%s: closing failed (attempt %d of %d; will retry): %s: %s",
                    start.isoformat(), app, model, attempts, limit, type(exc).__name__, str(exc)[:500],
                )  # fmt: skip
            return False
        self.failures.pop(key, None)
        self.dropped += 1
        if rules_only:
            if not quiet:
                log.error(
                    "window %s %s/%s: its alert rules failed %d times; given up: its aggregate is written "
                    "without them (no alert transition for it; new rows in it will try again): %s: %s",
                    start.isoformat(), app, model, attempts, type(exc).__name__, str(exc)[:500],
                )  # fmt: skip
            return True
        self._dirty.pop(key, None)
        if not quiet:
            log.error(
                "window %s %s/%s: closing failed %d times; DROPPED from the pending windows (no aggregate "
                "or alert written for it; new rows in it will try again): %s: %s",
                start.isoformat(), app, model, attempts, type(exc).__name__, str(exc)[:500],
            )  # fmt: skip
        return True
