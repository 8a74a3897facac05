"""run_bounded: events handled concurrently up to the limit, the loop keeps pulling, acks in offset order."""

from __future__ import annotations

import asyncio
from typing import Any

from streams.runner import run_bounded
from streams.testing import Event, Message, Stream


def numbered(n: int, acked: list[tuple[str, int]]) -> list[Event]:
    """``n`` events of partition p, each carrying its offset as its value."""
    return [Event(i, message=Message("p", 0, i), acked=acked) for i in range(n)]  # type: ignore[arg-type]


def offsets(acked: list[tuple[str, int]]) -> list[int]:
    return [offset for _, offset in acked]


async def test_bounded_concurrency_and_ordered_acks() -> None:
    acked: list[tuple[str, int]] = []
    events = numbered(10, acked)
    stream = Stream(events)
    gates = {i: asyncio.Event() for i in range(10)}
    in_flight = 0
    peak = 0

    async def handler(event: Any) -> None:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await gates[event.value].wait()
        in_flight -= 1

    task = asyncio.create_task(run_bounded(stream, handler, limit=4))
    for _ in range(20):
        await asyncio.sleep(0)
    assert in_flight == 4 and stream.pulled == 5  # 4 running; the 5th waits for a slot
    gates[2].set()
    gates[1].set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert offsets(acked) == []  # offset 0 still running: nothing may be acked past it
    gates[0].set()
    for _ in range(20):
        await asyncio.sleep(0)
    assert offsets(acked) == [0, 1, 2]
    for g in gates.values():
        g.set()
    await asyncio.wait_for(task, 5)
    assert offsets(acked) == list(range(10)) and peak == 4


async def test_a_failing_handler_is_dead_lettered_and_acked() -> None:
    acked: list[tuple[str, int]] = []
    events = numbered(3, acked)
    dead: list[tuple[int, str]] = []

    async def handler(event: Any) -> None:
        if event.value == 1:
            raise ValueError("unexpected input")

    async def on_error(event: Any, exc: Exception) -> None:
        dead.append((event.value, str(exc)))

    await asyncio.wait_for(run_bounded(Stream(events), handler, limit=2, on_error=on_error), 5)
    assert dead == [(1, "unexpected input")] and offsets(acked) == [0, 1, 2]  # the partition never stalls


async def test_an_event_whose_dead_letter_raises_stays_unacked() -> None:
    """``on_error`` (StreamContext.dead_letter) retries and gives up by itself and never raises; should it
    raise all the same, the event is not acked as if its outcome were out."""
    acked: list[tuple[str, int]] = []
    events = numbered(3, acked)

    async def handler(event: Any) -> None:
        if event.value == 1:
            raise RuntimeError("bad")

    async def on_error(event: Any, exc: Exception) -> None:
        raise ConnectionError("producer down")

    await asyncio.wait_for(run_bounded(Stream(events), handler, limit=2, on_error=on_error), 5)
    assert offsets(acked) == [0]


async def test_without_on_error_a_failed_event_stays_unacked() -> None:
    acked: list[tuple[str, int]] = []
    events = numbered(3, acked)

    async def handler(event: Any) -> None:
        if event.value == 1:
            raise RuntimeError("bad")

    await asyncio.wait_for(run_bounded(Stream(events), handler, limit=2), 5)
    assert offsets(acked) == [0]  # 1 and everything after it in the partition come back after a restart
