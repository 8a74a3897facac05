"""Rows waiting for a ClickHouse insert, each with the callback to run once it is written (the ack of the
message it came from): the one buffer of the evaluation sink (``streams.clickhouse.sink``) and the
dead-letter rows (``DeadLetterRows``).

A batch is due once it holds ``max_rows`` rows, or its oldest row has waited ``max_seconds`` (on the
injected clock) and the last insert's pace allows (``RowBatch``, ``clickhouse.insert_share``). ``take``
empties the buffer for a flush; a flush that fails puts its rows back in front (``put_back``), still
unacked, so a crash or an outage loses nothing: the messages are read again.

How the processors writing through such a buffer wait out a failing ClickHouse is here too, once:
``write_until_written`` (the consumer stops and retries a flush with backoff: backpressure) and
``FlushFailures`` (the log of timed flushes that keep failing).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, TypeVar

from pipeline.clock import Clock, Stopwatch, SystemClock
from pipeline.paced_log import PacedLog
from pipeline.retry import Backoff, retry
from schemas.safe_text import safe_text

log = logging.getLogger(__name__)

R = TypeVar("R")
Done = Callable[[], object]

FAILURE_LOG_EVERY_S = 30.0  # at most one line a while about timed flushes that keep failing
MAX_PACE_S = 5.0  # the longest a batch that is not full waits for the last insert's pace


async def write_until_written(
    flush: Callable[[], Awaitable[object]], what: str, clock: Clock, max_delay_s: float = 30.0
) -> None:
    """ClickHouse is failing: stop consuming (backpressure) and retry ``flush`` with backoff (waited on
    ``clock``) until the buffered rows are written. They stay unacked meanwhile, so a crash now loses
    nothing. ``what`` names the write in the retry's log lines."""
    await retry(flush, what=what, backoff=Backoff(max_s=max_delay_s), sleep=clock.sleep)


class FlushFailures:
    """The log of a timer's flushes failing in a row: the first with its traceback, then (an outage can
    fail several flushes a second) one line every ``every_s`` of ``clock`` time with how many failed,
    and one line when a flush succeeds again. ``what`` begins each line; they go to ``logger``."""

    def __init__(
        self, what: str, clock: Clock, logger: logging.Logger, every_s: float = FAILURE_LOG_EVERY_S
    ) -> None:
        self.what = what
        self.log = logger
        self.in_a_row = 0
        self._paced = PacedLog(every_s, clock)

    def failed(self, exc: BaseException) -> None:
        self.in_a_row += 1
        if self._paced.due() is None:
            return
        if self.in_a_row == 1:
            self.log.error("%s: timed flush failed; will retry", self.what, exc_info=exc)
        else:
            self.log.warning("%s: %d timed flushes failed in a row (last: %s); will retry", self.what,
                             self.in_a_row, safe_text(f"{type(exc).__name__}: {exc}")[:300])  # fmt: skip

    def succeeded(self) -> None:
        if self.in_a_row:
            self.log.warning("%s: ClickHouse writes again after %d failed flushes", self.what, self.in_a_row)
            self.in_a_row = 0
            self._paced.reset()


def _noop() -> None:
    return None


class RowBatch(Generic[R]):
    """The buffer: rows and their callbacks, in arrival order, and when the oldest arrived.

    Inserts are paced by what they cost (``insert_share``): ClickHouse, and the embedded chDB above all,
    pays a fixed cost per insert (measured: 1.56 ms of CPU a row in batches of 50, 0.35 ms in batches of
    500), so rows arriving steadily must not be written a few at a time. After a flush that took ``d``
    seconds, a batch that is not full waits ``d x (1 - share) / share`` more (at most ``MAX_PACE_S``):
    under load batches grow until their inserts take that share of the time; at a low rate an insert is
    quick and ``max_seconds`` alone decides."""

    def __init__(
        self, max_rows: int, max_seconds: float, clock: Clock | None = None, insert_share: float = 1.0
    ) -> None:
        self.max_rows = max_rows
        self.max_seconds = max_seconds
        self.insert_share = insert_share
        self.clock: Clock = clock or SystemClock()
        self.lock = asyncio.Lock()  # one flush at a time
        self._rows: list[R] = []
        self._done: list[Done] = []
        self._oldest: float | None = None
        self._not_before = 0.0  # clock.monotonic() before which a batch that is not full waits

    def __len__(self) -> int:
        return len(self._rows)

    def add(self, row: R, done: Done | None = None) -> bool:
        """Buffer a row; True when the batch is full (time to flush)."""
        self._rows.append(row)
        self._done.append(done or _noop)
        if self._oldest is None:
            self._oldest = self.clock.monotonic()
        return len(self._rows) >= self.max_rows

    def waited(self) -> float:
        """Seconds the oldest buffered row has waited (0 when none)."""
        return 0.0 if self._oldest is None else max(0.0, self.clock.monotonic() - self._oldest)

    def due(self) -> bool:
        """The oldest buffered row has waited ``max_seconds``, and the last insert's pace allows."""
        if not self._rows or self.waited() < self.max_seconds:
            return False
        return self.clock.monotonic() >= self._not_before

    def wrote(self, seconds: float) -> None:
        """A flush of this batch took ``seconds``: the next that is not full waits its pace."""
        pause = min(MAX_PACE_S, seconds * (1.0 - self.insert_share) / self.insert_share)
        self._not_before = self.clock.monotonic() + pause

    def take(self) -> tuple[list[R], list[Done]]:
        rows, done = self._rows, self._done
        self._rows, self._done, self._oldest = [], [], None
        return rows, done

    def put_back(self, rows: Sequence[R], done: Sequence[Done]) -> None:
        """Rows a flush could not write, back in front, unacked; their age counts again from now."""
        self._rows[:0], self._done[:0] = list(rows), list(done)
        if self._rows:
            self._oldest = self.clock.monotonic()


class DeadLetterRows:
    """Dead-letter rows (``streams.clickhouse.dead_letter_rows``) written in batches: each row's callback
    (its message's ack) runs only after the insert holding it succeeded."""

    def __init__(
        self,
        insert: Callable[[list[list[Any]]], Awaitable[None]],
        max_rows: int,
        max_seconds: float,
        clock: Clock | None = None,
        on_written: Callable[[int, float], Awaitable[None]] | None = None,
        insert_share: float = 1.0,
    ) -> None:
        self.insert = insert
        self.batch: RowBatch[list[Any]] = RowBatch(max_rows, max_seconds, clock, insert_share)
        self.on_written = on_written  # (rows written, seconds the insert took)
        self.written = 0

    def __len__(self) -> int:
        return len(self.batch)

    async def add(self, row: list[Any], done: Done | None = None) -> None:
        """Buffer a row; a full batch is written at once (raising when the insert fails: the rows stay
        buffered, unacked)."""
        if self.batch.add(row, done):
            await self.flush()

    async def flush_if_due(self) -> None:
        if self.batch.due():
            await self.flush()

    async def flush(self) -> int:
        async with self.batch.lock:
            rows, done = self.batch.take()
            if not rows:
                return 0
            watch, paced_from = Stopwatch(), self.batch.clock.monotonic()
            try:
                await self.insert(rows)
            except BaseException:
                self.batch.put_back(rows, done)
                raise
            self.batch.wrote(self.batch.clock.monotonic() - paced_from)
            for callback in done:
                callback()
            self.written += len(rows)
        if self.on_written is not None:
            await self.on_written(len(rows), watch.seconds())
        return len(rows)
