"""The dead-letter recorder writes rows in batches (size, then age on the worker's clock), acks a letter
only once the insert holding its row succeeded, retries a failing insert with backoff on that clock
(never a real sleep), and reports how far behind it is on /metrics."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import generate_latest

from pipeline.clock import ManualClock
from schemas.errors import JudgeError
from streams.clickhouse.batch import DeadLetterRows
from streams.codec import dead_letter, encode
from streams.context import new_context
from streams.processors.dead_letters import DeadLetterRecorder
from streams.resources import Resources as WorkerResources
from streams.testing import Event, Stream
from tests.settings_factory import make_settings


class Store:
    """Records every insert; fails the next ``failures`` of them."""

    def __init__(self) -> None:
        self.inserts: list[list[list[Any]]] = []
        self.failures = 0

    async def insert_dead_letter_rows(self, rows: Sequence[Sequence[Any]]) -> None:
        if self.failures:
            self.failures -= 1
            raise ConnectionError("ClickHouse is away")
        self.inserts.append([list(r) for r in rows])


class Resources:
    def __init__(self, rows: int = 500, seconds: float = 0.5) -> None:
        self.clock = ManualClock()
        self.store_open = Store()
        self.ready = True
        self.status_writes = 0
        self.dead_letter_rows = DeadLetterRows(
            self.store_open.insert_dead_letter_rows, rows, seconds, clock=self.clock
        )

    async def wait_ready(self) -> Resources:
        return self

    async def write_status(self) -> None:
        self.status_writes += 1


FAILED_AT = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)


def letters(n: int) -> list[Event]:
    out = []
    for i in range(n):
        letter = dead_letter(
            stage="nli", error=JudgeError(f"judge gave up {i}"), payload=f"p{i}",
            source_topic="t.converted", interaction_id=f"i{i}", failed_at=FAILED_AT,
        )  # fmt: skip
        out.append(Event(encode(letter), key=f"i{i}".encode()))
    return out


def recorder(res: Resources) -> DeadLetterRecorder:
    settings = make_settings(clickhouse={"dead_letter_batch_rows": 500, "dead_letter_batch_seconds": 0.5})
    ctx = new_context(settings, app=None)  # type: ignore[arg-type]
    return DeadLetterRecorder(ctx, res)  # type: ignore[arg-type]


async def test_a_flood_is_written_in_batches_and_acked_after_its_insert() -> None:
    res = Resources()
    rec = recorder(res)
    events = letters(1200)
    await rec.consume(Stream(events))
    store = res.store_open
    assert [len(batch) for batch in store.inserts] == [500, 500]  # not one insert per letter
    assert all(e.acked for e in events[:1000]) and not any(e.acked for e in events[1000:])
    assert rec.unrecorded()[0] == 200
    await rec.flush_tick()
    assert len(store.inserts) == 2  # the rest is not old enough yet
    res.clock.advance(0.5)
    assert rec.unrecorded() == (200, 0.5)
    await rec.flush_tick()
    assert [len(batch) for batch in store.inserts] == [500, 500, 200] and all(e.acked for e in events)
    ids = [row[0] for batch in store.inserts for row in batch]
    assert len(set(ids)) == 1200  # one row per letter, keyed by its id
    assert rec.unrecorded() == (0, 0.0)


async def test_a_failing_insert_acks_nothing_and_retries_on_the_workers_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    real_sleep = asyncio.sleep

    async def no_real_sleep(seconds: float, *args: Any) -> None:
        if seconds:  # (a ManualClock yields to other tasks with sleep(0))
            raise AssertionError("asyncio.sleep called: the backoff must wait on the injected clock")
        await real_sleep(0)

    monkeypatch.setattr(asyncio, "sleep", no_real_sleep)
    res = Resources()
    res.store_open.failures = 3
    rec = recorder(res)
    events = letters(500)
    await rec.consume(Stream(events))
    # the retry helper's backoff on the worker's clock (the first failure was the add's own write)
    assert res.clock.slept == [0.5, 1.0]
    assert [len(batch) for batch in res.store_open.inserts] == [500] and all(e.acked for e in events)


async def test_a_timed_write_that_fails_keeps_its_rows_unacked() -> None:
    res = Resources()
    rec = recorder(res)
    events = letters(3)
    await rec.consume(Stream(events))
    res.store_open.failures = 1
    res.clock.advance(1)
    await rec.flush_tick()
    assert res.store_open.inserts == [] and not any(e.acked for e in events)
    assert rec.unrecorded()[0] == 3
    await rec.flush_tick()  # put back with its age counted again: not due yet
    res.clock.advance(1)
    await rec.flush_tick()
    assert [len(b) for b in res.store_open.inserts] == [3] and all(e.acked for e in events)


async def test_the_recorders_lag_is_on_the_metrics() -> None:
    res = Resources()
    rec = recorder(res)
    rec.ctx.metrics.watch_dead_letters(rec.unrecorded)
    await rec.consume(Stream(letters(7)))
    res.clock.advance(0.25)
    text = generate_latest(rec.ctx.metrics.registry).decode()
    assert "groundwatch_dead_letters_unrecorded 7.0" in text
    assert "groundwatch_dead_letters_unrecorded_seconds 0.25" in text


async def test_a_status_file_that_cannot_be_written_is_no_failed_write(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The rows are inserted and acked; the status file written after them fails: one line naming the
    status file, once while it keeps failing, and neither a failed write nor a retry of the insert."""
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("")
    settings = make_settings(clickhouse={"status_file": str(blocker / "status.json")})
    ctx = new_context(settings, app=None)  # type: ignore[arg-type]
    clock = ManualClock()
    resources = WorkerResources(ctx, clock=clock)
    store = Store()

    class Counts:
        async def counts(self) -> dict[str, int]:
            return {"dead_letters": sum(len(b) for b in store.inserts)}

    resources.store = Counts()  # type: ignore[assignment]
    resources._dead_letter_rows = DeadLetterRows(
        store.insert_dead_letter_rows, 500, 0.5, clock=clock, on_written=resources._dead_letters_written
    )
    resources._ready.set()
    rec = DeadLetterRecorder(ctx, resources)
    caplog.set_level(logging.INFO)
    for batch in (letters(3), letters(2)):
        await rec.consume(Stream(batch))
        clock.advance(1)
        await rec.flush_tick()
        assert all(e.acked for e in batch)
    assert [len(b) for b in store.inserts] == [3, 2]  # each insert once: none taken for failed
    lines = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    assert "status file" in lines[0].getMessage() and "status.json" in lines[0].getMessage()
    assert lines[0].exc_info is None and rec.flush_failures.in_a_row == 0
    blocker.unlink()
    await rec.consume(Stream(letters(1)))
    clock.advance(1)
    await rec.flush_tick()
    assert "written again" in caplog.records[-1].getMessage()
    assert (blocker / "status.json").exists()


