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
from streams.acks import OrderedAcks
from streams.clickhouse.batch import FlushFailures, write_until_written
from streams.clickhouse.dead_letter_rows import dead_letter_row
from streams.context import StreamContext
from streams.processors.base import record_time
from streams.resources import Resources
from streams.revoke import forget_on_revoke

log = logging.getLogger(__name__)


class DeadLetterRecorder:
    name = "groundwatch.dead_letters"

    def __init__(self, ctx: StreamContext, resources: Resources) -> None:
        self.ctx = ctx
        self.resources = resources
        self.clock: Clock = resources.clock
        self.acks = OrderedAcks()
        self.flush_failures = FlushFailures("dead letters", self.clock, log)

    async def consume(self, stream: Any) -> None:
        res = await self.resources.wait_ready()
        rows = res.dead_letter_rows
        async for event in stream.noack().events():
            ticket = self.acks.track(event)
            self.ctx.metrics.events_in.labels("dead_letters").inc()
            raw = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
            try:
                received = record_time(event) or self.clock.now()
                await rows.add(dead_letter_row(raw, received), functools.partial(self.acks.done, ticket))
            except Exception:
                await write_until_written(rows.flush, f"dead letters: insert of {len(rows)} rows", self.clock)

    async def flush_tick(self) -> None:
        """Write a batch whose oldest row has waited ``clickhouse.dead_letter_batch_seconds``."""
        if not self.resources.ready:
            return
        try:
            await self.resources.dead_letter_rows.flush_if_due()
        except Exception as exc:
            self.flush_failures.failed(exc)
            return
        self.flush_failures.succeeded()

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
