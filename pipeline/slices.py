"""Slices, pure: a metric per value of one dimension (with its Wilson interval), and what changed between
two periods, each slice's contribution split into mix shift and rate shift.

The decomposition. With ``w`` a slice's share of the metric's denominator and ``r`` its value in the
baseline (0) and current (1) period, the overall value is ``R = sum(w * r)`` and

    R1 - R0 = sum over slices of  mix + rate,  where
    mix  = (w1 - w0) * ((r0 + r1) / 2 - (R0 + R1) / 2)     the slice's share moved
    rate = (r1 - r0) * (w0 + w1) / 2                       the slice's own value moved

exactly (the midpoint, or Shapley, split of ``w1 r1 - w0 r0``; the shares add to 1 in both periods, so
subtracting the overall midpoint from the mix term changes no total, and a slice that gains share at
the average value then contributes nothing). A slice absent from one period takes its other period's
value there: all its contribution is mix. A sum (volume, tokens, cost) is not split: a slice's
contribution is the change of its total.
"""

from __future__ import annotations

from collections.abc import Sequence

from pipeline.metrics.wilson import wilson_interval
from schemas.metrics import Metric, MetricKind
from schemas.slices import Contribution, Decomposition, SliceTotals, SliceValue


def _denominator(metric: Metric, s: SliceTotals) -> int:
    return s.interactions if metric.kind is MetricKind.SUM else s.n


def value_of(metric: Metric, s: SliceTotals) -> float | None:
    if metric.kind is MetricKind.SUM:
        return s.total
    return s.total / s.n if s.n > 0 else None


def breakdown(metric: Metric, slices: Sequence[SliceTotals]) -> list[SliceValue]:
    """Each slice's value (a rate with its Wilson interval), largest volume first."""
    everyone = sum(s.interactions for s in slices)
    out = []
    for s in slices:
        interval = None
        if metric.kind is MetricKind.RATE and s.n > 0:
            interval = wilson_interval(min(s.n, max(0, round(s.total))), s.n)
        out.append(
            SliceValue(
                value=s.value,
                metric=value_of(metric, s),
                lower=interval[0] if interval else None,
                upper=interval[1] if interval else None,
                n=_denominator(metric, s),
                interactions=s.interactions,
                share=s.interactions / everyone if everyone else 0.0,
            )
        )
    return sorted(out, key=lambda v: (-v.interactions, v.value))


def overall(metric: Metric, slices: Sequence[SliceTotals]) -> float | None:
    total = sum(s.total for s in slices)
    if metric.kind is MetricKind.SUM:
        return total
    n = sum(s.n for s in slices)
    return total / n if n else None


def decompose(
    metric: Metric, baseline: Sequence[SliceTotals], current: Sequence[SliceTotals]
) -> Decomposition:
    """Each slice's contribution to the change of ``metric`` from ``baseline`` to ``current`` (module
    docstring). Without a denominator in either period there is no change to split: no contributions."""
    before = {s.value: s for s in baseline}
    after = {s.value: s for s in current}
    r0, r1 = overall(metric, baseline), overall(metric, current)
    if r0 is None or r1 is None:
        return Decomposition(baseline=r0, current=r1, change=None, contributions=[])
    out = []
    if metric.kind is MetricKind.SUM:
        t0, t1 = sum(s.total for s in baseline), sum(s.total for s in current)
        for value in before.keys() | after.keys():
            a = before[value].total if value in before else 0.0
            b = after[value].total if value in after else 0.0
            out.append(
                Contribution(
                    value=value, baseline=a, current=b,
                    baseline_share=a / t0 if t0 else 0.0, current_share=b / t1 if t1 else 0.0,
                    baseline_n=before[value].interactions if value in before else 0,
                    current_n=after[value].interactions if value in after else 0,
                    mix=None, rate=None, contribution=b - a,
                )
            )  # fmt: skip
    else:
        n0, n1 = sum(s.n for s in baseline), sum(s.n for s in current)
        middle = (r0 + r1) / 2
        for value in before.keys() | after.keys():
            s0, s1 = before.get(value), after.get(value)
            k0, k1 = (s0.n if s0 else 0), (s1.n if s1 else 0)
            if k0 == 0 and k1 == 0:
                continue  # interactions, but none carrying the metric: no part in it
            v0 = s0.total / k0 if s0 and k0 else None
            v1 = s1.total / k1 if s1 and k1 else None
            x0 = v0 if v0 is not None else v1  # absent from a period: its other period's value
            x1 = v1 if v1 is not None else v0
            assert x0 is not None and x1 is not None
            w0, w1 = k0 / n0, k1 / n1
            mix = (w1 - w0) * ((x0 + x1) / 2 - middle)
            rate = (x1 - x0) * (w0 + w1) / 2
            out.append(
                Contribution(
                    value=value, baseline=v0, current=v1, baseline_share=w0, current_share=w1,
                    baseline_n=k0, current_n=k1, mix=mix, rate=rate, contribution=mix + rate,
                )
            )  # fmt: skip
    out.sort(key=lambda c: (-abs(c.contribution), c.value))
    return Decomposition(baseline=r0, current=r1, change=r1 - r0, contributions=out)