async def test_the_status_file_is_written_at_most_every_status_every_s_and_the_last_write_is_never_lost(
    tmp_path: Path,
) -> None:
    """Its counts are deduplicated counts of every table: written after a write, but at most once every
    ``clickhouse.status_every_s``; a write that came sooner is made by the flush timer once it may be."""
    path = tmp_path / "status.json"
    settings = make_settings(clickhouse={"status_file": str(path), "status_every_s": 1.0})
    ctx = new_context(settings, app=None)  # type: ignore[arg-type]
    clock = ManualClock()
    resources = WorkerResources(ctx, clock=clock)
    counted: list[int] = []

    class Counts:
        async def counts(self) -> dict[str, int]:
            counted.append(len(counted) + 1)
            return {"evaluations": len(counted)}

    resources.store = Counts()  # type: ignore[assignment]
    await resources.update_status()  # the first write: at once
    await resources.update_status()
    clock.advance(0.5)
    await resources.update_status()
    await resources.status_if_due()
    assert counted == [1]  # three writes within the second: held back
    clock.advance(0.5)
    await resources.status_if_due()  # the flush timer: the held-back write, now
    assert counted == [1, 2] and '"evaluations":2' in path.read_text().replace(" ", "")
    clock.advance(5)
    await resources.status_if_due()
    assert counted == [1, 2]  # nothing written since: nothing to rewrite
