"""Run a handler over a faust stream with bounded concurrency and in-order acks.

Slow judge calls must not stall the consumer: each event is handled in its own task (at most ``limit``
at once, streams.task_pool); the loop keeps pulling while tasks run, so the consumer keeps polling. An
event is acked once its handler returned (its outputs sent), in offset order (streams.acks).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from schemas.errors import GroundwatchError
from streams.acks import OrderedAcks
from streams.retry import Sleep, with_backoff
from streams.task_pool import TaskPool

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[None]]
OnError = Callable[[Any, Exception], Awaitable[None]]


def where(event: Any) -> str:
    """topic[partition]@offset of an event, for logs."""
    msg = getattr(event, "message", None)
    tp = getattr(msg, "tp", None)
    return f"{getattr(tp, 'topic', tp)}[{getattr(tp, 'partition', '?')}]@{getattr(msg, 'offset', '?')}"


def log_failure(event: Any, exc: Exception) -> None:
    """Bad input and judge failures (GroundwatchError) in one line; anything else with its traceback."""
    if isinstance(exc, GroundwatchError):
        log.warning("%s: %s: %s", where(event), type(exc).__name__, str(exc)[:500])
    else:
        log.exception("%s: handler failed", where(event), exc_info=exc)


async def run_bounded(
    stream: Any,
    handler: Handler,
    limit: int,
    acks: OrderedAcks | None = None,
    on_error: OnError | None = None,
    *,
    error_attempts: int = 5,
    retry_delay_s: float = 1.0,
    sleep: Sleep | None = None,
) -> None:
    """Handle each event in a task, at most ``limit`` at once, acking in offset order.

    An exception from the handler goes to ``on_error`` (which dead-letters the message) and the event is
    acked: bad input never stalls a partition. When ``on_error`` fails too (the dead letter cannot be
    sent), it is retried with backoff up to ``error_attempts`` times in all; then the event is acked
    anyway with an ERROR log naming its topic, partition and offset (to re-read it by hand), so one
    message never blocks its partition for ever. Without ``on_error`` a failed event stays unacked, to
    come back after a restart.
    """
    acks = acks or OrderedAcks()
    pool = TaskPool(limit)
    backoff: dict[str, Any] = {"first_delay_s": retry_delay_s, "attempts": max(1, error_attempts)}
    if sleep is not None:
        backoff["sleep"] = sleep

    async def one(event: Any) -> None:
        ticket = acks.track(event)
        try:
            await handler(event)
        except Exception as exc:
            log_failure(event, exc)
            if on_error is None:
                return  # unacked: it comes back after a restart
            sent = await with_backoff(
                functools.partial(on_error, event, exc), what=f"dead-lettering {where(event)}", **backoff
            )
            if not sent:
                log.error(
                    "GIVING UP on %s: it failed (%s: %s) and could not be dead-lettered after %d attempts; "
                    "acking it so its partition moves on. Re-read it from that offset to recover it.",
                    where(event), type(exc).__name__, exc, error_attempts,
                )  # fmt: skip
        acks.done(ticket)

    try:
        async for event in stream.noack().events():
            await pool.spawn(functools.partial(one, event))
        await pool.drain()  # the stream ended (not cancelled): let the started events finish
    finally:  # cancelled (worker stopping): unfinished events stay unacked and come back
        await pool.cancel()
