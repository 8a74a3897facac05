"""The Wilson score interval of a proportion (how firm a window's rate is, given its denominator): the one
definition the dashboard, the slices, the documents ranking and the alert rules' Newcombe bounds use."""

from __future__ import annotations

import math

#: z for a two-sided 95 % interval
Z95 = 1.959963984540054


def wilson_interval(successes: float, trials: int, z: float = Z95) -> tuple[float, float] | None:
    """(lower, upper) of the Wilson score interval for ``successes`` out of ``trials`` (a count, or a
    sum of weights in [0, trials]); None without trials. Unlike the normal approximation it stays inside
    [0, 1] and is sensible at 0 and n."""
    if trials <= 0:
        return None
    if not 0 <= successes <= trials:
        raise ValueError(f"successes must be within [0, trials]: {successes} of {trials}")
    p = successes / trials
    z2 = z * z
    centre = (p + z2 / (2 * trials)) / (1 + z2 / trials)
    half = z * math.sqrt(p * (1 - p) / trials + z2 / (4 * trials * trials)) / (1 + z2 / trials)
    # at 0 and n the bound is exactly 0 (1): computed, it can come out a rounding error above (below)
    lower = 0.0 if successes == 0 else max(0.0, centre - half)
    upper = 1.0 if successes == trials else min(1.0, centre + half)
    return lower, upper
