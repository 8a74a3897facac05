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
) -> None:
    """Handle each event in a task, at most ``limit`` at once, acking in offset order.

    An exception from the handler goes to ``on_error``, which dead-letters the message
    (``StreamContext.dead_letter``: retried, then given up with an ERROR log, never raising), and the
    event is acked: bad input never stalls a partition. Without ``on_error``, or when it raises all
    the same, a failed event stays unacked, to come back after a restart.
    """
    acks = acks or OrderedAcks()
    pool = TaskPool(limit)

    async def one(event: Any) -> None:
        ticket = acks.track(event)
        try:
            await handler(event)
        except Exception as exc:
            log_failure(event, exc)
            if on_error is None:
                return  # unacked: it comes back after a restart
            try:
                await on_error(event, exc)
            except Exception:
                log.exception("%s: its dead letter failed; left unacked", where(event))
                return
        acks.done(ticket)

    try:
        async for event in stream.noack().events():
            await pool.spawn(functools.partial(one, event))
        await pool.drain()  # the stream ended (not cancelled): let the started events finish
    finally:  # cancelled (worker stopping): unfinished events stay unacked and come back
        await pool.cancel()
