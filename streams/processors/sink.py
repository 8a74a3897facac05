"""evaluations -> ClickHouse: batched inserts; source events acked only once their batch is written.

A timer flushes batches by age and closes due windows (which evaluates the alert rules).
"""

from __future__ import annotations

import asyncio
import functools
import logging
from typing import Any, cast

from schemas.errors import InvalidMessage
from schemas.evaluation import Evaluation
from streams.acks import OrderedAcks
from streams.clickhouse.sink import EvaluationSink
from streams.codec import dead_letter, decode
from streams.context import StreamContext

log = logging.getLogger(__name__)


async def flush_until_written(sink: EvaluationSink, max_delay_s: float = 30.0) -> None:
    """ClickHouse is failing: stop consuming (backpressure) and retry with backoff until the buffered
    rows are written. They stay unacked meanwhile, so a crash now loses nothing."""
    delay = 0.5
    while True:
        log.exception("sink: insert of %d rows failed; retrying in %.1fs", len(sink), delay)
        await asyncio.sleep(delay)
        delay = min(delay * 2, max_delay_s)
        try:
            await sink.flush()
            return
        except Exception:
            continue


def register(ctx: StreamContext) -> Any:
    settings = ctx.settings
    source = ctx.topic(ctx.names.evaluations)
    acks = OrderedAcks()

    async def on_revoked(sender: Any, *args: Any, signal: Any = None, **kwargs: Any) -> None:
        revoked = set(args[0]) if args else set()
        acks.forget(revoked)

    ctx.app.on_partitions_revoked.connect(cast(Any, on_revoked))

    async def sink_agent(stream: Any) -> None:
        res = await ctx.res.wait_ready()
        async for event in stream.noack().events():
            ticket = acks.track(event)
            raw = event.value
            try:
                evaluation = decode(raw, Evaluation, settings.limits)
            except InvalidMessage as exc:
                await ctx.send_dead_or_give_up(
                    dead_letter(stage="validate", error=exc, payload=raw, source_topic=ctx.names.evaluations),
                    f"{ctx.names.evaluations}@{ticket.offset}",
                )
                acks.done(ticket)
                continue
            try:
                await res.sink.add(evaluation, functools.partial(acks.done, ticket))
            except Exception:
                await flush_until_written(res.sink)

    interval = min(settings.clickhouse.batch_seconds, settings.window.tick_seconds) / 2

    async def tick() -> None:
        if ctx.resources is None or not ctx.resources.ready:
            return
        res = ctx.resources
        try:
            await res.sink.flush_if_due()
        except Exception:
            log.exception("sink: timed flush failed; will retry")
        try:
            if await res.windows.close_due():
                await res.write_status()
        except Exception:
            log.exception("windows: closing failed; will retry")

    ctx.app.timer(max(0.05, interval), name="groundwatch.sink.tick")(tick)
    return ctx.app.agent(source, name="groundwatch.sink")(sink_agent)
