"""evaluations -> ClickHouse: batched inserts; source events acked only once their batch is written. An
Evaluation this worker's fused processor made is already in the batch when its message comes back
(``streams.handoff``): the message is then only acked, once its row is written.

One timer flushes a batch once its oldest row waited ``clickhouse.batch_seconds`` (checked four times as
often, so a row waits at most 1.25 x that); another closes the due windows and conversations this worker
owns (which evaluates the alert rules), which the ``touches`` topic marked (``streams.ownership``).
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from pipeline.clock import Clock
from schemas.errors import InvalidMessage
from schemas.topics import TOPIC_MESSAGES
from streams.acks import OrderedAcks
from streams.clickhouse.batch import FlushFailures, write_until_written
from streams.codec import Origin, decode
from streams.context import StreamContext
from streams.resources import Resources
from streams.revoke import forget_on_revoke

log = logging.getLogger(__name__)


class SinkProcessor:
    name = "groundwatch.sink"

    def __init__(self, ctx: StreamContext, resources: Resources) -> None:
        self.ctx = ctx
        self.resources = resources
        self.clock: Clock = resources.clock  # the worker's clock: the failure log's pace and the backoff
        self.acks = OrderedAcks()
        self.flush_failures = FlushFailures("sink", self.clock, log)

    async def consume(self, stream: Any) -> None:
        res = await self.resources.wait_ready()
        async for event in stream.noack().events():
            ticket = self.acks.track(event)
            self.ctx.metrics.events_in.labels("sink").inc()
            msg = event.message
            if res.handoff.claim(
                (msg.topic, msg.partition, msg.offset), functools.partial(self.acks.done, ticket)
            ):
                continue  # made by this worker and handed over at once (streams.handoff): acked once written
            try:
                evaluation = decode(
                    event.value,
                    TOPIC_MESSAGES.evaluations,
                    self.ctx.settings.limits,
                    between_stages=True,
                    values=self.ctx.reasons_show_values,
                )
            except InvalidMessage as exc:
                await self.ctx.dead_letter(exc, "validate", event.value, origin=Origin.of_event(event))
                self.acks.done(ticket)
                continue
            try:
                await res.sink.add(evaluation, functools.partial(self.acks.done, ticket))
            except Exception:
                await write_until_written(res.sink.flush, f"sink: insert of {len(res.sink)} rows", self.clock)

    async def flush_tick(self) -> None:
        """Flush a batch that is old enough (``clickhouse.batch_seconds``); write the status file when
        it is due."""
        res = self.resources
        if not res.ready:
            return
        try:
            await res.sink.flush_if_due()
        except Exception as exc:
            self.flush_failures.failed(exc)
            return
        self.flush_failures.succeeded()
        await res.status_if_due()  # a status file held back by its pace (clickhouse.status_every_s)

    async def tick(self) -> None:
        """Close the conversations that are due, then the windows that are due (and check their alerts):
        those this worker owns (``streams.ownership``), none while a rebalance is under way."""
        res = self.resources
        if not res.ready:
            return
        await res.reconcile_owned()
        if res.ownership.suspended:
            return
        if res.conversations is not None:
            try:
                await res.conversations.close_due()
            except Exception:
                log.exception("conversations: closing failed; will retry")
        try:
            closed = await res.windows.close_due()
        except Exception:
            log.exception("windows: closing failed; will retry")
            return
        if closed:
            await res.update_status()

    def register(self) -> Any:
        settings = self.ctx.settings
        forget_on_revoke(self.ctx.app, self.name, self.acks.forget, self.resources.handoff.forget)
        # a row waits at most batch_seconds + a quarter of it; windows are looked at on their own cadence
        flush_every = max(0.02, settings.clickhouse.batch_seconds / 4)
        self.ctx.app.timer(flush_every, name="groundwatch.sink.flush")(self.flush_tick)
        window_every = max(0.05, settings.window.tick_seconds / 2)
        self.ctx.app.timer(window_every, name="groundwatch.sink.tick")(self.tick)
        source = self.ctx.topic(self.ctx.names.evaluations)
        return self.ctx.app.agent(source, name=self.name)(self.consume)
