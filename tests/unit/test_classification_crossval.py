"""Grouped k-fold cross-validation of thresholds (pipeline.metrics.crossval) on synthetic data."""

from __future__ import annotations

import random

import pytest

from pipeline.metrics.crossval import (
    Scored,
    choose_shared_threshold,
    choose_threshold,
    cross_validate,
    fixed_threshold,
    grouped_folds,
    mean_sd,
    threshold_candidates,
)


def _synthetic(n_groups: int = 60, seed: int = 1) -> tuple[list[str], list[int], list[float]]:
    rng = random.Random(seed)
    groups, labels, scores = [], [], []
    for g in range(n_groups):
        for _ in range(rng.randint(1, 6)):
            y = rng.randint(0, 1)
            groups.append(f"q{g}")
            labels.append(y)
            scores.append(min(1.0, max(0.0, rng.gauss(0.65 if y else 0.4, 0.2))))
    return groups, labels, scores


def test_a_group_never_straddles_folds_and_folds_are_balanced() -> None:
    groups, _, _ = _synthetic()
    folds = grouped_folds(groups, k=5, seed=0)
    fold_of: dict[str, set[int]] = {}
    for g, f in zip(groups, folds, strict=True):
        fold_of.setdefault(g, set()).add(f)
    assert all(len(fs) == 1 for fs in fold_of.values())
    sizes = [folds.count(f) for f in range(5)]
    assert set(folds) == set(range(5))
    assert max(sizes) - min(sizes) <= 6  # at most one group's size apart (groups hold 1-6 cases)


def test_folds_are_deterministic_and_depend_on_the_seed() -> None:
    groups, _, _ = _synthetic()
    assert grouped_folds(groups, seed=3) == grouped_folds(groups, seed=3)
    assert grouped_folds(groups, seed=3) != grouped_folds(groups, seed=4)
    with pytest.raises(ValueError, match="k must be"):
        grouped_folds(groups, k=1)


def test_threshold_is_a_midpoint_with_the_best_balanced_accuracy() -> None:
    # negatives 0.1 0.2 0.3, positives 0.6 0.7: any cut in (0.3, 0.6) separates; the midpoint 0.45
    assert choose_threshold([0, 0, 0, 1, 1], [0.1, 0.2, 0.3, 0.6, 0.7]) == pytest.approx(0.45)
    # inverted scores: the best is to call every case one class (balanced accuracy 0.5); the middle of
    # the tied candidates is taken
    t = choose_threshold([1, 1, 0, 0], [0.1, 0.2, 0.8, 0.9])
    assert t in set(threshold_candidates([0.1, 0.2, 0.8, 0.9]).tolist())
    assert list(threshold_candidates([0.2, 0.2, 0.4])) == pytest.approx([-0.8, 0.3, 1.4])


def test_shared_threshold_maximises_the_mean_over_sets() -> None:
    a = ([0, 0, 1, 1], [0.1, 0.2, 0.5, 0.6])  # separates anywhere in (0.2, 0.5)
    b = ([0, 0, 1, 1], [0.3, 0.4, 0.8, 0.9])  # separates anywhere in (0.4, 0.8)
    t = choose_shared_threshold([a, b])
    assert 0.4 < t < 0.5


def test_threshold_is_chosen_without_the_test_fold() -> None:
    groups, labels, scores = _synthetic(seed=2)
    folds = grouped_folds(groups, k=5, seed=0)
    base = cross_validate({"s": Scored(labels, scores, folds)})["s"]
    rng = random.Random(7)
    for test_fold in range(5):
        permuted = list(labels)
        idx = [i for i, f in enumerate(folds) if f == test_fold]
        shuffled = [labels[i] for i in idx]
        rng.shuffle(shuffled)
        flipped = [1 - v for v in shuffled]  # and flipped: the test fold's labels are nothing like before
        for i, v in zip(idx, flipped, strict=True):
            permuted[i] = v
        other = cross_validate({"s": Scored(permuted, scores, folds)})["s"]
        assert other[test_fold].threshold == base[test_fold].threshold
        assert other[test_fold].balanced_accuracy != base[test_fold].balanced_accuracy


def test_cross_validated_figures_are_out_of_fold() -> None:
    # a score that is pure noise: in-sample best balanced accuracy is optimistic, out-of-fold is ~0.5
    rng = random.Random(5)
    groups = [f"g{i // 2}" for i in range(400)]
    labels = [rng.randint(0, 1) for _ in groups]
    scores = [rng.random() for _ in groups]
    folds = grouped_folds(groups)
    results = cross_validate({"noise": Scored(labels, scores, folds)})["noise"]
    mean, sd = mean_sd([r.balanced_accuracy for r in results])
    assert mean is not None and sd is not None
    assert abs(mean - 0.5) < 0.06
    assert sum(r.n for r in results) == 400


def test_fixed_threshold_and_shared_sets() -> None:
    groups, labels, scores = _synthetic(seed=3)
    folds = grouped_folds(groups)
    flags = [1.0 if s >= 0.5 else 0.0 for s in scores]
    out = cross_validate(
        {"a": Scored(labels, flags, folds), "b": Scored(labels, scores, folds)}, fixed_threshold(0.5)
    )
    assert {r.threshold for rs in out.values() for r in rs} == {0.5}
    assert out["a"][0].balanced_accuracy == out["b"][0].balanced_accuracy


def test_mean_sd() -> None:
    assert mean_sd([0.5, None, 0.7]) == (pytest.approx(0.6), pytest.approx(0.1414213, rel=1e-5))
    assert mean_sd([None]) == (None, None)
    assert mean_sd([0.4]) == (0.4, 0.0)
