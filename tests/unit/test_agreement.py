"""Agreement of the judge with people's labels and the corrected rate, against hand-computed oracles."""

from __future__ import annotations

import math

import pytest

from pipeline.metrics.agreement import (
    CorrectionStatus,
    LabeledCase,
    agreement,
    consensus,
    corrected_rate,
    reviewer_agreement,
    rogan_gladen,
)

# weighted confusion by hand: tp = 2, fn = 1, fp = 1, tn = 4 + 1 = 5 (N = 9)
CASES = [
    LabeledCase("c1", "g1", condition=True, flagged=True, weight=2.0),
    LabeledCase("c2", "g2", condition=True, flagged=False, weight=1.0),
    LabeledCase("c3", "g3", condition=False, flagged=True, weight=1.0),
    LabeledCase("c4", "g4", condition=False, flagged=False, weight=4.0),
    LabeledCase("c5", "g4", condition=False, flagged=False, weight=1.0),
]


def test_weighted_figures_match_the_hand_computed_oracle() -> None:
    a = agreement(CASES, resamples=0)
    c = a.confusion
    assert (c.true_positives, c.false_negatives, c.false_positives, c.true_negatives) == (2, 1, 1, 5)
    assert a.sensitivity.value == pytest.approx(2 / 3)
    assert a.specificity.value == pytest.approx(5 / 6)
    assert a.balanced_accuracy.value == pytest.approx(0.75)
    # po = 7/9, pe = (3*3 + 6*6) / 81 = 5/9, kappa = (2/9) / (4/9)
    assert a.kappa.value == pytest.approx(0.5)
    assert (a.cases, a.condition_cases, a.other_cases, a.groups) == (5, 2, 3, 4)
    # Kish: other class weights 1, 4, 1 -> 36 / 18
    assert a.effective_other == pytest.approx(2.0)
    assert a.sensitivity.low is None  # no resamples, no interval


def test_unweighted_labels_give_plain_counts_and_intervals_hold_the_point() -> None:
    cases = [LabeledCase(f"i{i}", i, condition=i % 3 == 0, flagged=i % 4 == 0) for i in range(120)]
    a = agreement(cases, resamples=400, seed=1)
    tp = sum(1 for i in range(120) if i % 3 == 0 and i % 4 == 0)
    pos = sum(1 for i in range(120) if i % 3 == 0)
    assert a.sensitivity.value == pytest.approx(tp / pos)
    for est in (a.sensitivity, a.specificity, a.balanced_accuracy, a.kappa):
        assert est.low is not None and est.high is not None and est.value is not None
        assert est.low <= est.value <= est.high
    assert agreement(cases, resamples=400, seed=1) == a  # a fixed seed gives the same intervals


def test_a_conversation_resampled_whole_widens_the_interval() -> None:
    # 20 conversations of 10 turns, every turn of a conversation agreeing or not together
    cases = [
        LabeledCase(f"{g}-{t}", g, condition=True, flagged=g % 4 != 0) for g in range(20) for t in range(10)
    ] + [
        LabeledCase(f"n{g}-{t}", f"n{g}", condition=False, flagged=False)
        for g in range(20)
        for t in range(10)
    ]
    grouped = agreement(cases, resamples=500)
    singles = [LabeledCase(c.interaction_id, c.interaction_id, c.condition, c.flagged) for c in cases]
    alone = agreement(singles, resamples=500)
    width = lambda a: a.sensitivity.high - a.sensitivity.low  # noqa: E731
    assert width(grouped) > 2 * width(alone)


def test_bad_weights_are_refused() -> None:
    with pytest.raises(ValueError, match="weight"):
        agreement([LabeledCase("x", "x", True, True, weight=0.0)])
    with pytest.raises(ValueError, match="weight"):
        agreement([LabeledCase("x", "x", True, True, weight=math.inf)])


def test_rogan_gladen() -> None:
    assert rogan_gladen(0.3, 0.8, 0.9) == pytest.approx(0.2 / 0.7)
    assert rogan_gladen(0.05, 0.8, 0.9) == 0.0  # fewer flags than false alarms alone: clipped
    assert rogan_gladen(0.99, 0.8, 0.9) == 1.0
    assert rogan_gladen(0.3, 0.5, 0.5) is None


def _quality(tp: int, fn: int, fp: int, tn: int):  # type: ignore[no-untyped-def]
    cases = (
        [LabeledCase(f"tp{i}", f"tp{i}", True, True) for i in range(tp)]
        + [LabeledCase(f"fn{i}", f"fn{i}", True, False) for i in range(fn)]
        + [LabeledCase(f"fp{i}", f"fp{i}", False, True) for i in range(fp)]
        + [LabeledCase(f"tn{i}", f"tn{i}", False, False) for i in range(tn)]
    )
    return agreement(cases, resamples=0)


