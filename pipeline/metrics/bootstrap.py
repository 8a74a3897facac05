"""Percentile bootstrap intervals for ROC AUC and balanced accuracy: how firm a figure is, given its cases.

The cases are resampled with replacement ``resamples`` times (a fixed ``seed``: the same input gives the
same interval); the statistic is computed on each resample and the interval is the ``(1 - level) / 2``
and ``(1 + level) / 2`` quantiles of those values. A resample in which the statistic is undefined (one
class absent, for AUC) is left out; ``defined`` says how many counted, and with fewer than half of them
defined there is no interval (None).

Given ``groups`` (cases sharing a question or a source passage: ``pipeline.metrics.groups``), whole
groups are resampled (a cluster bootstrap): cases of one group are not independent evidence, and
resampling them one by one would make the interval narrower than it is.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
from pydantic import BaseModel

from pipeline.metrics.classification import roc_auc

#: the defaults of ``groundwatch eval``: 1000 resamples, seed 0, 95 %
RESAMPLES = 1000
SEED = 0
LEVEL = 0.95

Statistic = Callable[[np.ndarray, np.ndarray], float | None]


class Interval(BaseModel):
    """A percentile bootstrap interval."""

    low: float
    high: float
    level: float
    resamples: int  # resamples drawn
    defined: int  # resamples on which the statistic was defined

    def text(self, digits: int = 3) -> str:
        return f"[{self.low:.{digits}f}, {self.high:.{digits}f}]"


def auc_statistic(labels: np.ndarray, scores: np.ndarray) -> float | None:
    return roc_auc(labels, scores)  # type: ignore[arg-type]


def balanced_accuracy_statistic(threshold: float) -> Statistic:
    """Balanced accuracy of ``score >= threshold`` (mean of the recalls of the classes present)."""

    def statistic(labels: np.ndarray, scores: np.ndarray) -> float | None:
        if labels.size == 0:
            return None
        predicted = scores >= threshold
        recalls = [float(predicted[labels == 1].mean())] if (labels == 1).any() else []
        if (labels == 0).any():
            recalls.append(float((~predicted[labels == 0]).mean()))
        return sum(recalls) / len(recalls)

    return statistic


def _members(groups: Sequence[Hashable]) -> list[np.ndarray]:
    """The case indices of each group, groups in order of first appearance."""
    index: dict[Hashable, list[int]] = {}
    for i, g in enumerate(groups):
        index.setdefault(g, []).append(i)
    return [np.asarray(v, dtype=int) for v in index.values()]


def bootstrap_interval(
    labels: Sequence[int],
    scores: Sequence[float],
    statistic: Statistic,
    *,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
    seed: int = SEED,
    groups: Sequence[Hashable] | None = None,
) -> Interval | None:
    """The percentile bootstrap interval of ``statistic(labels, scores)``, resampling whole ``groups``
    when given; None without cases, with ``resamples < 1``, or when the statistic is undefined on more
    than half of the resamples."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be within (0, 1), not {level}")
    y = np.asarray(labels, dtype=int)
    s = np.asarray(scores, dtype=float)
    if y.size != s.size:
        raise ValueError(f"{y.size} labels but {s.size} scores")
    if groups is not None and len(groups) != y.size:
        raise ValueError(f"{y.size} labels but {len(groups)} groups")
    if y.size == 0 or resamples < 1:
        return None
    members = _members(groups) if groups is not None else None
    n = len(members) if members is not None else y.size
    rng = np.random.default_rng(seed)
    values: list[float] = []
    for _ in range(resamples):
        drawn = rng.integers(0, n, size=n)
        pick = drawn if members is None else np.concatenate([members[g] for g in drawn])
        value = statistic(y[pick], s[pick])
        if value is not None:
            values.append(value)
    if len(values) * 2 < resamples:
        return None
    low, high = np.quantile(np.asarray(values), [(1.0 - level) / 2.0, (1.0 + level) / 2.0])
    return Interval(low=float(low), high=float(high), level=level, resamples=resamples, defined=len(values))


def auc_interval(
    labels: Sequence[int],
    scores: Sequence[float],
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    groups: Sequence[Hashable] | None = None,
) -> Interval | None:
    """95 % percentile bootstrap interval of the ROC AUC."""
    return bootstrap_interval(labels, scores, auc_statistic, resamples=resamples, seed=seed, groups=groups)


def balanced_accuracy_interval(
    labels: Sequence[int],
    scores: Sequence[float],
    threshold: float,
    *,
    resamples: int = RESAMPLES,
    seed: int = SEED,
    groups: Sequence[Hashable] | None = None,
) -> Interval | None:
    """95 % percentile bootstrap interval of the balanced accuracy of ``score >= threshold``."""
    statistic = balanced_accuracy_statistic(threshold)
    return bootstrap_interval(labels, scores, statistic, resamples=resamples, seed=seed, groups=groups)
