"""run_bounded: events handled concurrently up to the limit, the loop keeps pulling, acks in offset order."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

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


async def test_a_message_the_producer_cannot_send_is_dead_lettered_in_one_line_naming_the_setting(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A message over the producer's max_request_size: aiokafka refuses it; the event's dead letter says
    how large it was and which setting bounds it, and the log has one WARNING line, no traceback."""
    from aiokafka.errors import MessageSizeTooLargeError

    from schemas.errors import MessageTooLarge
    from schemas.interaction import Interaction
    from streams.context import new_context
    from tests.fixtures.messages import interaction
    from tests.settings_factory import make_settings

    class RefusingTopic:
        async def send(self, *, key: bytes | None, value: bytes) -> asyncio.Future[Any]:
            raise MessageSizeTooLargeError(f"The message is {len(value)} bytes when serialized")

    ctx = new_context(
        make_settings(
            kafka={"max_message_bytes": 65_536},
            limits={"max_answer_chars": 30_000, "max_ground_truth_chars": 30_000},
        ),
        app=None,
    )  # type: ignore[arg-type]
    ctx.topics[ctx.names.converted] = RefusingTopic()
    big: Interaction = interaction(answer="x" * 30_000)
    failures: list[Exception] = []

    async def handler(event: Any) -> None:
        await ctx.send(ctx.names.converted, big.interaction_id, big)

    async def on_error(event: Any, exc: Exception) -> None:
        failures.append(exc)

    acked: list[tuple[str, int]] = []
    with caplog.at_level(logging.DEBUG):
        await run_bounded(Stream(numbered(1, acked)), handler, limit=1, on_error=on_error)
    [failure] = failures
    assert isinstance(failure, MessageTooLarge)
    assert "GROUNDWATCH_KAFKA__MAX_MESSAGE_BYTES" in str(failure) and "65,536" in str(failure)
    assert offsets(acked) == [0]  # dead-lettered, acked
    assert not [r for r in caplog.records if r.exc_info or r.levelno >= logging.ERROR]
    assert len([r for r in caplog.records if r.levelno == logging.WARNING]) == 1
