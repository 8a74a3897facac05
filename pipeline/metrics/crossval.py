"""Grouped k-fold cross-validation of a score's operating threshold: out-of-fold figures, nothing seen twice.

- ``grouped_folds``: one fold per case such that every case of a group (a question, a source passage)
  is in the same fold; deterministic for a given seed, folds of near-equal size.
- ``choose_threshold`` / ``choose_shared_threshold``: the threshold with the highest balanced accuracy
  (the mean over several sets for a shared one) on the cases given; candidates are the midpoints
  between consecutive distinct scores and one below / above all of them, so a chosen threshold never
  sits on a case's score; among tied candidates the middle one.
- ``cross_validate``: for each fold, the threshold is chosen on the other folds (of every set passed
  together) and the fold is scored with it: balanced accuracy at that threshold and ROC AUC.
- ``mean_sd``: mean and sample standard deviation over folds.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from pipeline.metrics.classification import balanced_accuracy, roc_auc

K = 5
SEED = 0


@dataclass(frozen=True)
class Scored:
    """One set's cases: labels (1/0), scores (higher = positive) and a fold per case."""

    labels: Sequence[int]
    scores: Sequence[float]
    folds: Sequence[int]

    def part(self, fold: int, *, inside: bool) -> tuple[list[int], list[float]]:
        """The cases in fold ``fold`` (``inside``) or in every other fold."""
        idx = [i for i, f in enumerate(self.folds) if (f == fold) == inside]
        return [int(self.labels[i]) for i in idx], [float(self.scores[i]) for i in idx]


@dataclass(frozen=True)
class FoldResult:
    fold: int
    n: int
    threshold: float
    balanced_accuracy: float | None
    roc_auc: float | None


#: chooses one threshold from the training parts (labels, scores) of the sets cross-validated together
Chooser = Callable[[Sequence[tuple[Sequence[int], Sequence[float]]]], float]


def grouped_folds(groups: Sequence[Hashable], k: int = K, seed: int = SEED) -> list[int]:
    """A fold (0..k-1) for every case; the cases of one group share a fold.

    Groups are shuffled with ``seed``, then taken largest first (stable, so shuffled order breaks ties)
    and each is put in the fold that has the fewest cases so far (lowest fold number on ties).
    """
    if k < 2:
        raise ValueError(f"k must be at least 2, not {k}")
    sizes = Counter(groups)
    keys = sorted(sizes, key=repr)
    order = np.random.default_rng(seed).permutation(len(keys))
    shuffled = [keys[i] for i in order]
    shuffled.sort(key=lambda g: -sizes[g])
    filled = [0] * k
    fold_of: dict[Hashable, int] = {}
    for group in shuffled:
        fold = min(range(k), key=lambda f: (filled[f], f))
        fold_of[group] = fold
        filled[fold] += sizes[group]
    return [fold_of[g] for g in groups]


def threshold_candidates(scores: Sequence[float]) -> np.ndarray:
    """Midpoints between consecutive distinct scores, and one below and one above them all."""
    distinct = np.unique(np.asarray(scores, dtype=float))
    if distinct.size == 0:
        return np.asarray([0.5])
    mids = (distinct[1:] + distinct[:-1]) / 2.0
    return np.concatenate([[distinct[0] - 1.0], mids, [distinct[-1] + 1.0]])


def _balanced_accuracies(
    labels: Sequence[int], scores: Sequence[float], candidates: np.ndarray
) -> np.ndarray:
    """Balanced accuracy of ``score >= t`` for every candidate t (mean of the recalls present)."""
    y = np.asarray(labels, dtype=int)
    s = np.asarray(scores, dtype=float)
    predicted = s[None, :] >= candidates[:, None]
    recalls = []
    if (y == 1).any():
        recalls.append(predicted[:, y == 1].mean(axis=1))
    if (y == 0).any():
        recalls.append((~predicted[:, y == 0]).mean(axis=1))
    if not recalls:
        return np.zeros(candidates.size)
    return np.mean(recalls, axis=0)


def choose_shared_threshold(parts: Sequence[tuple[Sequence[int], Sequence[float]]]) -> float:
    """The threshold with the highest mean balanced accuracy over the given sets (middle of ties)."""
    pooled = [float(v) for _, scores in parts for v in scores]
    candidates = threshold_candidates(pooled)
    per_set = [_balanced_accuracies(y, s, candidates) for y, s in parts if len(y)]
    if not per_set:
        return 0.5
    mean = np.mean(per_set, axis=0)
    best = np.flatnonzero(mean >= mean.max() - 1e-12)
    return float(candidates[best[len(best) // 2]])


def choose_threshold(labels: Sequence[int], scores: Sequence[float]) -> float:
    """The threshold with the highest balanced accuracy on these cases (middle of ties)."""
    return choose_shared_threshold([(labels, scores)])


def fixed_threshold(value: float) -> Chooser:
    """A chooser that always answers ``value`` (flags: 0.5)."""

    def choose(parts: Sequence[tuple[Sequence[int], Sequence[float]]]) -> float:
        return value

    return choose


def cross_validate(
    sets: Mapping[str, Scored], chooser: Chooser = choose_shared_threshold, k: int = K
) -> dict[str, list[FoldResult]]:
    """Out-of-fold results per set: for fold f, one threshold is chosen by ``chooser`` on the cases of
    every set outside fold f, and each set's fold f is scored with it. Pass one set for a per-set
    threshold, several for a shared one."""
    out: dict[str, list[FoldResult]] = {name: [] for name in sets}
    for fold in range(k):
        training = [scored.part(fold, inside=False) for scored in sets.values()]
        threshold = chooser(training)
        for name, scored in sets.items():
            y, s = scored.part(fold, inside=True)
            out[name].append(
                FoldResult(
                    fold=fold,
                    n=len(y),
                    threshold=threshold,
                    balanced_accuracy=balanced_accuracy(y, s, threshold) if y else None,
                    roc_auc=roc_auc(y, s) if y else None,
                )
            )
    return out


def mean_sd(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample standard deviation (ddof 1) of the values that are not None."""
    present = [v for v in values if v is not None]
    if not present:
        return None, None
    arr = np.asarray(present, dtype=float)
    sd = float(arr.std(ddof=1)) if arr.size > 1 else 0.0
    return float(arr.mean()), sd
