"""The event loop's lag (streams/loop_lag.py): measured on the injected clock, reported on /metrics."""

from __future__ import annotations

import asyncio

from prometheus_client import generate_latest

from pipeline.clock import ManualClock
from streams.loop_lag import watch_loop_lag
from streams.telemetry import WorkerMetrics


async def test_a_held_loop_shows_as_the_lag_of_the_next_wake_up_on_metrics() -> None:
    clock, metrics = ManualClock(), WorkerMetrics()
    lags: list[float] = []

    def observe(seconds: float) -> None:
        lags.append(seconds)
        metrics.loop_lagged(seconds)

    watcher = asyncio.ensure_future(watch_loop_lag(clock, observe, 0.25, running=lambda: len(lags) < 4))
    await asyncio.sleep(0)  # on time
    await asyncio.sleep(0)
    clock.advance(3.0)  # something held the loop 3 s while the watcher slept
    await watcher
    assert lags[0] == 0.0 and max(lags) == 3.0 and lags.count(0.0) == 3
    text = generate_latest(metrics.registry).decode()
    assert "groundwatch_event_loop_lag_max_seconds 3.0" in text
    assert 'groundwatch_event_loop_lag_seconds_bucket{le="2.5"} 3.0' in text
    assert 'groundwatch_event_loop_lag_seconds_bucket{le="5.0"} 4.0' in text
