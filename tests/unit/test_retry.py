"""pipeline.retry: the one way to retry (the judge client, alert deliveries, the worker's sends)."""

from __future__ import annotations

import asyncio
import random

import pytest

from pipeline.retry import NO_CAP, Backoff, retry


class Waits:
    def __init__(self) -> None:
        self.waited: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.waited.append(seconds)


class Flaky:
    def __init__(self, failures: int, exc: Exception | None = None) -> None:
        self.failures = failures
        self.calls = 0
        self.exc = exc or ConnectionError("down")

    async def __call__(self) -> str:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.exc
        return "done"


async def test_doubling_waits_up_to_the_cap_then_the_value() -> None:
    waits = Waits()
    tried = await retry(Flaky(5), what="x", backoff=Backoff(first_s=1, max_s=5), sleep=waits)
    assert (tried.ok, tried.value, tried.attempts) == (True, "done", 6)
    assert waits.waited == [1, 2, 4, 5, 5]


async def test_bounded_attempts_give_up_with_the_last_failure() -> None:
    waits = Waits()
    attempt = Flaky(10)
    tried = await retry(
        attempt, what="x", attempts=3, backoff=Backoff(first_s=0.5, max_s=NO_CAP), sleep=waits
    )
    assert not tried.ok and tried.value is None and tried.attempts == attempt.calls == 3
    assert isinstance(tried.error, ConnectionError) and waits.waited == [0.5, 1.0]


async def test_only_the_named_failures_are_retried() -> None:
    attempt = Flaky(1, ValueError("a bug"))
    with pytest.raises(ValueError, match="a bug"):
        await retry(attempt, what="x", retry_on=(ConnectionError,), sleep=Waits())
    assert attempt.calls == 1


async def test_cancellation_is_never_swallowed() -> None:
    attempt = Flaky(1, asyncio.CancelledError())  # type: ignore[arg-type]
    with pytest.raises(asyncio.CancelledError):
        await retry(attempt, what="x", retry_on=(BaseException,), sleep=Waits())


def test_equal_jitter_stays_within_half_to_the_whole_step_and_honours_retry_after() -> None:
    backoff = Backoff(first_s=1, max_s=8, jitter=True)
    rng = random.Random(7)
    for failures, step in [(1, 1), (2, 2), (3, 4), (4, 8), (9, 8)]:
        delays = [backoff.delay(failures, rng=rng) for _ in range(200)]
        assert all(step / 2 <= d <= step for d in delays) and len(set(delays)) > 1

    class Slow(Exception):
        retry_after = 6.0

    assert backoff.delay(1, Slow(), rng) == 6.0  # the server asked for more than the step
    Slow.retry_after = 60.0
    assert backoff.delay(1, Slow(), rng) == 8.0  # but never more than the cap
    assert Backoff(first_s=1, max_s=30).delay(10_000) == 30  # no overflow after very many failures
