"""Closes conversations on event time and writes their rollups, computed from deduplicated ClickHouse rows.

The sink's flushes tell the closer which conversations got turns (``touch``; rows without a
conversation_id are conversations of one turn, counted by the windows directly). When one is due
(pipeline.conversations.OpenConversations: idle on event time, an end mark, or a quiet stream) its
rollup is computed from every stored turn (``evaluations FINAL``: a redelivered turn counts once, a late
one is simply there) and written to ``conversations`` with a version above the stored one's, so the row
a reader sees (FINAL) is the latest. The window its last turn falls in, and the one it fell in before
when a late turn moved it, are touched in the window closer, which recomputes them with the
conversation metrics.

One round at a time (a lock), in batches of ``conversations.close_batch`` (one read of turns, one of the
stored rollups and one insert per app and model). A batch that fails is logged and stays open: it is
tried again at the next tick. A conversation that gets a turn while it is being closed stays open for
that turn. Nothing is lost on a crash: at start ``reconcile`` reopens the conversations whose stored
turns differ from their rollup (or that have none) and the windows a rollup was written after.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from pipeline.clock import Clock, SystemClock
from pipeline.conversations import ConversationKey, OpenConversations, rollup
from schemas.conversation import ConversationRollup, ConversationTurn, marks_end
from schemas.settings import ConversationSettings, WindowSettings
from streams.windows.closer import Located
from streams.windows.tumbling import utc

log = logging.getLogger(__name__)


class ConversationStore(Protocol):
    """What the closer needs from storage (streams.clickhouse.conversations.ConversationRows is one)."""

    async def turns(self, app: str, model: str, ids: Sequence[str]) -> dict[str, list[ConversationTurn]]: ...

    async def current(self, app: str, model: str, ids: Sequence[str]) -> dict[str, tuple[datetime, int]]: ...

    async def insert(self, rows: Sequence[tuple[ConversationRollup, int]], written_at: datetime) -> None: ...

    async def unrolled(self, since: datetime) -> list[tuple[str, str, str, datetime, bool]]: ...

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[tuple[str, str, datetime]]: ...


class WindowToucher(Protocol):
    """The window closer: a written conversation makes the window it counts in due again."""

    async def touch(self, evaluations: Sequence[Located]) -> None: ...


def version_of(written_at: datetime) -> int:
    """A rollup's version from when it was written (microseconds): a later rollup replaces an earlier."""
    return int(utc(written_at).timestamp() * 1_000_000)


@dataclass
class _At:
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


class ConversationCloser:
    def __init__(
        self,
        settings: ConversationSettings,
        window: WindowSettings,
        store: ConversationStore,
        windows: WindowToucher | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.settings = settings
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

    async def touch(self, rows: Sequence[Any]) -> None:
        wall, now = self.clock.now(), self.clock.monotonic()
        for row in rows:
            found = conversation_of(row)
            if found is None:  # a conversation of one turn: counted by its window; event time moves on
                self.open.advance(row.app, row.model, utc(row.timestamp), wall)
                continue
            key, at, ends = found
            self.open.touch(key, at, ends, wall, now)

    async def reconcile(self, lookback: timedelta) -> tuple[int, int]:
        """Reopen the conversations an earlier worker left unrolled and touch the windows it wrote a
        rollup after; returns how many of each."""
        since = self.clock.now() - lookback
        unrolled = await self.store.unrolled(since)
        for app, model, cid, last, ends in unrolled:
            self.open.reopen((app, model, cid), last, ends)
        stale = await self.store.stale_windows(self.window.size_seconds, since)
        if stale and self.windows is not None:
            await self.windows.touch([_At(app, model, start) for app, model, start in stale])
        return len(unrolled), len(stale)

    async def close_due(self) -> list[ConversationRollup]:
        """Close every due conversation (one round at a time), in batches; returns the rollups written."""
        async with self._lock:
            keys = self.open.due(self.clock.now(), self.clock.monotonic())
            out: list[ConversationRollup] = []
            size = self.settings.close_batch
            for i in range(0, len(keys), size):
                batch = keys[i : i + size]
                try:
                    out += await self._close_batch(batch)
                except Exception as exc:
                    self.failed += 1
                    log.warning(
                        "conversations: closing %d failed (kept open; will retry): %s: %s",
                        len(batch), type(exc).__name__, str(exc)[:500],
                    )  # fmt: skip
            return out

    async def _close_batch(self, keys: Sequence[ConversationKey]) -> list[ConversationRollup]:
        generations = {k: self.open.generation(k) for k in keys}
        by_series: dict[tuple[str, str], list[str]] = defaultdict(list)
        for app, model, cid in keys:
            by_series[(app, model)].append(cid)
        written_at = self.clock.now()
        floor = version_of(written_at)
        rows: list[tuple[ConversationRollup, int]] = []
        moved: list[_At] = []
        for (app, model), ids in by_series.items():
            turns = await self.store.turns(app, model, ids)
            stored = await self.store.current(app, model, ids)
            for cid in ids:
                if not turns.get(cid):
                    continue  # its turns were erased: nothing to roll up
                c = rollup(app, model, cid, turns[cid], self.settings.reask_similarity)
                before = stored.get(cid)
                rows.append((c, max(floor, before[1] + 1) if before else floor))
                moved.append(_At(app, model, c.last_turn_at))
                if before is not None and before[0] != utc(c.last_turn_at):
                    moved.append(_At(app, model, before[0]))
        await self.store.insert(rows, written_at)
        self.written += len(rows)
        if self.windows is not None and moved:
            await self.windows.touch(moved)
        for key in keys:
            self.open.closed(key, generations[key])
        for c, _ in rows:
            log.debug(
                "conversation %s %s/%s closed: %d turns, unresolved %s", c.conversation_id, c.app, c.model,
                c.turns, c.ended_unresolved,
            )  # fmt: skip
        return [c for c, _ in rows]
