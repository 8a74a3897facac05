"""How late the worker's event loop runs what is due: the loop-lag gauge of ``/metrics``.

``watch_loop_lag`` asks to wake every ``every_s`` on the clock it is given (the worker passes the real one)
and observes how much later than
that it woke (``groundwatch_event_loop_lag_seconds``, a histogram, and the last and worst lag since the
start as gauges). Anything that holds the loop (CPU work on it, a blocking call) shows here as the lag
of the next wake-up: Kafka heartbeats, ``/healthz`` and every timer wait as long.
"""

from __future__ import annotations

from collections.abc import Callable

from pipeline.clock import Clock

#: how often the loop's lag is measured
LOOP_LAG_EVERY_S = 0.25


async def watch_loop_lag(
    clock: Clock, observe: Callable[[float], None], every_s: float = LOOP_LAG_EVERY_S,
    running: Callable[[], bool] = lambda: True,
) -> None:  # fmt: skip
    """Until ``running()`` is false: sleep ``every_s``, and ``observe`` how much later than asked the
    loop woke this task (0 when on time)."""
    while running():
        asked = clock.monotonic() + every_s
        await clock.sleep(every_s)
        observe(max(0.0, clock.monotonic() - asked))
