"""How often the judge agrees with people, and the judge's flag rate corrected for its errors.

The cases are labeled interactions: for each, whether the *condition* holds as a person saw it (the
answer was hallucinated, incorrect, a refusal: ``schemas.label.LABEL_TARGETS``) and whether the judge
*flagged* it. Each case carries a weight, the inverse of its chance of having been put before a
reviewer (the review queue draws by a stable hash, more often near the decision threshold): weighted
this way (Horvitz-Thompson, as ratio estimates) the figures stand for the whole traffic, not for the
drawn sample.

- **Agreement**: the weighted confusion counts, sensitivity Se (flags among condition cases),
  specificity Sp (no flag among the others), balanced accuracy (Se + Sp) / 2 and Cohen's kappa, each
  with a 95 % percentile bootstrap interval that resamples whole *groups* (a conversation's turns are
  not independent evidence).
- **Reviewer agreement**: where two or more people labeled the same interaction, how often they agree
  and their kappa (pairwise).
- **The corrected rate** (Rogan-Gladen): a judge that flags a share p of the traffic, with sensitivity
  Se and specificity Sp, flags ``p = Se * pi + (1 - Sp) * (1 - pi)`` of it, where pi is the true rate,
  so ``pi = (p + Sp - 1) / (Se + Sp - 1)``, clipped to [0, 1]. Its interval carries the traffic's
  uncertainty (p from n interactions) and the labels' (Se and Sp from the labeled cases) by the delta
  method, on estimates adjusted as Agresti and Coull's (z^2 / 2 successes and failures added), which
  keeps it sensible when Se or Sp is measured as 1 (Lang and Reiczigel 2014 use the same construction).
  Each of Se's and Sp's variances is the binomial one on the labels' effective size or, when larger,
  its variance over the agreement's bootstrap resamples by conversation: turns of one conversation
  that err together count as the evidence of one, and a class with no errors among its labels keeps
  the binomial floor that a percentile bootstrap alone would lose (it collapses to a point).
  ``benchmarks/corrected_rate.py`` measures its coverage on simulated deployments (docs/accuracy.md).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, PrivateAttr

from pipeline.metrics.wilson import Z95

RESAMPLES = 1000
SEED = 0


@dataclass(frozen=True)
class LabeledCase:
    """One labeled interaction: the person's condition, the judge's flag, the label's weight."""

    interaction_id: str
    group: Hashable  # cases of one group (a conversation) are resampled together
    condition: bool  # the person says the event happened (hallucinated, incorrect, a refusal)
    flagged: bool  # the judge flagged it
    weight: float = 1.0  # 1 / inclusion probability


@dataclass(frozen=True, eq=False)
class Resamples:
    """The bootstrap's resampled confusion counts, (resamples, 4) rows of [tp, fn, fp, tn]."""

    counts: np.ndarray

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Resamples) and np.array_equal(self.counts, other.counts, equal_nan=True)

    def __hash__(self) -> int:
        return hash(self.counts.tobytes())


class Estimate(BaseModel):
    """A figure with its 95 % interval (None where undefined)."""

    value: float | None = None
    low: float | None = None
    high: float | None = None


class Confusion(BaseModel):
    """Weighted confusion counts (the condition is the positive class)."""

    true_positives: float = 0.0  # condition, flagged
    false_negatives: float = 0.0  # condition, not flagged
    false_positives: float = 0.0  # no condition, flagged
    true_negatives: float = 0.0  # no condition, not flagged


class Agreement(BaseModel):
    """The judge against people's labels (see the module docstring)."""

    cases: int = Field(description="labeled cases counted (unweighted)")
    condition_cases: int = Field(description="cases where people saw the condition")
    other_cases: int = Field(description="cases where they did not")
    effective_condition: float = Field(description="Kish's effective number of condition cases (weights)")
    effective_other: float = Field(description="Kish's effective number of the other cases")
    groups: int = Field(description="independent groups (conversations) among the cases")
    confusion: Confusion
    sensitivity: Estimate
    specificity: Estimate
    balanced_accuracy: Estimate
    kappa: Estimate
    labeled_condition_rate: Estimate = Field(
        description="the condition's weighted share among the labeled cases: with weights from the review "
        "queue, an estimate of its share in the traffic straight from the labels"
    )
    # the bootstrap's resampled confusion counts: the corrected rate's interval reads their spread
    _resampled: Resamples | None = PrivateAttr(default=None)


