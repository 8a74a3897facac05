"""One way to retry: exponential backoff (with or without jitter), bounded or not, every failure logged.

Used by the judge's HTTP client (``pipeline.llm.client``), the alert deliveries
(``streams.alerts.webhook``) and the worker for what must not be lost when the broker or ClickHouse
hiccups (a dead letter that cannot be sent, an Evaluation the join cannot emit, a batch ClickHouse
refuses, a dead-letter row). ``sleep`` is the caller's clock's (``pipeline.clock``: the worker's, or a
test's ``ManualClock``, which advances instead of waiting); ``rng`` is injectable too.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from pipeline.clock import SYSTEM_CLOCK

log = logging.getLogger(__name__)

T = TypeVar("T")

Sleep = Callable[[float], Awaitable[object]]

#: doubling stops here (2**64 steps is far beyond any cap; keeps the float arithmetic finite)
_MAX_DOUBLINGS = 64


@dataclass(frozen=True)
class Backoff:
    """The wait after the n-th failure: ``first_s`` doubled n-1 times, at most ``max_s``. With ``jitter``
    the wait is half that step plus a random part of the other half ("equal jitter"). A failure that
    carries a ``retry_after`` (seconds, as a server asked) waits at least that, at most ``max_s``."""

    first_s: float = 0.5
    max_s: float = 30.0
    jitter: bool = False

    def delay(
        self, failures: int, exc: BaseException | None = None, rng: random.Random | None = None
    ) -> float:
        step = min(self.max_s, self.first_s * 2 ** min(max(failures - 1, 0), _MAX_DOUBLINGS))
        wait = step / 2 + (rng or random).uniform(0, step / 2) if self.jitter else step
        retry_after = getattr(exc, "retry_after", None)
        if isinstance(retry_after, int | float) and not isinstance(retry_after, bool):
            wait = max(wait, min(float(retry_after), self.max_s))
        return wait


NO_CAP = math.inf


@dataclass(frozen=True)
class Tried(Generic[T]):
    """What ``retry`` ended with: the value (when an attempt returned), how many attempts were made, and
    the last failure when it gave up."""

    value: T | None
    attempts: int
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


async def retry(
    attempt: Callable[[], Awaitable[T]],
    *,
    what: str,
    attempts: int | None = None,
    backoff: Backoff = Backoff(),
    retry_on: tuple[type[BaseException], ...] = (Exception,),
    sleep: Sleep | None = None,
    rng: random.Random | None = None,
    level: int = logging.ERROR,
) -> Tried[T]:
    """Call ``attempt`` until it returns; after a failure wait ``backoff.delay`` (``sleep``; None: the
    system clock's, for a caller without a clock of its own). With
    ``attempts`` set, give up after that many calls and return the last failure in ``Tried.error``;
    without, keep trying (the caller holds its input unacked meanwhile). Only ``retry_on`` failures
    are retried; any other exception propagates at once. Cancellation is never swallowed. Each failure
    is logged at ``level`` (with its traceback at ERROR)."""
    tried = 0
    while True:
        tried += 1
        try:
            return Tried(await attempt(), tried)
        except asyncio.CancelledError:
            raise
        except retry_on as exc:
            last: BaseException = exc
            limit = f" of {attempts}" if attempts is not None else ""
            log.log(
                level, "%s failed (attempt %d%s): %s: %s", what, tried, limit, type(exc).__name__, exc,
                exc_info=exc if level >= logging.ERROR else None,
            )  # fmt: skip
        if attempts is not None and tried >= attempts:
            return Tried(None, tried, last)
        await (sleep or SYSTEM_CLOCK.sleep)(backoff.delay(tried, last, rng))
