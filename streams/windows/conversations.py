"""Closes conversations on event time and writes their rollups, computed from deduplicated ClickHouse rows.

The sink's flushes tell the closer which conversations got turns (``touch``; a row without a
conversation_id is a conversation of one turn: the windows count it from its evaluation, and its own
row, keyed by its interaction_id, is written at the next round from its stored evaluation with that
evaluation's version, so it matches the evaluation read with FINAL). When one is due
(pipeline.conversations.OpenConversations: idle on event time, an end mark, or a quiet stream) its
rollup is computed from every stored turn (``evaluations FINAL``: a redelivered turn counts once, a late
one is simply there) and written to ``conversations`` with a version above the stored one's, so the row
a reader sees (FINAL) is the latest. The window its last turn falls in, and the one it fell in before
when a late turn moved it, are touched in the window closer, which recomputes them with the
conversation metrics.

One round at a time (a lock), in batches of ``conversations.close_batch`` (one read of turns, one of the
stored rollups and one insert per app and model). A batch that fails stays open and is tried again at the
next tick; a round logs at most ``rounds.LOG_FAILURES_PER_ROUND`` failed batches one by one, then one
line with how many more. When ClickHouse is unavailable (``streams.clickhouse.client.is_unavailable``) the
round ends at once with one line: every due conversation stays open for the next tick. The stop
(``finish(budget_s)``) works as the window closer's: a round under way ends after its batch, then one
round closes the due conversations while its budget lasts; what is left is logged and rolled up at the
next start (``reconcile``), and nothing closes after it. A conversation that gets a turn while it is
being closed stays open for that turn. Nothing is lost on a crash: at start ``reconcile`` reopens the
conversations with no rollup, or with turns other than or stored after those of their rollup, queues the
interactions without a conversation_id whose row is missing or older than their evaluation, and touches
the windows a rollup was written after.

With a ``judge`` (``conversations.judge`` llm: pipeline.conversation_judge) the re-asks and
contradictions of a closing conversation are decided by the LLM judge, the conversations of a batch
concurrently (the judge client's slots bound them); a failing judge leaves the lexical verdicts.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from pipeline.clock import Clock, SystemClock
from pipeline.conversation_judge import ConversationJudge
from pipeline.conversations import (
    ConversationKey,
    OpenConversations,
    PairVerdicts,
    in_order,
    rollup,
    single,
    turns_digest,
)
from pipeline.sampling import JudgeBudgets
from schemas.conversation import ConversationRollup, ConversationTurn, marks_end
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.settings import ConversationSettings, WindowSettings
from schemas.touch import Touch
from streams.clickhouse.client import is_unavailable
from streams.clickhouse.conversations import Current, Written
from streams.clickhouse.rows import evaluation_version
from streams.windows.closer import FinalRound, Located, Owns, Pausable, why_left
from streams.windows.rounds import BatchOutcome, RoundLog, run_round
from streams.windows.tumbling import utc

log = logging.getLogger(__name__)


class ConversationStore(Protocol):
    """What the closer needs from storage (streams.clickhouse.conversations.ConversationRows is one)."""

    async def turns(self, app: str, model: str, ids: Sequence[str]) -> dict[str, list[ConversationTurn]]: ...

    async def current(self, app: str, model: str, ids: Sequence[str]) -> dict[str, Current]: ...

    async def insert(self, rows: Sequence[Written], written_at: datetime) -> None: ...

    async def unrolled(self, since: datetime) -> list[tuple[str, str, str, datetime, bool]]: ...

    async def last_stored(self) -> datetime | None: ...

    async def singles(self, ids: Sequence[str]) -> list[tuple[EvalRow, int, datetime]]: ...

    async def unrolled_singles(self, since: datetime) -> list[tuple[str, str, str]]: ...

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[tuple[str, str, datetime]]: ...


class WindowToucher(Protocol):
    """The window closer: a written conversation makes the window it counts in due again."""

    async def touch(self, evaluations: Sequence[Located]) -> None: ...


def _rollups(
    app: str,
    model: str,
    ids: Sequence[str],
    turns: Mapping[str, Sequence[ConversationTurn]],
    similarity: float,
    judged: Sequence[PairVerdicts | None],
) -> list[ConversationRollup]:
    """The rollups of one series' conversations ``ids`` (run in a thread: CPU work)."""
    return [rollup(app, model, cid, turns[cid], similarity, v) for cid, v in zip(ids, judged, strict=True)]


def version_of(written_at: datetime) -> int:
    """A rollup's version from when it was written (microseconds): a later rollup replaces an earlier."""
    return int(utc(written_at).timestamp() * 1_000_000)