def _kish(weights: np.ndarray) -> float:
    total = float(weights.sum())
    squares = float((weights * weights).sum())
    return total * total / squares if squares > 0 else 0.0


def _stats(c: np.ndarray) -> np.ndarray:
    """Se, Sp, BA, kappa and labeled condition rate of confusion rows [tp, fn, fp, tn] (NaN where
    undefined); ``c`` is (k, 4)."""
    tp, fn, fp, tn = c[:, 0], c[:, 1], c[:, 2], c[:, 3]
    pos, neg = tp + fn, fp + tn
    total = pos + neg
    with np.errstate(invalid="ignore", divide="ignore"):
        se = np.where(pos > 0, tp / pos, np.nan)
        sp = np.where(neg > 0, tn / neg, np.nan)
        ba = (se + sp) / 2.0
        po = (tp + tn) / total
        pe = ((tp + fp) * pos + (fn + tn) * neg) / (total * total)
        kappa = np.where(np.abs(1.0 - pe) > 1e-12, (po - pe) / (1.0 - pe), np.nan)
        rate = np.where(total > 0, pos / total, np.nan)
    return np.stack([se, sp, ba, kappa, rate], axis=1)


def _confusion_rows(cases: Sequence[LabeledCase]) -> np.ndarray:
    """One row per case: its weight in its confusion cell (TP, FN, FP, TN)."""
    rows = np.zeros((len(cases), 4))
    for i, case in enumerate(cases):
        if not case.weight > 0 or not math.isfinite(case.weight):
            raise ValueError(f"{case.interaction_id}: a label's weight must be positive, not {case.weight}")
        col = (0 if case.flagged else 1) if case.condition else (2 if case.flagged else 3)
        rows[i, col] = case.weight
    return rows


