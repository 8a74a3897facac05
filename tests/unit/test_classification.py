"""ROC AUC, balanced accuracy and the best threshold against hand-computed values."""

from __future__ import annotations

import pytest

from pipeline.metrics.classification import (
    balanced_accuracy,
    balanced_accuracy_of,
    best_threshold,
    rates,
    roc_auc,
)


def test_auc_perfect_inverse_and_random() -> None:
    assert roc_auc([0, 0, 1, 1], [0.1, 0.2, 0.8, 0.9]) == 1.0
    assert roc_auc([0, 0, 1, 1], [0.9, 0.8, 0.2, 0.1]) == 0.0
    assert roc_auc([0, 1, 0, 1], [0.5, 0.5, 0.5, 0.5]) == 0.5


def test_auc_hand_computed_with_ties() -> None:
    # positives 0.8, 0.4, 0.4 ; negatives 0.4, 0.2
    # pairs (pos > neg = 1, tie = 0.5): 0.8>0.4, 0.8>0.2, 0.4=0.4, 0.4>0.2, 0.4=0.4, 0.4>0.2 -> 5/6
    assert roc_auc([1, 1, 1, 0, 0], [0.8, 0.4, 0.4, 0.4, 0.2]) == pytest.approx(5 / 6)
    # 3 pos, 2 neg, one inversion: 5/6 as well
    assert roc_auc([1, 0, 1, 0, 1], [0.9, 0.7, 0.6, 0.3, 0.8]) == pytest.approx(5 / 6)


def test_auc_undefined_for_one_class() -> None:
    assert roc_auc([1, 1], [0.2, 0.3]) is None
    assert roc_auc([], []) is None


def test_input_errors() -> None:
    with pytest.raises(ValueError, match="labels"):
        roc_auc([1, 2], [0.1, 0.2])
    with pytest.raises(ValueError, match="2 labels but 1 scores"):
        roc_auc([1, 0], [0.1])


def test_balanced_accuracy_hand_computed() -> None:
    labels = [1, 1, 1, 1, 0, 0]
    scores = [0.9, 0.6, 0.4, 0.2, 0.7, 0.1]
    # at 0.5: TP 2/4 = 0.5, TN 1/2 = 0.5 -> 0.5 ; at 0.3: TP 3/4, TN 1/2 -> 0.625
    assert balanced_accuracy(labels, scores, 0.5) == pytest.approx(0.5)
    assert balanced_accuracy(labels, scores, 0.3) == pytest.approx(0.625)
    # a score equal to the threshold is positive
    assert balanced_accuracy([1, 0], [0.5, 0.49], 0.5) == 1.0
    assert rates([1, 1, 0], [1, 0, 0]) == (0.5, 1.0)
    assert balanced_accuracy_of([1, 1], [1, 0]) == 0.5  # one class: its recall
    assert balanced_accuracy_of([], []) is None


def test_best_threshold_by_youden() -> None:
    labels = [1, 1, 1, 1, 0, 0]
    scores = [0.9, 0.6, 0.4, 0.2, 0.7, 0.1]
    best = best_threshold(labels, scores)
    assert best is not None
    # candidates: 0.2 -> (1.0 + 0.5)/2 = 0.75 ; 0.4 -> 0.625 ; 0.1 -> 0.5 ; 0.9 -> (0.25+1)/2 = 0.625
    assert best.threshold == 0.2
    assert best.balanced_accuracy == pytest.approx(0.75)
    assert best.youden_j == pytest.approx(0.5)
    assert best_threshold([1, 1], [0.1, 0.2]) is None


def test_best_threshold_can_be_all_negative() -> None:
    # a score that runs against the label: the best is predicting every case one way (J = 0)
    best = best_threshold([0, 1], [0.9, 0.1])
    assert best is not None and best.youden_j == pytest.approx(0.0)