@dataclass
class At:
    app: str
    model: str
    timestamp: datetime


def conversation_of(row: Any) -> tuple[ConversationKey, datetime, bool] | None:
    """(key, event time, end marked) of a written row (an Evaluation or a stored EvalRow); None without a
    conversation_id."""
    cid = getattr(row, "conversation_id", None)
    if cid is None:
        return None
    interaction = getattr(row, "interaction", None)
    ends = interaction is not None and marks_end(interaction.metadata)
    return (row.app, row.model, cid), utc(row.timestamp), ends


class ConversationCloser(Pausable):
    def __init__(
        self,
        settings: ConversationSettings,
        window: WindowSettings,
        store: ConversationStore,
        windows: WindowToucher | None = None,
        clock: Clock | None = None,
        judge: ConversationJudge | None = None,
        budgets: JudgeBudgets | None = None,
    ) -> None:
        """``judge``: decides re-asks and contradictions with the LLM judge (``conversations.judge`` llm);
        without it (or when it is off) they are lexical. ``budgets``: the apps' judge budgets (sampling):
        the judge's spend on a conversation is charged to its app, and an app whose budget is spent keeps
        its lexical verdicts."""
        self.settings = settings
        self.judge = judge if judge else None
        self.budgets = budgets
        self.window = window
        self.store = store
        self.windows = windows
        self.clock: Clock = clock or SystemClock()
        quiet = None if settings.quiet_seconds is None else timedelta(seconds=settings.quiet_seconds)
        self.open = OpenConversations(
            timedelta(seconds=settings.idle_seconds), timedelta(seconds=window.max_skew_seconds), quiet
        )
        self.written = 0  # rollups written
        self.failed = 0  # batches that failed
        self._lock = asyncio.Lock()
        self._stopping = False  # ``finish`` began: a round under way ends after its batch
        self.paused = False  # ``pause``: a rebalance took the partitions; rounds wait for ``resume``
        self._finished = False
        self._outage: str | None = None  # why the last round ended early: ClickHouse unavailable
        self._out_of_time = False  # ... or the stop's budget ran out
        self._log = RoundLog()  # this round's failed batches, logged one by one up to a point
        #: interactions without a conversation_id whose row is not written yet, by id
        #: id -> its row (from the evaluation the sink wrote), or None: to read from its stored evaluation
        self._singles: dict[str, Written | None] = {}

    async def touch(self, rows: Sequence[Any]) -> None:
        wall, now = self.clock.now(), self.clock.monotonic()
        for row in rows:
            found = conversation_of(row)
            if found is None:  # a conversation of one turn: its row is written at the next round
                self.open.advance(row.app, row.model, utc(row.timestamp), wall)
                self._pend_single(row)
                continue
            key, at, ends = found
            self.open.touch(key, at, ends, wall, now)

    def touched(self, touch: Touch) -> None:
        """A conversation this worker owns got turns (``streams.ownership``): it is open (or open again)
        and its series' event time moved to the touch's watermark."""
        if touch.conversation_id is None:
            return
        wall, now = self.clock.now(), self.clock.monotonic()
        self.open.advance(touch.app, touch.model, utc(touch.watermark), wall)
        key = (touch.app, touch.model, touch.conversation_id)
        self.open.touch(key, utc(touch.last), touch.ends, wall, now)

    def pend_singles(self, rows: Sequence[Any]) -> None:
        """The written rows without a conversation_id: this worker writes their rows at its next round
        (each is one interaction's, keyed by its id: no other worker's rows meet it)."""
        for row in rows:
            if conversation_of(row) is None:
                self._pend_single(row)

    def forget(self, owns: Owns) -> int:
        """Drop the open conversations ``owns`` no longer says are this worker's (their new owner
        reopens them from ClickHouse); returns how many."""
        return self.open.forget(lambda key: owns(*key))

    async def reconcile(self, lookback: timedelta, owns: Owns | None = None) -> tuple[int, int]:
        """Reopen the conversations an earlier worker (or their last owner) left unrolled, queue the
        rows of one turn it left unwritten, and touch the windows it wrote a rollup after; returns how
        many conversations and windows. ``owns``: only the conversations, and the series, it says this
        worker owns. All are looked for ``lookback`` back from the last stored evaluation (or from
        now, if that is earlier): a conversation open when the last worker stopped had a turn stored
        shortly before, however long ago it stopped."""
        now = self.clock.now()
        last = await self.store.last_stored()
        since = min(now, last or now) - lookback
        unrolled = [u for u in await self.store.unrolled(since) if owns is None or owns(u[0], u[1], u[2])]
        for app, model, cid, last, ends in unrolled:
            self.open.reopen((app, model, cid), last, ends)
        for app, model, iid in await self.store.unrolled_singles(since):
            if owns is None or owns(app, model):
                self._singles.setdefault(iid, None)
        stale = await self.store.stale_windows(self.window.size_seconds, since)
        stale = [w for w in stale if owns is None or owns(w[0], w[1])]
        if stale and self.windows is not None:
            await self.windows.touch([At(app, model, start) for app, model, start in stale])
        return len(unrolled), len(stale)

    async def close_due(self) -> list[ConversationRollup]:
        """Close every due conversation (one round at a time), in batches; returns the rollups written.
        Closes nothing once ``finish`` began; a round under way ends after its current batch."""
        if self._stopping or self.paused:
            return []
        async with self._lock:
            if self._stopping or self.paused:
                return []
            closed, _ = await self._round(self.open.due(self.clock.now(), self.clock.monotonic()), None)
            await self._write_singles()
            return closed

    async def finish(self, budget_s: float) -> FinalRound:
        """The stop's round: let a round under way end after its current batch, then close the due
        conversations within ``budget_s`` seconds; the rest stay unrolled (logged) and the next start
        reopens them (``reconcile``). After it the closer closes nothing more."""
        self._stopping = True
        started = self.clock.monotonic()
        async with self._lock:
            if self._finished:
                return FinalRound(0, 0, 0, 0.0)
            failed_before = self.failed
            try:
                keys = self.open.due(self.clock.now(), self.clock.monotonic())
                closed, left = await self._round(keys, budget_s, started)
                if self.clock.monotonic() - started < budget_s:
                    await self._write_singles()
            finally:
                self._finished = True
        seconds = self.clock.monotonic() - started
        failed = self.failed - failed_before
        if left:
            why = why_left(self._outage, self._out_of_time, budget_s)
            log.warning(
                "conversations on stop: %d closed in %.1f s, %d due LEFT for the next start to roll up, %d "
                "batches failed (%s)",
                len(closed), seconds, len(left), failed, why,
            )  # fmt: skip
        else:
            log.info("conversations on stop: %d closed in %.1f s, none due left", len(closed), seconds)
        return FinalRound(len(closed), len(left), failed, seconds)

    async def _round(
        self, keys: list[ConversationKey], budget_s: float | None, started: float | None = None
    ) -> tuple[list[ConversationRollup], list[ConversationKey]]:
        """Close ``keys`` in batches of ``close_batch`` (``streams.windows.rounds.run_round``); returns the
        rollups written and the keys not closed (those of failed batches and those never begun)."""
        self._outage = None
        self._log = RoundLog()
        try:
            done = await run_round(
                keys, self.settings.close_batch, self._batch, self.clock, budget_s=budget_s,
                begun=self.clock.monotonic() if started is None else started,
                stopping=lambda: self._stopping or self.paused,
            )  # fmt: skip
        finally:
            self._log.end("batches")
        self._out_of_time = done.out_of_time
        return done.closed, done.left

    async def _batch(self, batch: list[ConversationKey]) -> BatchOutcome[ConversationRollup, ConversationKey]:
        """One batch closed, or kept open when it fails (logged, up to the round's limit); ClickHouse
        unavailable ends the round (one line)."""
        try:
            return BatchOutcome(await self._close_batch(batch))
        except Exception as exc:
            self.failed += 1
            if is_unavailable(exc):
                self._outage = f"{type(exc).__name__}: {str(exc)[:300]}"
                log.warning(
                    "conversations: closing a batch of %d due conversations failed, ClickHouse is "
                    "unavailable: %s; they and the rest of the round stay open and the round ends",
                    len(batch), self._outage,
                )  # fmt: skip
                return BatchOutcome([], batch, go_on=False)
            if self._log.loud():
                log.warning(
                    "conversations: closing %d failed (kept open; will retry): %s: %s",
                    len(batch), type(exc).__name__, str(exc)[:500],
                )  # fmt: skip
            return BatchOutcome([], batch)

    @property
    def singles_pending(self) -> int:
        """Interactions without a conversation_id whose row is not written yet."""
        return len(self._singles)

    def _pend_single(self, row: Any) -> None:
        """The row of one turn of a written evaluation without a conversation_id, with the evaluation's
        version (the higher of two pending for one id); a stored row (not an Evaluation) is read again."""
        iid = row.interaction_id
        if not isinstance(row, Evaluation):
            self._singles[iid] = None
            return
        mine: Written = (single(EvalRow.from_evaluation(row)), evaluation_version(row), None, "")
        pending = self._singles.get(iid)
        if iid not in self._singles or (pending is not None and pending[1] <= mine[1]):
            self._singles[iid] = mine

    async def _write_singles(self) -> None:
        """The rows of the interactions without a conversation_id touched since the last round, in
        batches of ``close_batch``, each with its evaluation's version (so the row read with FINAL is
        that of the evaluation read with FINAL): from the evaluation the sink wrote, or, for those a
        start found unwritten, from the stored one. A batch that fails stays pending for the next round
        (one line); the windows count these interactions from their evaluations."""
        size = self.settings.close_batch
        while self._singles:
            batch = dict(list(self._singles.items())[:size])  # id -> its pending row then
            try:
                unread = [iid for iid, pending in batch.items() if pending is None]
                found = await self.store.singles(unread) if unread else []
                rows = [w for w in batch.values() if w is not None]
                rows += [(single(row), version, stored, "") for row, version, stored in found]
                await self.store.insert(rows, self.clock.now())
            except Exception as exc:
                self.failed += 1
                log.warning(
                    "conversations: writing %d rows of interactions without a conversation_id failed (kept; "
                    "will retry): %s: %s", len(self._singles), type(exc).__name__, str(exc)[:300],
                )  # fmt: skip
                return
            self.written += len(rows)
            for iid, pending in batch.items():
                if iid in self._singles and self._singles[iid] is pending:  # else touched again meanwhile
                    del self._singles[iid]

    async def _judged(
        self, judge: ConversationJudge, app: str, conversations: Sequence[Sequence[ConversationTurn]]
    ) -> list[PairVerdicts]:
        """The LLM judge's verdicts on one app's conversations, within the app's judge budget."""
        budgets = self.budgets
        spent = budgets.exhausted(app) if budgets is not None else None
        verdicts = await asyncio.gather(*(judge.review(turns, spent=spent) for turns in conversations))
        if budgets is not None:
            for v in verdicts:
                budgets.record(app, v.input_tokens + v.output_tokens, v.cost_usd)
        return list(verdicts)

    async def _close_batch(self, keys: Sequence[ConversationKey]) -> list[ConversationRollup]:
        keys = [k for k in keys if k in self.open]  # a rebalance may have forgotten some meanwhile
        if not keys:
            return []
        generations = {k: self.open.generation(k) for k in keys}
        by_series: dict[tuple[str, str], list[str]] = defaultdict(list)
        for app, model, cid in keys:
            by_series[(app, model)].append(cid)
        written_at = self.clock.now()
        floor = version_of(written_at)
        rows: list[Written] = []
        moved: list[At] = []
        for (app, model), ids in by_series.items():
            turns = await self.store.turns(app, model, ids)
            stored = await self.store.current(app, model, ids)
            digests = {cid: turns_digest(turns[cid]) for cid in ids if turns.get(cid)}
            # one whose turns were erased has nothing; one whose stored rollup has these very turns is
            # done (a repeated touch, a new owner's reconcile): neither judged nor written again
            present = [cid for cid, d in digests.items() if cid not in stored or stored[cid][2] != d]
            judged: list[PairVerdicts | None] = [None] * len(present)
            if self.judge is not None:
                judged = list(await self._judged(self.judge, app, [in_order(turns[cid]) for cid in present]))
            # rollups are CPU work that grows with a conversation's turns: in a thread, off the event loop
            rolled = await asyncio.to_thread(
                _rollups, app, model, present, turns, self.settings.reask_similarity, judged
            )
            for cid, c in zip(present, rolled, strict=True):
                before = stored.get(cid)
                at = max((t.stored_at for t in turns[cid] if t.stored_at is not None), default=None)
                rows.append((c, max(floor, before[1] + 1) if before else floor, at, digests[cid]))
                moved.append(At(app, model, c.last_turn_at))
                if before is not None and before[0] != utc(c.last_turn_at):
                    moved.append(At(app, model, before[0]))
        await self.store.insert(rows, written_at)
        self.written += len(rows)
        if self.windows is not None and moved:
            await self.windows.touch(moved)
        for key in keys:
            self.open.closed(key, generations[key])
        for c, *_ in rows:
            log.debug(
                "conversation %s %s/%s closed: %d turns, unresolved %s", c.conversation_id, c.app, c.model,
                c.turns, c.ended_unresolved,
            )  # fmt: skip
        return [c for c, *_ in rows]
