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
