"""deadletter -> ClickHouse ``dead_letters``: every dead letter counted where the dashboards read.

Each message is acked only after its row is written (a ClickHouse outage pauses this agent and retries
with backoff; nothing is acked meanwhile). The row is keyed by the letter's hash, so a redelivery after a
crash replaces it instead of counting twice.
"""

from __future__ import annotations

import functools
from typing import Any

from pipeline.retry import retry
from streams.clickhouse.dead_letter_rows import dead_letter_row
from streams.context import StreamContext
from streams.resources import Resources


class DeadLetterRecorder:
    name = "groundwatch.dead_letters"

    def __init__(self, ctx: StreamContext, resources: Resources) -> None:
        self.ctx = ctx
        self.resources = resources

    async def consume(self, stream: Any) -> None:
        res = await self.resources.wait_ready()
        async for event in stream.events():  # acked when the loop takes the next one
            raw = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
            insert = functools.partial(res.store_open.insert_dead_letter_rows, [dead_letter_row(raw)])
            await retry(insert, what="dead letters: insert")
            await res.write_status()  # dead letters are rare: keep the status file's counts current

    def register(self) -> Any:
        source = self.ctx.topic(self.ctx.names.deadletter)
        return self.ctx.app.agent(source, name=self.name)(self.consume)
