"""deadletter -> ClickHouse ``dead_letters``: every dead letter counted where the dashboards read.

Each message is acked only after its row is written (a ClickHouse outage pauses this agent and retries
with backoff; nothing is acked meanwhile). The row is keyed by the letter's hash, so a redelivery after a
crash replaces it instead of counting twice.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from streams.clickhouse.dead_letter_rows import dead_letter_row
from streams.clickhouse.store import ClickHouseStore
from streams.context import StreamContext

log = logging.getLogger(__name__)


async def write_until_done(store: ClickHouseStore, row: list[Any], max_delay_s: float = 30.0) -> None:
    """Insert ``row``, retrying with exponential backoff while ClickHouse fails."""
    delay = 0.5
    while True:
        try:
            await store.insert_dead_letter_rows([row])
            return
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("dead letters: insert failed; retrying in %.1fs", delay)
            await asyncio.sleep(delay)
            delay = min(delay * 2, max_delay_s)


def register(ctx: StreamContext) -> Any:
    source = ctx.topic(ctx.names.deadletter)

    async def dead_letter_agent(stream: Any) -> None:
        res = await ctx.res.wait_ready()
        async for event in stream.events():  # acked when the loop takes the next one
            raw = event.value if isinstance(event.value, bytes) else bytes(event.value or b"")
            await write_until_done(res.store_open, dead_letter_row(raw))

    return ctx.app.agent(source, name="groundwatch.dead_letters")(dead_letter_agent)
