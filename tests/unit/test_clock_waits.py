"""Waits bounded on the injected clock (``pipeline.clock.wait_all``, ``within``): on a ManualClock the
bound passes at once, so a test of a timeout never waits in real time."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.clock import SYSTEM_CLOCK, ManualClock, wait_all, within


async def test_a_wait_on_a_manual_clock_ends_at_once_with_the_tasks_still_running() -> None:
    clock = ManualClock()
    hang: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    quick = asyncio.ensure_future(asyncio.sleep(0))
    pending = await wait_all(clock, [hang, quick], 3600)
    assert pending == {hang} and quick.done() and not hang.cancelled()  # the caller decides
    assert clock.slept == [3600]  # the bound was waited on the clock given
    hang.cancel()


async def test_within_gives_the_result_or_cancels_and_raises_timeout() -> None:
    clock = ManualClock()

    async def answer() -> int:
        return 42

    assert await within(clock, 1, answer()) == 42
    started = asyncio.Event()

    async def hangs() -> None:
        started.set()
        await asyncio.Event().wait()

    with pytest.raises(TimeoutError, match="not done within 30 s"):
        await within(clock, 30, hangs())
    assert started.is_set()


async def test_tasks_done_before_the_bound_on_the_real_clock_return_nothing_pending() -> None:
    tasks = [asyncio.ensure_future(asyncio.sleep(0)) for _ in range(3)]
    assert await wait_all(SYSTEM_CLOCK, tasks, 60) == set()
    assert await wait_all(SYSTEM_CLOCK, [], 60) == set()
