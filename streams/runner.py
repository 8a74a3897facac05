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


def _where(event: Any) -> str:
    msg = getattr(event, "message", None)
    tp = getattr(msg, "tp", None)
    return f"{getattr(tp, 'topic', tp)}[{getattr(tp, 'partition', '?')}]@{getattr(msg, 'offset', '?')}"


async def run_bounded(
    stream: Any,
    handler: Handler,
    limit: int,
    acks: OrderedAcks | None = None,
    on_error: OnError | None = None,
    *,
    error_attempts: int = 5,
    retry_delay_s: float = 1.0,
) -> None:
    """Handle each event in a task, at most ``limit`` at once, acking in offset order.

    An unexpected exception from the handler goes to ``on_error`` (which dead-letters the message) and
    the event is acked: bad input never stalls a partition. When ``on_error`` fails too (the producer
    cannot send the dead letter, e.g. the letter is too big or the broker keeps refusing it), it is
    retried with backoff (``retry_delay_s``, doubling) up to ``error_attempts`` times in all; then the
    event is acked anyway with an ERROR log naming its topic, partition and offset (to re-read it by
    hand), so one message never blocks its partition for ever. Without ``on_error`` a failed event
    stays unacked, to come back after a restart.
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
            if on_error is None or not await _dead_letter(event, exc):
                slots.release()
                return
        acks.done(ticket)
        slots.release()

    async def _dead_letter(event: Any, exc: Exception) -> bool:
        """True once ``on_error`` succeeded or gave up after ``error_attempts`` (ack it either way)."""
        assert on_error is not None
        delay = retry_delay_s
        for attempt in range(1, max(1, error_attempts) + 1):
            try:
                await on_error(event, exc)
                return True
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception(
                    "could not dead-letter %s (attempt %d of %d)", _where(event), attempt, error_attempts
                )
            if attempt < error_attempts:
                await asyncio.sleep(delay)
                delay *= 2
        log.error(
            "GIVING UP on %s: it failed (%s: %s) and could not be dead-lettered after %d attempts; "
            "acking it so its partition moves on. Re-read it from that offset to recover it.",
            _where(event),
            type(exc).__name__,
            exc,
            error_attempts,
        )
        return True

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
