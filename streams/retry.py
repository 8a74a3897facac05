"""One way to retry: exponential backoff, bounded or not, every failure logged.

Used for what must not be lost when the broker or ClickHouse hiccups: a dead letter that cannot be sent,
a batch ClickHouse refuses, a dead-letter row. ``sleep`` is injectable so tests advance time instead of
waiting for it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

log = logging.getLogger(__name__)

Sleep = Callable[[float], Awaitable[object]]


async def with_backoff(
    attempt: Callable[[], Awaitable[object]],
    *,
    what: str,
    attempts: int | None = None,
    first_delay_s: float = 0.5,
    max_delay_s: float = 30.0,
    sleep: Sleep = asyncio.sleep,
) -> bool:
    """Call ``attempt`` until it returns; between failures wait ``first_delay_s``, doubling up to
    ``max_delay_s``. With ``attempts`` set, give up after that many calls and return False; without,
    keep trying (the caller holds its input unacked meanwhile). Cancellation is never swallowed."""
    delay = first_delay_s
    tried = 0
    while True:
        tried += 1
        try:
            await attempt()
            return True
        except asyncio.CancelledError:
            raise
        except Exception:
            limit = f" of {attempts}" if attempts is not None else ""
            log.exception("%s failed (attempt %d%s)", what, tried, limit)
        if attempts is not None and tried >= attempts:
            return False
        await sleep(delay)
        delay = min(delay * 2, max_delay_s)
