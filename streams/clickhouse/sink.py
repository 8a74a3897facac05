"""Batched, idempotent writes of Evaluations: flushed by size (batch_rows) or age (batch_seconds).

Each buffered row carries a callback (the ack of its source event), called only after its batch is in
ClickHouse: a crash before that leaves the events unacked, so they are redelivered and rewritten
(ReplacingMergeTree on interaction_id makes the rewrite harmless).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol

from schemas.evaluation import Evaluation
from schemas.settings import ClickHouseSettings
from streams.clickhouse.store import ClickHouseStore

log = logging.getLogger(__name__)

class Located(Protocol):
    app: str
    model: str
    timestamp: datetime


#: called after each written batch with the rows written and, for interactions that were already stored,
#: where they counted before (a replay with a new timestamp moves a row to another window: both change)
OnFlushed = Callable[[Sequence[Located]], Awaitable[None]]


class EvaluationSink:
    def __init__(
        self,
        settings: ClickHouseSettings,
        store: ClickHouseStore,
        on_flushed: OnFlushed | None = None,
    ) -> None:
        self.settings = settings
        self.store = store
        self.on_flushed = on_flushed
        self._rows: list[Evaluation] = []
        self._done: list[Callable[[], object]] = []
        self._oldest: float | None = None
        self._lock = asyncio.Lock()
        self.flushed_rows = 0

    def __len__(self) -> int:
        return len(self._rows)

    async def add(self, evaluation: Evaluation, on_written: Callable[[], object] | None = None) -> None:
        self._rows.append(evaluation)
        if on_written is not None:
            self._done.append(on_written)
        if self._oldest is None:
            self._oldest = time.monotonic()
        if len(self._rows) >= self.settings.batch_rows:
            await self.flush()

    def due(self, now: float | None = None) -> bool:
        if not self._rows or self._oldest is None:
            return False
        return (now if now is not None else time.monotonic()) - self._oldest >= self.settings.batch_seconds

    async def flush_if_due(self) -> None:
        if self.due():
            await self.flush()

    async def flush(self) -> int:
        async with self._lock:
            rows, done = self._rows, self._done
            if not rows:
                return 0
            self._rows, self._done, self._oldest = [], [], None
            try:
                before = await self.store.current_rows([e.interaction_id for e in rows])
                await self.store.insert_evaluations(rows)
            except Exception:
                # put them back in front; they stay unacked until a later flush succeeds
                self._rows[:0], self._done[:0] = rows, done
                self._oldest = time.monotonic()
                raise
            for callback in done:
                callback()
            self.flushed_rows += len(rows)
        if self.on_flushed is not None:
            await self.on_flushed([*before, *rows])
        return len(rows)
