"""evaluations -> ClickHouse: batched inserts; source events acked only once their batch is written.

One timer flushes a batch once its oldest row waited ``clickhouse.batch_seconds`` (checked four times as
often, so a row waits at most 1.25 x that); another closes due windows (which evaluates the alert rules).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from pipeline.clock import Clock
from pipeline.retry import Backoff, retry
from schemas.errors import InvalidMessage
from schemas.evaluation import Evaluation
from schemas.safe_text import safe_text
from streams.acks import OrderedAcks
from streams.clickhouse.sink import EvaluationSink
from streams.codec import Origin, decode
from streams.context import StreamContext
from streams.resources import Resources
from streams.revoke import forget_on_revoke

log = logging.getLogger(__name__)

FAILURE_LOG_EVERY_S = 30.0  # at most one line a while about timed flushes that keep failing


async def flush_until_written(sink: EvaluationSink, clock: Clock, max_delay_s: float = 30.0) -> None:
    """ClickHouse is failing: stop consuming (backpressure) and retry with backoff (waited on ``clock``)
    until the buffered rows are written. They stay unacked meanwhile, so a crash now loses nothing."""
    await retry(
        sink.flush,
        what=f"sink: insert of {len(sink)} rows",
        backoff=Backoff(max_s=max_delay_s),
        sleep=clock.sleep,
    )


class SinkProcessor:
    name = "groundwatch.sink"

    def __init__(self, ctx: StreamContext, resources: Resources) -> None:
        self.ctx = ctx
        self.resources = resources
        self.clock: Clock = resources.clock  # the worker's clock: the failure log's pace and the backoff
        self.acks = OrderedAcks()
        self._failed_flushes = 0  # timed flushes failed in a row (one traceback, then a line a while)
        self._failure_logged = 0.0  # clock.monotonic() of the last line about them

    async def consume(self, stream: Any) -> None:
        res = await self.resources.wait_ready()
        async for event in stream.noack().events():
            ticket = self.acks.track(event)
            self.ctx.metrics.events_in.labels("sink").inc()
            try:
                evaluation = decode(event.value, Evaluation, self.ctx.settings.limits, between_stages=True)
            except InvalidMessage as exc:
                await self.ctx.dead_letter(exc, "validate", event.value, origin=Origin.of_event(event))
                self.acks.done(ticket)
                continue
            try:
                await res.sink.add(evaluation, functools.partial(self.acks.done, ticket))
            except Exception:
                await flush_until_written(res.sink, self.clock)

    async def flush_tick(self) -> None:
        """Flush a batch that is old enough (``clickhouse.batch_seconds``)."""
        res = self.resources
        if not res.ready:
            return
        try:
            await res.sink.flush_if_due()
        except Exception as exc:
            self._flush_failed(exc)
            return
        if self._failed_flushes:
            log.warning("sink: ClickHouse writes again after %d failed flushes", self._failed_flushes)
            self._failed_flushes = 0

    def _flush_failed(self, exc: Exception) -> None:
        """Log a failed timed flush: the first of a run with its traceback, then (an outage can fail
        several flushes a second) one line every ``FAILURE_LOG_EVERY_S`` with how many failed."""
        self._failed_flushes += 1
        now = self.clock.monotonic()
        if self._failed_flushes == 1:
            log.exception("sink: timed flush failed; will retry")
        elif now - self._failure_logged >= FAILURE_LOG_EVERY_S:
            log.warning("sink: %d timed flushes failed in a row (last: %s); will retry", self._failed_flushes,
                        safe_text(f"{type(exc).__name__}: {exc}")[:300])  # fmt: skip
        else:
            return
        self._failure_logged = now

    async def tick(self) -> None:
        """Close the conversations that are due, then the windows that are due (and check their alerts)."""
        res = self.resources
        if not res.ready:
            return
        if res.conversations is not None:
            try:
                await res.conversations.close_due()
            except Exception:
                log.exception("conversations: closing failed; will retry")
        try:
            if await res.windows.close_due():
                await res.write_status()
        except Exception:
            log.exception("windows: closing failed; will retry")

    def register(self) -> Any:
        settings = self.ctx.settings
        forget_on_revoke(self.ctx.app, self.name, self.acks.forget)
        # a row waits at most batch_seconds + a quarter of it; windows are looked at on their own cadence
        flush_every = max(0.02, settings.clickhouse.batch_seconds / 4)
        self.ctx.app.timer(flush_every, name="groundwatch.sink.flush")(self.flush_tick)
        window_every = max(0.05, settings.window.tick_seconds / 2)
        self.ctx.app.timer(window_every, name="groundwatch.sink.tick")(self.tick)
        source = self.ctx.topic(self.ctx.names.evaluations)
        return self.ctx.app.agent(source, name=self.name)(self.consume)
