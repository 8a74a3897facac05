"""The judge's in-flight slots, handed out by stage priority.

Every stage of a worker shares one judge client and its ``max_in_flight`` slots. First come, first
served lets the first stage of a backlog (pronoun replacement, whose whole input is there at once) take
most slots, so the interactions already started wait behind new ones and the first complete rows come
out only when most of the backlog has passed the first stage. Here a free slot goes to the waiting
request of the most urgent stage (NLI and refusal before pronouns), in arrival order within a stage:
started interactions finish first; custom evaluators' rubrics (stage ``custom``) wait behind every core
stage, so they never hold the core verdicts back for a slot; the argument judge's review (stage
``arguments``), the last step of an interaction whose core is done, goes with NLI and refusal; a closing
conversation's re-ask and contradiction checks (stage ``conversation``) wait with the rubrics. Without
waiters a request takes a free slot at once, as with a semaphore; a slot is only ever handed over, never
shared, so at most ``limit`` requests run.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

#: lower goes first; stages not named here get DEFAULT_PRIORITY
STAGE_PRIORITY: dict[str, int] = {
    "nli": 0, "refusal": 0, "relevance": 0, "arguments": 0, "pronouns": 1, "convert": 1, "custom": 2,
    "conversation": 2,
}  # fmt: skip
DEFAULT_PRIORITY = 0


class PrioritySlots:
    """At most ``limit`` holders; a released slot goes to the waiter with the lowest priority number."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self._free = limit
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._order = itertools.count()

    @property
    def in_use(self) -> int:
        return self.limit - self._free

    def waiting(self) -> int:
        return sum(1 for _, _, fut in self._waiters if not fut.done())

    async def acquire(self, priority: int = DEFAULT_PRIORITY) -> None:
        if self._free > 0:  # then nobody waits: release hands a slot to a live waiter before freeing it
            self._free -= 1
            return
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._waiters, (priority, next(self._order), fut))
        try:
            await fut
        except asyncio.CancelledError:
            if fut.done() and not fut.cancelled():
                self.release()  # handed a slot just as it was cancelled: pass it on
            else:
                fut.cancel()  # skipped by release
            raise

    def release(self) -> None:
        while self._waiters:
            _, _, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)  # the slot passes straight to this waiter
                return
        self._free += 1
        assert self._free <= self.limit, "released more slots than were acquired"

    @asynccontextmanager
    async def slot(self, priority: int = DEFAULT_PRIORITY) -> AsyncIterator[None]:
        await self.acquire(priority)
        try:
            yield
        finally:
            self.release()


def stage_priority(stage: str) -> int:
    return STAGE_PRIORITY.get(stage, DEFAULT_PRIORITY)
