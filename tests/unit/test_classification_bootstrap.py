"""Percentile bootstrap intervals (pipeline.metrics.bootstrap) on synthetic data."""

from __future__ import annotations

import random

import pytest

from pipeline.metrics.bootstrap import (
    auc_interval,
    balanced_accuracy_interval,
    balanced_accuracy_statistic,
    bootstrap_interval,
)
from pipeline.metrics.classification import balanced_accuracy, roc_auc


def _cases(n: int, seed: int = 0) -> tuple[list[int], list[float]]:
    rng = random.Random(seed)
    labels = [rng.randint(0, 1) for _ in range(n)]
    scores = [rng.gauss(0.6 if y else 0.4, 0.2) for y in labels]
    return labels, scores


def test_interval_contains_the_point_estimate_and_narrows_with_n() -> None:
    small = _cases(60)
    large = _cases(2000)
    for labels, scores in (small, large):
        auc = roc_auc(labels, scores)
        ci = auc_interval(labels, scores, resamples=400)
        assert ci is not None and auc is not None
        assert ci.low < auc < ci.high
        bacc = balanced_accuracy(labels, scores, 0.5)
        bci = balanced_accuracy_interval(labels, scores, 0.5, resamples=400)
        assert bci is not None and bacc is not None
        assert bci.low <= bacc <= bci.high
    wide = auc_interval(*small, resamples=400)
    narrow = auc_interval(*large, resamples=400)
    assert wide is not None and narrow is not None
    assert narrow.high - narrow.low < (wide.high - wide.low) / 2


def test_fixed_seed_is_reproducible() -> None:
    labels, scores = _cases(100)
    assert auc_interval(labels, scores, seed=1) == auc_interval(labels, scores, seed=1)
    assert auc_interval(labels, scores, seed=1) != auc_interval(labels, scores, seed=2)


def test_interval_covers_the_truth_about_95_percent_of_the_time() -> None:
    # true balanced accuracy of score >= 0.5 with N(0.6, 0.2) vs N(0.4, 0.2): Phi(0.5) = 0.6915
    truth = 0.6915
    covered = 0
    trials = 60
    for t in range(trials):
        labels, scores = _cases(300, seed=100 + t)
        ci = balanced_accuracy_interval(labels, scores, 0.5, resamples=300, seed=t)
        assert ci is not None
        covered += ci.low <= truth <= ci.high
    assert covered >= 0.85 * trials


def test_undefined_statistic_and_empty_input() -> None:
    assert auc_interval([1, 1, 1], [0.1, 0.2, 0.3]) is None  # one class: AUC undefined everywhere
    assert auc_interval([], []) is None
    ci = bootstrap_interval([1, 0], [0.9, 0.1], balanced_accuracy_statistic(0.5), resamples=200)
    assert ci is not None and 0.5 <= ci.low <= ci.high <= 1.0
    assert ci.defined == 200  # balanced accuracy is defined with one class (its recall)
    with pytest.raises(ValueError, match="level"):
        bootstrap_interval([1], [0.5], balanced_accuracy_statistic(0.5), level=1.5)
    with pytest.raises(ValueError, match="labels but"):
        bootstrap_interval([1], [0.5, 0.2], balanced_accuracy_statistic(0.5))


def test_groups_are_resampled_whole() -> None:
    """Five copies of each case are one piece of evidence each: resampled by group, the interval is
    that of the distinct cases; resampled case by case it would be about sqrt(5) times too narrow."""
    labels, scores = _cases(200, seed=3)
    copies = 5
    y = [v for v in labels for _ in range(copies)]
    s = [v for v in scores for _ in range(copies)]
    groups = [i for i in range(len(labels)) for _ in range(copies)]
    distinct = auc_interval(labels, scores, resamples=600)
    by_group = auc_interval(y, s, resamples=600, groups=groups)
    by_case = auc_interval(y, s, resamples=600)
    assert distinct is not None and by_group is not None and by_case is not None
    width = by_group.high - by_group.low
    assert abs(width - (distinct.high - distinct.low)) < 0.25 * width
    assert width > 1.8 * (by_case.high - by_case.low)
    assert balanced_accuracy_interval(y, s, 0.5, resamples=50, groups=groups) is not None
    with pytest.raises(ValueError, match="groups"):
        auc_interval([1, 0], [0.5, 0.4], groups=[1])
