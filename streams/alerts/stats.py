"""The statistics of the baseline rules, pure: pooled observations and one-sided z-tests.

A window contributes an ``Obs``: for a rate, the events and the interactions the rate is over (its
denominator); for a mean entailment, the sum of the scores and how many were scored. Windows store only
a mean and a count, not a variance, so the test on means estimates the per-interaction variance from how
much the baseline's window means scatter around their pooled mean (method of moments: each window mean
has variance sigma^2 / n_i), capped by the largest variance a score between 0 and 1 with that mean can
have, m (1 - m), which is also the fallback when the baseline has fewer than 4 windows with data.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from statistics import NormalDist

from pipeline.metrics.wilson import wilson_interval
from schemas.metrics import METRICS, SUM_SUPPORT_COLUMN, MetricKind, metric_named, named
from schemas.window import WindowAggregate

#: the WindowAggregate field that counts the interactions a metric is computed over (its denominator; a
#: total's: every interaction received)
DENOMINATORS: dict[str, str] = {m.name: m.count_column or SUM_SUPPORT_COLUMN for m in METRICS}
MIN_VARIANCE = 1e-4  # a floor, so a baseline of identical scores does not make every wobble significant


@dataclass(frozen=True)
class Obs:
    total: float  # events (a rate), the sum of the scores (a mean), or a total (tokens, cost, volume)
    n: int  # the metric's denominator (a total's: the interactions received)
    is_total: bool = False  # the value is the total itself, not total / n

    @property
    def value(self) -> float | None:
        if self.n <= 0:
            return None
        return self.total if self.is_total else self.total / self.n


EMPTY = Obs(0.0, 0)


def observe(metric: str, window: WindowAggregate) -> Obs:
    """The window's observation of one metric (an empty one when it has no value), as the catalogue
    (schemas.metrics) pools it."""
    known = named(metric)
    total, n = known.totals(window)
    if known.kind is MetricKind.SUM:
        n = int(getattr(window, SUM_SUPPORT_COLUMN))
        return Obs(total, n, is_total=True) if n > 0 else EMPTY
    return Obs(total, n) if n > 0 else EMPTY


def pool(observations: Iterable[Obs]) -> Obs:
    total, n, is_total = 0.0, 0, False
    for o in observations:
        total += o.total
        n += o.n
        is_total = is_total or o.is_total
    return Obs(total, n, is_total)


def z_critical(confidence: float) -> float:
    """The one-sided critical value: 0.99 -> 2.326."""
    return NormalDist().inv_cdf(confidence)


def z_rates(current: Obs, baseline: Obs) -> float:
    """Two-proportion z statistic (pooled variance) of current minus baseline; 0 without variance."""
    if current.n <= 0 or baseline.n <= 0:
        return 0.0
    p = (current.total + baseline.total) / (current.n + baseline.n)
    se = math.sqrt(p * (1 - p) * (1 / current.n + 1 / baseline.n))
    if se == 0:
        return 0.0
    return (current.total / current.n - baseline.total / baseline.n) / se


def mean_variance(baseline_windows: Iterable[Obs]) -> float:
    """Per-interaction variance of a score in [0, 1], from the baseline's windows (module docstring)."""
    used = [o for o in baseline_windows if o.n > 0]
    pooled = pool(used)
    if pooled.n == 0:
        return 0.25
    m = pooled.total / pooled.n
    bound = max(m * (1 - m), MIN_VARIANCE)
    if len(used) < 4:
        return bound
    scatter = sum(o.n * (o.total / o.n - m) ** 2 for o in used) / (len(used) - 1)
    return min(max(scatter, MIN_VARIANCE), bound)


def z_means(current: Obs, baseline: Obs, variance: float) -> float:
    if current.n <= 0 or baseline.n <= 0:
        return 0.0
    se = math.sqrt(variance * (1 / current.n + 1 / baseline.n))
    return (current.total / current.n - baseline.total / baseline.n) / se


def wilson(obs: Obs, z: float) -> tuple[float, float]:
    """The Wilson score interval of a rate (``pipeline.metrics.wilson``; z: the one-sided critical value
    of each bound); the observation has a denominator."""
    interval = wilson_interval(obs.total, obs.n, z)
    if interval is None:
        raise ValueError("a rate without a denominator has no interval")
    return interval


def newcombe_lower(current: Obs, baseline: Obs, z: float) -> float:
    """Lower bound of current minus baseline rate (Newcombe's hybrid score interval from the two Wilson
    intervals; unlike the z-test it keeps its coverage at a few events per window)."""
    p1, p0 = current.total / current.n, baseline.total / baseline.n
    low1, _ = wilson(current, z)
    _, up0 = wilson(baseline, z)
    return p1 - p0 - math.sqrt((p1 - low1) ** 2 + (up0 - p0) ** 2)


def upper_change(current: Obs, baseline: Obs, z: float) -> float:
    """Upper bound of current minus baseline rate (the same interval, the other side)."""
    flipped = Obs(current.n - current.total, current.n), Obs(baseline.n - baseline.total, baseline.n)
    return -newcombe_lower(*flipped, z)


def _log_choose(n: int, k: int) -> float:
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


def fisher_greater(current: Obs, baseline: Obs) -> float:
    """One-sided p-value of Fisher's exact test that the current rate is above the baseline's: the
    probability, with the events' total fixed, that the current windows draw at least as many events as
    they did (hypergeometric upper tail). Exact, so its false-alarm rate stays at or below the nominal
    level at a handful of events a window, where interval approximations overshoot it."""
    n1, n0 = current.n, baseline.n
    x1 = round(current.total)
    events = x1 + round(baseline.total)
    top = min(events, n1)
    if x1 <= max(0, events - n0):
        return 1.0
    log_all = _log_choose(n1 + n0, n1)
    p = 0.0
    for k in range(x1, top + 1):
        term = math.exp(_log_choose(events, k) + _log_choose(n1 + n0 - events, n1 - k) - log_all)
        p += term
        if term < p * 1e-12:  # past the mode the terms only shrink
            break
    return min(p, 1.0)


def significant(
    metric: str, current: Obs, baseline: Obs, baseline_windows: Iterable[Obs], confidence: float, up: bool
) -> tuple[bool, float]:
    """Whether current moved away from baseline in the bad direction at this one-sided confidence, and
    the z statistic (for the message). Rates: Fisher's exact test (``fisher_greater``); means: a z-test
    with the variance of ``mean_variance``."""
    zc = z_critical(confidence)
    if current.n <= 0 or baseline.n <= 0:
        return False, 0.0
    known = metric_named(metric)
    if known is not None and known.kind is MetricKind.RATE:
        z = z_rates(current, baseline)
        if not up:  # a fall in the rate is a rise in its complement
            current = Obs(current.n - current.total, current.n)
            baseline = Obs(baseline.n - baseline.total, baseline.n)
        return fisher_greater(current, baseline) <= 1 - confidence, z if up else -z
    z = z_means(current, baseline, mean_variance(baseline_windows))
    z = z if up else -z
    return z >= zc, z
