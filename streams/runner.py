"""Run a handler over a faust stream with bounded concurrency and in-order acks.

Slow judge calls must not stall the consumer: each event is handled in its own task (at most
``limit`` at once); the loop keeps pulling while tasks run, so the consumer keeps polling. An event is
acked once its handler returned (its outputs sent), in offset order (see streams.acks).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from streams.acks import OrderedAcks

log = logging.getLogger(__name__)

Handler = Callable[[Any], Awaitable[None]]
OnError = Callable[[Any, Exception], Awaitable[None]]


async def run_bounded(
    stream: Any,
    handler: Handler,
    limit: int,
    acks: OrderedAcks | None = None,
    on_error: OnError | None = None,
) -> None:
    """Handle each event in a task, at most ``limit`` at once, acking in offset order.

    An unexpected exception from the handler goes to ``on_error`` (which dead-letters the message) and
    the event is acked: bad input never stalls a partition. Only when there is no ``on_error`` or it
    fails too (a broken producer) does the event stay unacked, to come back after a restart.
    """
    acks = acks or OrderedAcks()
    slots = asyncio.Semaphore(limit)
    tasks: set[asyncio.Task[None]] = set()

    async def one(event: Any) -> None:
        ticket = acks.track(event)
        try:
            await handler(event)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            log.exception("handler failed on offset %s", ticket.offset)
            try:
                if on_error is None:
                    raise
                await on_error(event, exc)
            except Exception:
                log.exception("could not dead-letter offset %s; left unacked", ticket.offset)
                slots.release()
                return
        acks.done(ticket)
        slots.release()

    try:
        async for event in stream.noack().events():
            await slots.acquire()
            task = asyncio.create_task(one(event))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:  # the stream ended (not cancelled): let the started events finish
            await asyncio.gather(*tasks, return_exceptions=True)
    finally:  # cancelled (worker stopping): unfinished events stay unacked and come back
        for task in list(tasks):
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
