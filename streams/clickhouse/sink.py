"""Batched, idempotent writes of Evaluations: flushed by size (batch_rows) or age (batch_seconds), in
the buffer every batched writer uses (``streams.clickhouse.batch.RowBatch``).

Each buffered row carries a callback (the ack of its source event), called only after its batch is in
ClickHouse: a crash before that leaves the events unacked, so they are redelivered and rewritten
(ReplacingMergeTree on interaction_id makes the rewrite harmless).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Protocol

from pipeline.clock import Clock, Stopwatch, SystemClock
from schemas.evaluation import Evaluation
from schemas.settings import ClickHouseSettings
from streams.clickhouse.batch import RowBatch
from streams.clickhouse.client import is_unavailable
from streams.clickhouse.store import ClickHouseStore

log = logging.getLogger(__name__)


class Located(Protocol):
    app: str
    model: str
    timestamp: datetime


#: called with a row ClickHouse keeps rejecting (while it answers other queries) and the error: it
#: dead-letters the row (stage "sink"); the row's callback (its ack) runs once this returned
OnRejected = Callable[[Evaluation, Exception], Awaitable[None]]

#: called with each written batch, and where its rows counted before for interactions already stored (a
#: replay with a new timestamp moves a row to another window: both change), before the batch's acks:
#: what must follow from it as surely as the batch (the touches of its windows and conversations, end
#: users' feedback labels). If it raises, the batch goes back to the buffer unacked and is written again
#: later (the rewrite is harmless), so a crash or an outage in between loses nothing
BeforeAck = Callable[[list[Evaluation], Sequence[Located]], Awaitable[None]]


class EvaluationSink:
    def __init__(
        self,
        settings: ClickHouseSettings,
        store: ClickHouseStore,
        on_rejected: OnRejected | None = None,
        on_written: Callable[[list[Evaluation], float], object] | None = None,
        clock: Clock | None = None,
        before_ack: BeforeAck | None = None,
    ) -> None:
        self.settings = settings
        self.clock: Clock = clock or SystemClock()  # a batch's age (batch_seconds) is measured on it
        self.store = store
        self.on_rejected = on_rejected
        self.on_written = on_written  # (rows written, seconds the insert took): for metrics
        self.before_ack = before_ack
        self.failures = 0  # failed flushes in a row
        self.rejected = 0
        self._batch: RowBatch[Evaluation] = RowBatch(
            settings.batch_rows, settings.batch_seconds, self.clock, settings.insert_share
        )
        self._rejected_now: set[int] = set()  # rows the split under way dead-lettered (by identity)
        self.flushed_rows = 0

    def __len__(self) -> int:
        return len(self._batch)

    async def add(self, evaluation: Evaluation, on_written: Callable[[], object] | None = None) -> None:
        if self._batch.add(evaluation, on_written):  # one callback per row
            await self.flush()

    def due(self) -> bool:
        """The oldest buffered row has waited ``batch_seconds``."""
        return self._batch.due()

    async def flush_if_due(self) -> None:
        if self.due():
            await self.flush()

    async def flush(self) -> int:
        """Write the buffered rows; on failure they go back to the buffer (unacked) and this raises.

        After ``sink_max_failures`` failed flushes in a row the batch is split in halves until the rows
        that still fail are alone; a lone row that fails while ClickHouse answers ``SELECT 1`` is handed
        to ``on_rejected`` (dead-lettered) and acked, the rest are written. When ClickHouse does not
        answer (an outage) nothing is dead-lettered: the rows stay buffered and this raises.
        """
        async with self._batch.lock:
            rows, done = self._batch.take()
            if not rows:
                return 0
            self._rejected_now.clear()
            paced_from = self.clock.monotonic()
            try:
                before = await self.store.current_rows([e.interaction_id for e in rows])
                watch = Stopwatch()
                try:
                    await self.store.insert_evaluations(rows)
                except Exception:
                    self.failures += 1
                    if self.on_rejected is None or self.failures < self.settings.sink_max_failures:
                        raise
                    log.warning("sink: %d failed flushes in a row; splitting the batch", self.failures)
                    rows, done = await self._isolate(rows, done)
                if self.before_ack is not None and rows:
                    await self.before_ack(list(rows), before)
            except Exception:
                # put them back in front; they stay unacked until a later flush succeeds (but for rows
                # an interrupted split already dead-lettered and acked: those are done)
                kept = [(r, d) for r, d in zip(rows, done, strict=True) if id(r) not in self._rejected_now]
                self._batch.put_back([r for r, _ in kept], [d for _, d in kept])
                raise
            self.failures = 0
            self._batch.wrote(self.clock.monotonic() - paced_from)
            for callback in done:
                callback()
            self.flushed_rows += len(rows)
            if self.on_written is not None:
                self.on_written(list(rows), watch.seconds())
        return len(rows)

    async def _isolate(
        self, rows: list[Evaluation], done: list[Callable[[], object]]
    ) -> tuple[list[Evaluation], list[Callable[[], object]]]:
        """Write ``rows`` in ever smaller parts; dead-letter the lone rows that fail. Returns the rows
        written and the callbacks still to run (the rejected rows' callbacks run here, once their dead
        letter is out). Raises (nothing dead-lettered) when ClickHouse stops answering."""
        written: list[tuple[Evaluation, Callable[[], object]]] = []

        async def attempt(part: list[tuple[Evaluation, Callable[[], object]]]) -> None:
            try:
                await self.store.insert_evaluations([e for e, _ in part])
                written.extend(part)
                return
            except Exception as exc:
                if len(part) > 1:
                    mid = len(part) // 2
                    await attempt(part[:mid])
                    await attempt(part[mid:])
                    return
                if is_unavailable(exc) or not await self.store.ping():  # an outage, not a bad row
                    raise
                evaluation, callback = part[0]
                assert self.on_rejected is not None
                log.error("sink: ClickHouse rejects %s: %s; to deadletter", evaluation.interaction_id, exc)
                await self.on_rejected(evaluation, exc)
                self.rejected += 1
                self._rejected_now.add(id(evaluation))
                callback()

        await attempt(list(zip(rows, done, strict=True)))
        return [e for e, _ in written], [cb for _, cb in written]
