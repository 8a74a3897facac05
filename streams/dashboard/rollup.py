"""Which bucket size a range is drawn with: the stored window, an hour, six hours or a day.

The finest of these that gives at most MAX_POINTS buckets is taken, so a chart stays readable and a
request reads at most a few hundred buckets per series whatever its range.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

RollupName = Literal["window", "hour", "6h", "day"]

HOUR = 3600
#: rollup name -> its bucket in seconds (the window's own size for "window")
LADDER: tuple[tuple[RollupName, int], ...] = (("hour", HOUR), ("6h", 6 * HOUR), ("day", 24 * HOUR))
#: the most buckets one series may have before the next coarser rollup is taken
MAX_POINTS = 200


def choose_rollup(
    span: timedelta, window_seconds: int | None, requested: str = "auto"
) -> tuple[RollupName, int]:
    """(rollup, step in seconds) for a range of ``span``; ``requested`` forces one ("auto": the finest
    with at most MAX_POINTS buckets). A step is never finer than the stored windows."""
    window = max(1, window_seconds or 60)
    seconds = span.total_seconds()
    if requested == "window" or (requested == "auto" and seconds / window <= MAX_POINTS):
        return "window", window
    for name, step in LADDER:
        step = max(step, window)
        if requested == name or (requested == "auto" and seconds / step <= MAX_POINTS):
            return name, step
    return "day", max(window, 24 * HOUR)
