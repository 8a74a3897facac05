"""PrioritySlots: the judge's in-flight bound, handed to the most urgent waiting stage first."""

from __future__ import annotations

import asyncio

import pytest

from pipeline.llm.slots import PrioritySlots, stage_priority


async def test_never_more_holders_than_the_limit() -> None:
    slots = PrioritySlots(3)
    holding = 0
    most = 0

    async def one(i: int) -> None:
        nonlocal holding, most
        async with slots.slot(i % 2):
            holding += 1
            most = max(most, holding)
            await asyncio.sleep(0)
            holding -= 1

    await asyncio.gather(*(one(i) for i in range(50)))
    assert most == 3
    assert slots.in_use == 0


async def test_a_freed_slot_goes_to_the_urgent_stage_then_in_arrival_order() -> None:
    slots = PrioritySlots(1)
    await slots.acquire()
    order: list[str] = []

    async def wait(name: str, priority: int) -> None:
        async with slots.slot(priority):
            order.append(name)

    tasks = []
    queued = [("p1", "pronouns"), ("n1", "nli"), ("p2", "pronouns"), ("r1", "refusal"), ("n2", "nli")]
    for name, stage in queued:
        tasks.append(asyncio.create_task(wait(name, stage_priority(stage))))
        await asyncio.sleep(0)  # queued in this order
    assert slots.waiting() == 5
    slots.release()
    await asyncio.gather(*tasks)
    assert order == ["n1", "r1", "n2", "p1", "p2"]
    assert slots.in_use == 0


async def test_a_cancelled_waiter_gives_up_its_place_and_loses_no_slot() -> None:
    slots = PrioritySlots(1)
    await slots.acquire()
    waiter = asyncio.create_task(slots.acquire(0))
    behind = asyncio.create_task(slots.acquire(1))
    await asyncio.sleep(0)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    slots.release()
    await asyncio.wait_for(behind, 1)  # the slot skipped the cancelled waiter
    assert slots.in_use == 1
    slots.release()
    assert slots.in_use == 0


async def test_a_waiter_cancelled_after_it_was_handed_a_slot_passes_it_on() -> None:
    slots = PrioritySlots(1)
    await slots.acquire()
    first = asyncio.create_task(slots.acquire(0))
    second = asyncio.create_task(slots.acquire(0))
    await asyncio.sleep(0)
    slots.release()  # handed to `first`, which has not run yet
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    await asyncio.wait_for(second, 1)
    assert slots.in_use == 1


def test_stage_priorities() -> None:
    assert stage_priority("nli") < stage_priority("pronouns")
    assert stage_priority("refusal") < stage_priority("pronouns")
    # a custom evaluator's rubric waits behind every core stage
    assert all(
        stage_priority(s) < stage_priority("custom") for s in ("nli", "refusal", "pronouns", "convert")
    )
    with pytest.raises(ValueError):
        PrioritySlots(0)