def test_corrected_rate_with_enough_labels() -> None:
    quality = _quality(tp=40, fn=10, fp=5, tn=45)  # Se 0.8, Sp 0.9
    result = corrected_rate(300, 1000, quality, min_per_class=20, condition="hallucinated")
    assert result.status is CorrectionStatus.OK
    assert result.corrected == pytest.approx((0.3 + 0.9 - 1) / 0.7)
    assert result.low is not None and result.high is not None
    assert result.low < result.corrected < result.high
    # more labels, same rates: a narrower interval (the labels' uncertainty shrinks)
    more = corrected_rate(300, 1000, _quality(400, 100, 50, 450), min_per_class=20)
    assert more.high - more.low < result.high - result.low  # type: ignore[operator]


def test_too_few_labels_says_how_many_more() -> None:
    result = corrected_rate(
        30, 100, _quality(tp=5, fn=2, fp=3, tn=40), min_per_class=20, condition="hallucinated"
    )
    assert result.status is CorrectionStatus.TOO_FEW_LABELS
    assert result.corrected is None
    assert result.labels_needed == 13  # 20 - 7 of the condition, none of the other class
    assert "7 labeled 'hallucinated'" in result.note
    assert corrected_rate(3, 10, None, min_per_class=5).labels_needed == 10


def test_a_judge_no_better_than_chance_gets_a_note_not_a_figure() -> None:
    result = corrected_rate(30, 100, _quality(tp=10, fn=30, fp=30, tn=10), min_per_class=10)
    assert result.status is CorrectionStatus.NO_BETTER_THAN_CHANCE
    assert result.corrected is None and "no better than chance" in result.note


def test_corrected_rate_refuses_impossible_counts() -> None:
    with pytest.raises(ValueError):
        corrected_rate(11, 10, None, min_per_class=1)


def test_reviewer_agreement_and_consensus() -> None:
    labels = [("a", "ann", 1), ("a", "bob", 1), ("b", "ann", 0), ("b", "bob", 1), ("c", "ann", 1)]
    r = reviewer_agreement(labels)
    assert (r.interactions, r.pairs) == (2, 2)
    assert r.percent_agreement == 0.5
    # pooled marginal of ones: 3 of 4 -> pe = 0.625, kappa = (0.5 - 0.625) / 0.375
    assert r.kappa == pytest.approx(-1 / 3)
    assert reviewer_agreement([("a", "ann", 1)]).pairs == 0
    assert consensus([1, 1, 0]) == 1 and consensus([0]) == 0 and consensus([1, 0]) is None


def test_labels_too_weak_to_bound_the_rate_give_the_whole_interval() -> None:
    # Se + Sp just above 1 measured, but not once the few labels' doubt is added in
    result = corrected_rate(40, 100, _quality(tp=11, fn=9, fp=9, tn=11), min_per_class=20)
    assert result.status is CorrectionStatus.OK and result.corrected is not None
    assert (result.low, result.high) == (0.0, 1.0)


def test_labels_that_err_together_by_conversation_widen_the_corrected_interval() -> None:
    def cases(turns: int) -> list[LabeledCase]:
        # 40 condition cases (30 flagged), 60 others (6 flagged): a conversation of ``turns`` turns
        # shares its truth and the judge's verdict, so it is worth one case, not ``turns``
        out = []
        for i in range(100):
            condition = i < 40
            flagged = i < 30 if condition else i >= 94
            for t in range(turns):
                out.append(LabeledCase(f"{i}-{t}", i, condition, flagged))
        return out

    alone = corrected_rate(2000, 10_000, agreement(cases(1), resamples=2000), min_per_class=20)
    clumped = corrected_rate(2000, 10_000, agreement(cases(5), resamples=2000), min_per_class=20)
    assert alone.corrected == pytest.approx(clumped.corrected)  # the same rates
    width = lambda r: r.high - r.low  # noqa: E731
    # five turns a conversation: five times the label rows, but no more evidence than one turn each
    assert width(clumped) == pytest.approx(width(alone), rel=0.15)
    # counted as 500 independent labels (no resampling by conversation), it would be far narrower
    naive = corrected_rate(2000, 10_000, agreement(cases(5), resamples=0), min_per_class=20)
    assert width(naive) < 0.6 * width(clumped)
    # with independent labels the binomial variance holds: the resampling adds little
    binomial = corrected_rate(2000, 10_000, agreement(cases(1), resamples=0), min_per_class=20)
    assert width(alone) == pytest.approx(width(binomial), rel=0.15)
