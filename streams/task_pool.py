"""Bounded concurrency for a processor: at most ``limit`` handlers running, the consumer keeps polling.

A processor's loop waits for a free slot before it starts the next event's work, so a slow judge slows
consumption (back-pressure) without stalling the consumer's heartbeats. On stop, unfinished work is
cancelled: its events were never acked and come back after a restart.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable


class TaskPool:
    def __init__(self, limit: int) -> None:
        self._slots = asyncio.Semaphore(limit)
        self._tasks: set[asyncio.Task[None]] = set()

    def __len__(self) -> int:
        return len(self._tasks)

    async def spawn(self, work: Callable[[], Awaitable[None]]) -> None:
        """Start ``work`` in a task once a slot is free (the caller waits for the slot, not the work)."""
        await self._slots.acquire()

        async def run() -> None:
            try:
                await work()
            finally:
                self._slots.release()

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def drain(self) -> None:
        """Wait for the running work to finish (the input ended)."""
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)

    async def cancel(self) -> None:
        """Cancel the running work and wait for it to unwind (the worker is stopping)."""
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await asyncio.gather(*self._tasks, return_exceptions=True)
