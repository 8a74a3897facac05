"""One round of closing, the same for the window closer and the conversation closer: the due keys closed
in batches, oldest first; with a budget (a stop's), a batch begins only while the time the last one took
still fits in what is left of it; without (a timer's round), the round ends when a stop begins; a batch
that says so (ClickHouse unavailable) ends it at once. A round logs at most ``LOG_FAILURES_PER_ROUND``
failures one by one, then one line with how many more (``RoundLog``)."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from pipeline.clock import Clock

log = logging.getLogger(__name__)

#: the failures of one round logged one by one; the rest are counted in one line
LOG_FAILURES_PER_ROUND = 5

T = TypeVar("T")
K = TypeVar("K")


@dataclass
class BatchOutcome(Generic[T, K]):
    """What closing one batch gave: what it closed, the keys it left open, and whether the round may go
    on (False: end it now, the batch's keys and the rest left)."""

    closed: list[T]
    failed: list[K] = field(default_factory=list)
    go_on: bool = True


@dataclass
class Round(Generic[T, K]):
    """A round's end: what closed, the keys left (failed or never begun), and whether it ran out of its
    budget."""

    closed: list[T]
    left: list[K]
    out_of_time: bool = False


class RoundLog:
    """A round's failures: the first ``LOG_FAILURES_PER_ROUND`` logged one by one by the caller
    (``loud`` says whether this one is), the rest counted into one line at ``end``."""

    def __init__(self) -> None:
        self.logged = 0
        self.unlogged = 0

    def loud(self) -> bool:
        if self.logged >= LOG_FAILURES_PER_ROUND:
            self.unlogged += 1
            return False
        self.logged += 1
        return True

    def end(self, what: str) -> None:
        """One line for the failures not logged one by one (``what``: e.g. "windows", "batches")."""
        if self.unlogged:
            log.warning("%d more %s failed to close this round (not logged one by one)", self.unlogged, what)


async def run_round(
    keys: Sequence[K],
    size: int,
    close: Callable[[list[K]], Awaitable[BatchOutcome[T, K]]],
    clock: Clock,
    *,
    budget_s: float | None,
    begun: float,
    stopping: Callable[[], bool],
) -> Round[T, K]:
    """Close ``keys`` in batches of ``size`` with ``close`` (module docstring); ``begun``: when the round
    (a stop's: when the stop began) started, on ``clock``'s monotonic reading."""
    out: list[T] = []
    left: list[K] = []
    last_batch = 0.0
    for i in range(0, len(keys), size):
        now = clock.monotonic()
        if budget_s is None and stopping():
            return Round(out, left + list(keys[i:]))
        if budget_s is not None and now - begun + last_batch > budget_s:
            return Round(out, left + list(keys[i:]), out_of_time=True)
        batch = list(keys[i : i + size])
        outcome = await close(batch)
        out += outcome.closed
        left += outcome.failed
        if not outcome.go_on:
            return Round(out, left + list(keys[i + size :]))
        last_batch = clock.monotonic() - now
    return Round(out, left)