def _cluster_bootstrap(
    per_group: np.ndarray, resamples: int, seed: int, level: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    """(lows, highs, the resampled confusion totals) of the five statistics, groups drawn with
    replacement; NaN bounds (and no resamples) with fewer than two groups, and for a statistic defined
    in fewer than half the resamples."""
    lows = np.full(5, np.nan)
    highs = np.full(5, np.nan)
    g = len(per_group)
    if g < 2 or resamples <= 0:
        return lows, highs, None
    rng = np.random.default_rng(seed)
    draws = rng.multinomial(g, np.full(g, 1.0 / g), size=resamples)  # how often each group is drawn
    resampled = draws.astype(float) @ per_group
    sampled = _stats(resampled)
    alpha = (1.0 - level) / 2.0
    for j in range(5):
        column = sampled[:, j]
        defined = column[~np.isnan(column)]
        if defined.size * 2 >= resamples:
            lows[j], highs[j] = np.quantile(defined, [alpha, 1.0 - alpha])
    return lows, highs, resampled


def agreement(
    cases: Sequence[LabeledCase], *, resamples: int = RESAMPLES, seed: int = SEED, level: float = 0.95
) -> Agreement:
    """Weighted agreement of the judge's flags with people's labels, with cluster bootstrap intervals."""
    rows = _confusion_rows(cases)
    index: dict[Hashable, list[int]] = defaultdict(list)
    for i, case in enumerate(cases):
        index[case.group].append(i)
    per_group = np.array([rows[idx].sum(axis=0) for idx in index.values()]) if index else np.zeros((0, 4))
    total = rows.sum(axis=0, keepdims=True)
    point = _stats(total)[0]
    g = len(index)
    lows, highs, resampled = _cluster_bootstrap(per_group, resamples, seed, level)

    def est(j: int) -> Estimate:
        value = None if np.isnan(point[j]) else float(point[j])
        low = None if value is None or np.isnan(lows[j]) else float(lows[j])
        high = None if value is None or np.isnan(highs[j]) else float(highs[j])
        return Estimate(value=value, low=low, high=high)

    condition = np.array([c.condition for c in cases], dtype=bool)
    weights = np.array([c.weight for c in cases], dtype=float)
    result = Agreement(
        cases=len(cases),
        condition_cases=int(condition.sum()),
        other_cases=int((~condition).sum()),
        effective_condition=_kish(weights[condition]),
        effective_other=_kish(weights[~condition]),
        groups=g,
        confusion=Confusion(
            true_positives=float(total[0, 0]),
            false_negatives=float(total[0, 1]),
            false_positives=float(total[0, 2]),
            true_negatives=float(total[0, 3]),
        ),
        sensitivity=est(0),
        specificity=est(1),
        balanced_accuracy=est(2),
        kappa=est(3),
        labeled_condition_rate=est(4),
    )
    result._resampled = Resamples(resampled) if resampled is not None else None
    return result


# ---- people against people -----------------------------------------------------------------------


class ReviewerAgreement(BaseModel):
    """How often two people labeling the same interaction agree (every pair of them counts once)."""

    interactions: int = Field(description="interactions labeled by two or more people")
    pairs: int = Field(description="pairs of labels compared")
    percent_agreement: float | None = None
    kappa: float | None = Field(None, description="Cohen's kappa over the pairs (pooled marginals)")


def reviewer_agreement(labels: Sequence[tuple[str, str, int]]) -> ReviewerAgreement:
    """``labels``: (interaction_id, reviewer, value); one label per interaction and reviewer."""
    by_case: dict[str, dict[str, int]] = defaultdict(dict)
    for interaction_id, reviewer, value in labels:
        by_case[interaction_id][reviewer] = value
    agree = pairs = ones = 0
    seen = 0
    for values in by_case.values():
        vs = list(values.values())
        if len(vs) < 2:
            continue
        seen += 1
        for i in range(len(vs)):
            for j in range(i + 1, len(vs)):
                pairs += 1
                agree += int(vs[i] == vs[j])
                ones += vs[i] + vs[j]
    if not pairs:
        return ReviewerAgreement(interactions=seen, pairs=0)
    po = agree / pairs
    p1 = ones / (2 * pairs)
    pe = p1 * p1 + (1 - p1) * (1 - p1)
    kappa = (po - pe) / (1 - pe) if abs(1 - pe) > 1e-12 else None
    return ReviewerAgreement(interactions=seen, pairs=pairs, percent_agreement=po, kappa=kappa)


def consensus(values: Sequence[int]) -> int | None:
    """The majority of several people's labels of one interaction; None on a tie (disputed)."""
    ones = sum(values)
    zeros = len(values) - ones
    if ones == zeros:
        return None
    return 1 if ones > zeros else 0


# ---- the corrected rate ---------------------------------------------------------------------------


class CorrectionStatus(StrEnum):
    OK = "ok"
    TOO_FEW_LABELS = "too_few_labels"  # fewer than min_per_class labels of a class
    NO_BETTER_THAN_CHANCE = "no_better_than_chance"  # Se + Sp <= 1: the flags say nothing about the truth


class CorrectedRate(BaseModel):
    """The judge's flag rate and the true rate it implies, given the judge's measured Se and Sp."""

    flagged: int = Field(description="interactions the judge flagged")
    total: int = Field(description="interactions the rate is over")
    flagged_rate: float | None = None
    status: CorrectionStatus
    corrected: float | None = Field(None, description="estimated true rate (Rogan-Gladen), clipped to [0, 1]")
    low: float | None = Field(
        None, description="95 % interval, traffic's and labels' uncertainty together ([0, 1] when too few)"
    )
    high: float | None = None
    labels_needed: int = Field(0, description="more labels needed in the scarcer class before a correction")
    note: str = Field("", description="what a reader should know, in one sentence")


def _adjusted(successes: float, n: float, z2: float) -> tuple[float, float]:
    """Agresti-Coull: (estimate, effective n) with z^2 / 2 successes and failures added."""
    n_adj = n + z2
    return (successes + z2 / 2.0) / n_adj, n_adj


def _resampled_variances(quality: Agreement) -> tuple[float, float]:
    """The variances of sensitivity and specificity over the agreement's bootstrap resamples (by
    conversation); 0 without resamples."""
    if quality._resampled is None:
        return 0.0, 0.0
    r = quality._resampled.counts
    with np.errstate(invalid="ignore", divide="ignore"):
        se = r[:, 0] / (r[:, 0] + r[:, 1])
        sp = r[:, 3] / (r[:, 2] + r[:, 3])
    values = []
    for column in (se, sp):
        defined = column[~np.isnan(column)]
        values.append(float(defined.var()) if defined.size >= 2 else 0.0)
    return values[0], values[1]


def rogan_gladen(flag_rate: float, sensitivity: float, specificity: float) -> float | None:
    """The true rate implied by a flag rate; None when Se + Sp <= 1."""
    j = sensitivity + specificity - 1.0
    if j <= 0:
        return None
    return min(1.0, max(0.0, (flag_rate + specificity - 1.0) / j))


def corrected_rate(
    flagged: int,
    total: int,
    quality: Agreement | None,
    *,
    min_per_class: int,
    condition: str = "flagged",
    z: float = Z95,
) -> CorrectedRate:
    """The corrected rate of ``flagged`` of ``total`` interactions, given the judge's ``quality`` on
    labeled cases (see the module docstring); a note instead of a figure with too few labels of a class
    (``min_per_class``) or a judge no better than chance."""
    if not 0 <= flagged <= total:
        raise ValueError(f"flagged must be within [0, total]: {flagged} of {total}")
    rate = flagged / total if total else None
    base = {"flagged": flagged, "total": total, "flagged_rate": rate}
    too_few = _too_few_labels(base, quality, min_per_class, condition)
    if too_few is not None:
        return too_few
    assert quality is not None  # without labels there are too few
    se, sp = quality.sensitivity.value, quality.specificity.value
    assert se is not None and sp is not None  # both classes are present
    if se + sp <= 1.0:
        return CorrectedRate(
            **base,
            status=CorrectionStatus.NO_BETTER_THAN_CHANCE,
            note=(
                f"the judge is no better than chance on this traffic (sensitivity {se:.2f} + specificity "
                f"{sp:.2f} <= 1): its flags say nothing about the true rate"
            ),
        )
    if rate is None:
        return CorrectedRate(**base, status=CorrectionStatus.OK, note="no interactions in the period")
    corrected = rogan_gladen(rate, se, sp)
    low, high = _corrected_interval(flagged, total, quality, corrected, z)
    return CorrectedRate(**base, status=CorrectionStatus.OK, corrected=corrected, low=low, high=high)


def _corrected_interval(
    flagged: int, total: int, quality: Agreement, corrected: float | None, z: float
) -> tuple[float, float]:
    """The corrected rate's interval: the adjusted Rogan-Gladen one (see the module docstring), holding
    ``corrected``; (0, 1) when the adjusted Se + Sp is not above 1."""
    z2 = z * z
    conf = quality.confusion
    pos_w = conf.true_positives + conf.false_negatives
    neg_w = conf.false_positives + conf.true_negatives
    # the labels' effective sizes (weights shrink them), their shares kept
    m1 = quality.effective_condition
    m0 = quality.effective_other
    se_a, m1_a = _adjusted(conf.true_positives / pos_w * m1, m1, z2)
    sp_a, m0_a = _adjusted(conf.true_negatives / neg_w * m0, m0, z2)
    p_a, n_a = _adjusted(float(flagged), float(total), z2)
    j = se_a + sp_a - 1.0
    low, high = 0.0, 1.0  # the adjusted Se + Sp is not above 1: the labels cannot bound the rate
    if j > 0:
        pi = min(1.0, max(0.0, (p_a + sp_a - 1.0) / j))
        # each of Se's and Sp's variances: the binomial one or, when larger, the one the labels show
        # resampled by conversation (turns of one conversation err together)
        boot_se, boot_sp = _resampled_variances(quality)
        var_se = max(se_a * (1 - se_a) / m1_a, boot_se)
        var_sp = max(sp_a * (1 - sp_a) / m0_a, boot_sp)
        var = (p_a * (1 - p_a) / n_a + pi * pi * var_se + (1 - pi) ** 2 * var_sp) / (j * j)
        half = z * math.sqrt(var)
        low, high = max(0.0, pi - half), min(1.0, pi + half)
        if corrected is not None:  # the interval always holds its point
            low, high = min(low, corrected), max(high, corrected)
    return low, high


def _too_few_labels(
    base: dict[str, Any], quality: Agreement | None, min_per_class: int, condition: str
) -> CorrectedRate | None:
    """The corrected rate's answer with fewer than ``min_per_class`` labels of a class; None: enough."""
    have_pos = quality.condition_cases if quality else 0
    have_neg = quality.other_cases if quality else 0
    needed = max(0, min_per_class - have_pos) + max(0, min_per_class - have_neg)
    if quality is not None and needed == 0:
        return None
    return CorrectedRate(
        **base,
        status=CorrectionStatus.TOO_FEW_LABELS,
        labels_needed=needed,
        note=(
            f"{have_pos} labeled '{condition}' and {have_neg} labeled otherwise; {min_per_class} of each "
            f"are needed before the rate can be corrected"
        ),
    )
