"""A ClickHouse outage fails the sink's timed flush several times a second: the log gets the first
failure with its traceback, then a line a while, and one line when writes succeed again."""

from __future__ import annotations

import logging
from types import SimpleNamespace
from typing import Any

import pytest

from pipeline.clock import ManualClock
from streams.clickhouse.batch import FAILURE_LOG_EVERY_S
from streams.context import new_context
from streams.processors.sink import SinkProcessor
from tests.settings_factory import make_settings


class FlakySink:
    def __init__(self, failures: int) -> None:
        self.failures = failures

    async def flush_if_due(self) -> None:
        if self.failures:
            self.failures -= 1
            raise OSError("Cannot write: read-only file system")


async def no_status() -> None:
    """No status file here (clickhouse.status_file unset)."""


async def test_an_outage_logs_one_traceback_then_the_recovery(caplog: pytest.LogCaptureFixture) -> None:
    sink = FlakySink(failures=6)
    resources: Any = SimpleNamespace(ready=True, sink=sink, clock=ManualClock(), status_if_due=no_status)
    processor = SinkProcessor(new_context(make_settings(), app=None), resources)  # type: ignore[arg-type]
    caplog.set_level(logging.WARNING, logger="streams.processors.sink")
    for _ in range(7):
        await processor.flush_tick()
    records = [r for r in caplog.records if r.name == "streams.processors.sink"]
    assert [r.exc_info is not None for r in records] == [True, False]
    assert "timed flush failed" in records[0].getMessage()
    assert records[1].getMessage() == "sink: ClickHouse writes again after 6 failed flushes"


async def test_an_outage_that_lasts_gets_a_line_every_while_of_clock_time(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    resources: Any = SimpleNamespace(
        ready=True, sink=FlakySink(failures=100), clock=clock, status_if_due=no_status
    )
    processor = SinkProcessor(new_context(make_settings(), app=None), resources)  # type: ignore[arg-type]
    caplog.set_level(logging.WARNING, logger="streams.processors.sink")
    for _ in range(10):  # the first failure and nine more within the same second
        await processor.flush_tick()
    clock.advance(FAILURE_LOG_EVERY_S - 1)
    await processor.flush_tick()
    assert len([r for r in caplog.records if r.name == "streams.processors.sink"]) == 1
    clock.advance(1)
    await processor.flush_tick()
    records = [r for r in caplog.records if r.name == "streams.processors.sink"]
    assert len(records) == 2 and "12 timed flushes failed in a row" in records[1].getMessage()
