"""Binary classification metrics for accuracy reports: ROC AUC, balanced accuracy, best threshold.

Conventions: ``labels`` are 1 (positive class) / 0; ``scores`` are higher for the positive class.
A case is predicted positive when ``score >= threshold``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import BaseModel


class ThresholdChoice(BaseModel):
    threshold: float
    balanced_accuracy: float
    youden_j: float


def _arrays(labels: Sequence[int], scores: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    if len(labels) != len(scores):
        raise ValueError(f"{len(labels)} labels but {len(scores)} scores")
    y = np.asarray(labels, dtype=int)
    s = np.asarray(scores, dtype=float)
    if y.size and not np.isin(y, (0, 1)).all():
        raise ValueError("labels must be 0 or 1")
    if np.isnan(s).any():
        raise ValueError("scores must not be NaN")
    return y, s


def average_ranks(scores: np.ndarray) -> np.ndarray:
    """1-based ranks of ``scores``, tied values sharing their mean rank (vectorised)."""
    _, inverse, counts = np.unique(scores, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)  # rank of the last member of each distinct value
    return (ends - (counts - 1) / 2.0)[inverse.reshape(-1)]


def roc_auc(labels: Sequence[int], scores: Sequence[float]) -> float | None:
    """Area under the ROC curve (Mann-Whitney U / (n_pos * n_neg)); ties count one half.

    None when one class is absent (AUC is undefined).
    """
    y, s = _arrays(labels, scores)
    n_pos = int(y.sum())
    n_neg = int(y.size - n_pos)
    if n_pos == 0 or n_neg == 0:
        return None
    ranks = average_ranks(s)
    rank_sum_pos = float(ranks[y == 1].sum())
    u = rank_sum_pos - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def rates(labels: Sequence[int], predictions: Sequence[int]) -> tuple[float | None, float | None]:
    """(true positive rate, true negative rate); None where the class is absent."""
    y, p = _arrays(labels, [float(v) for v in predictions])
    pos = y == 1
    neg = ~pos
    tpr = float((p[pos] == 1).mean()) if pos.any() else None
    tnr = float((p[neg] == 0).mean()) if neg.any() else None
    return tpr, tnr


def balanced_accuracy_of(labels: Sequence[int], predictions: Sequence[int]) -> float | None:
    """Mean of the recall of each class present (None when there are no cases)."""
    tpr, tnr = rates(labels, predictions)
    present = [r for r in (tpr, tnr) if r is not None]
    return sum(present) / len(present) if present else None


def balanced_accuracy(labels: Sequence[int], scores: Sequence[float], threshold: float) -> float | None:
    """Balanced accuracy of predicting positive when ``score >= threshold``."""
    predictions = [1 if s >= threshold else 0 for s in scores]
    return balanced_accuracy_of(labels, predictions)


def best_threshold(labels: Sequence[int], scores: Sequence[float]) -> ThresholdChoice | None:
    """The threshold with the largest Youden J (= TPR + TNR - 1 = 2 * balanced accuracy - 1).

    Candidates are the distinct scores (predict positive at ``score >= t``) and the maximum + 1
    (all negative); ties in J go to the lowest threshold. None when one class is absent.
    """
    y, s = _arrays(labels, scores)
    if y.sum() == 0 or y.sum() == y.size:
        return None
    candidates = np.unique(s)
    candidates = np.append(candidates, candidates[-1] + 1.0)  # predicts every case negative
    n_pos = y.sum()
    n_neg = y.size - n_pos
    best: ThresholdChoice | None = None
    for t in candidates:
        pred = s >= t
        tpr = float((pred & (y == 1)).sum() / n_pos)
        tnr = float((~pred & (y == 0)).sum() / n_neg)
        j = tpr + tnr - 1.0
        if best is None or j > best.youden_j + 1e-12:
            best = ThresholdChoice(threshold=float(t), balanced_accuracy=(tpr + tnr) / 2.0, youden_j=j)
    return best
