"""evaluations -> ClickHouse: batched inserts; source events acked only once their batch is written.

A timer flushes batches by age and closes due windows (which evaluates the alert rules).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from schemas.errors import InvalidMessage
from schemas.evaluation import Evaluation
from streams.acks import OrderedAcks
from streams.clickhouse.sink import EvaluationSink
from streams.codec import decode
from streams.context import StreamContext
from streams.resources import Resources
from streams.retry import with_backoff
from streams.revoke import forget_on_revoke
from streams.runner import where

log = logging.getLogger(__name__)


async def flush_until_written(sink: EvaluationSink, max_delay_s: float = 30.0) -> None:
    """ClickHouse is failing: stop consuming (backpressure) and retry with backoff until the buffered
    rows are written. They stay unacked meanwhile, so a crash now loses nothing."""
    await with_backoff(sink.flush, what=f"sink: insert of {len(sink)} rows", max_delay_s=max_delay_s)


class SinkProcessor:
    name = "groundwatch.sink"

    def __init__(self, ctx: StreamContext, resources: Resources) -> None:
        self.ctx = ctx
        self.resources = resources
        self.acks = OrderedAcks()

    async def consume(self, stream: Any) -> None:
        res = await self.resources.wait_ready()
        async for event in stream.noack().events():
            ticket = self.acks.track(event)
            self.ctx.metrics.events_in.labels("sink").inc()
            try:
                evaluation = decode(event.value, Evaluation, self.ctx.settings.limits)
            except InvalidMessage as exc:
                letter = self.ctx.letter_for(exc, "validate", event.value, self.ctx.names.evaluations, None)
                await self.ctx.send_dead_or_give_up(letter, where(event))
                self.acks.done(ticket)
                continue
            try:
                await res.sink.add(evaluation, functools.partial(self.acks.done, ticket))
            except Exception:
                await flush_until_written(res.sink)

    async def tick(self) -> None:
        """Flush a batch that is old enough; close the windows that are due (and check their alerts)."""
        res = self.resources
        if not res.ready:
            return
        try:
            await res.sink.flush_if_due()
        except Exception:
            log.exception("sink: timed flush failed; will retry")
        try:
            if await res.windows.close_due():
                await res.write_status()
        except Exception:
            log.exception("windows: closing failed; will retry")

    def register(self) -> Any:
        settings = self.ctx.settings
        forget_on_revoke(self.ctx.app, self.name, self.acks.forget)
        interval = min(settings.clickhouse.batch_seconds, settings.window.tick_seconds) / 2
        self.ctx.app.timer(max(0.05, interval), name="groundwatch.sink.tick")(self.tick)
        source = self.ctx.topic(self.ctx.names.evaluations)
        return self.ctx.app.agent(source, name=self.name)(self.consume)
