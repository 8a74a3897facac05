"""deadletter -> ClickHouse ``dead_letters``: every dead letter counted where the dashboards read.

Rows are written in batches (``clickhouse.dead_letter_batch_rows``, or once the oldest has waited
``clickhouse.dead_letter_batch_seconds``; ``streams.clickhouse.batch``, the evaluation sink's buffer), and
each message is acked only after the insert holding its row succeeded (in offset order,
``streams.acks``): a crash before that leaves it unacked, read again, and its row rewritten. A ClickHouse
outage pauses this agent and retries with backoff on the worker's clock (nothing acked meanwhile). The
row is keyed by the letter's id, so a redelivery replaces it instead of counting twice. How far behind
the recorder is: ``groundwatch_dead_letters_unrecorded`` (rows read, not yet written) and
``groundwatch_dead_letters_unrecorded_seconds`` (how long the oldest has waited), with the deadletter
topic's consumer lag.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from pipeline.clock import Clock
from pipeline.retry import Backoff, retry
from schemas.safe_text import safe_text
from streams.acks import OrderedAcks
from streams.clickhouse.batch import DeadLetterRows
from streams.clickhouse.dead_letter_rows import dead_letter_row
from streams.context import StreamContext
from streams.resources import Resources
from streams.revoke import forget_on_revoke

log = logging.getLogger(__name__)

FAILURE_LOG_EVERY_S = 30.0  # at most one line a while about timed flushes that keep failing


async def write_until_written(rows: DeadLetterRows, clock: Clock, max_delay_s: float = 30.0) -> None:
    """ClickHouse is failing: stop consuming (backpressure) and retry with backoff (waited on ``clock``)
    until the buffered rows are written; they stay unacked meanwhile."""
    await retry(
        rows.flush,
        what=f"dead letters: insert of {len(rows)} rows",
        backoff=Backoff(max_s=max_delay_s),
        sleep=clock.sleep,
    )


class DeadLetterRecorder:
    name = "groundwatch.dead_letters"

    def __init__(self, ctx: StreamContext, resources: Resources) -> None:
        self.ctx = ctx
        self.resources = resources
        self.clock: Clock = resources.clock
        self.acks = OrderedAcks()
        self._failed_flushes = 0
        self._failure_logged = 0.0

    async def consume(self, stream: Any) -> None:
        res = await self.resources.wait_ready()
        rows = res.dead_letter_rows
        async for event in stream.noack().events():
            ticket = self.acks.track(event)
            self.ctx.metrics.events_in.labels("dead_letters").inc()
            raw = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
            try:
                await rows.add(dead_letter_row(raw), functools.partial(self.acks.done, ticket))
            except Exception:
                await write_until_written(rows, self.clock)

    async def flush_tick(self) -> None:
        """Write a batch whose oldest row has waited ``clickhouse.dead_letter_batch_seconds``."""
        if not self.resources.ready:
            return
        try:
            await self.resources.dead_letter_rows.flush_if_due()
        except Exception as exc:
            self._failed_flushes += 1
            now = self.clock.monotonic()
            if self._failed_flushes == 1 or now - self._failure_logged >= FAILURE_LOG_EVERY_S:
                why = safe_text(f"{type(exc).__name__}: {exc}")[:300]
                log.warning("dead letters: %d timed writes failed in a row (last: %s); will retry",
                            self._failed_flushes, why)  # fmt: skip
                self._failure_logged = now
            return
        if self._failed_flushes:
            log.warning("dead letters: ClickHouse writes again after %d failed writes", self._failed_flushes)
            self._failed_flushes = 0

    def unrecorded(self) -> tuple[int, float]:
        """Rows read and not yet written, and how long the oldest has waited (for /metrics)."""
        if not self.resources.ready:
            return 0, 0.0
        rows = self.resources.dead_letter_rows
        return len(rows), rows.batch.waited()

    def register(self) -> Any:
        settings = self.ctx.settings
        forget_on_revoke(self.ctx.app, self.name, self.acks.forget)
        self.ctx.metrics.watch_dead_letters(self.unrecorded)
        every = max(0.02, settings.clickhouse.dead_letter_batch_seconds / 4)
        self.ctx.app.timer(every, name="groundwatch.dead_letters.flush")(self.flush_tick)
        source = self.ctx.topic(self.ctx.names.deadletter)
        return self.ctx.app.agent(source, name=self.name)(self.consume)
