"""Eval report: distributions, per-label accuracy, peers, Trust-Eval inputs, call sums (hand-computed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from pipeline.dataset import DatasetLine, LineError, parse_line
from pipeline.report import (
    FLAG_SCORES,
    LABEL_SCORES,
    SCORES,
    build_report,
    distribution,
    gold_answers,
    label_reports,
    trust_eval_case,
)  # fmt: skip
from schemas.evaluation import Evaluation
from schemas.results import JudgeCall
from schemas.settings import Limits
from tests.settings_factory import make_settings


def _line(n: int, **fields: object) -> DatasetLine:
    data = {"id": f"i{n}", "question": "q?", "answer": "a", **fields}
    parsed = parse_line(json.dumps(data), n, Limits())
    assert isinstance(parsed, DatasetLine), parsed
    return parsed


def _evaluation(n: int, **fields: object) -> Evaluation:
    base: dict[str, object] = {
        "interaction_id": f"i{n}",
        "timestamp": datetime(2026, 1, 1, tzinfo=UTC),
        "evaluated_at": datetime(2026, 1, 1, tzinfo=UTC),
        "app": "a",
        "model": "m",
        "judge": "lexical",
    }
    return Evaluation.model_validate({**base, **fields})


def test_distribution() -> None:
    d = distribution([0.0, 0.25, 0.5, 1.0])
    assert d.n == 4 and d.mean == pytest.approx(0.4375) and d.min == 0.0 and d.max == 1.0
    assert d.quantiles["p50"] == pytest.approx(0.375)
    assert d.histogram is not None and sum(d.histogram.counts) == 4 and len(d.histogram.edges) == 11
    assert d.histogram.counts[0] == 1 and d.histogram.counts[-1] == 1
    assert distribution([]).n == 0 and distribution([]).mean is None


def test_grounded_label_auc_balanced_accuracy_and_peers() -> None:
    labels = [1, 1, 0, 0, 1]
    scores = [0.9, 0.4, 0.6, 0.1, None]  # the last has no context: unscored
    peers = [{"p": 1}, {"p": 1}, {"p": 1}, {"p": 0}, {"p": 1}]
    rows = [
        (
            _line(i, contexts=[f"passage {i}"], labels={"grounded": y}, peers=peer),
            _evaluation(i, context_entailment=s, grounded_precision=s),
        )
        for i, (y, s, peer) in enumerate(zip(labels, scores, peers, strict=True))
    ]
    settings = make_settings()
    settings = settings.with_changes(judge={"kind": "openai"})  # no calibrated default: the 0.5 threshold
    report = label_reports(rows, settings)["grounded"]
    assert report.cases == 5
    p = report.primary
    assert (p.score, p.n, p.positives, p.unscored) == ("context_entailment", 4, 2, 1)
    assert p.roc_auc == pytest.approx(3 / 4)  # 0.9>0.6, 0.9>0.1, 0.4<0.6, 0.4>0.1
    assert p.threshold == 0.5 and p.balanced_accuracy == pytest.approx(0.5)
    assert p.best is not None and p.best.balanced_accuracy == pytest.approx(0.75)
    assert [o.score for o in report.others] == ["grounded_precision"]
    assert report.peers is not None and report.peers.n == 4
    # peer on the same 4 scored cases: TPR 2/2, TNR 1/2 -> 0.75
    assert report.peers.peers == {"p": pytest.approx(0.75)} and report.peers.peer_cases == {"p": 4}
    assert report.peers.ours_balanced_accuracy == pytest.approx(0.5)
    # the lexical judge's cross-validated threshold (0.81): only 0.9 is grounded -> TPR 1/2, TNR 2/2
    lexical = label_reports(rows, make_settings())["grounded"].primary
    assert lexical.threshold == 0.81 and lexical.balanced_accuracy == pytest.approx(0.75)
    # an explicit hallucination_threshold wins over the calibrated default
    explicit = make_settings()
    explicit = explicit.with_changes(pipeline={"hallucination_threshold": 0.5})
    assert label_reports(rows, explicit)["grounded"].primary.threshold == 0.5


def test_correct_and_refusal_labels() -> None:
    rows = [
        (
            _line(1, ground_truth="x", labels={"correct": 1, "answer_refusal": 0}),
            _evaluation(
                1, ground_truth_entails_answer=0.2, answer_entails_ground_truth=0.5, answer_refusal=False
            ),
        ),
        (
            _line(2, ground_truth="x", labels={"correct": 0, "answer_refusal": 1}),
            _evaluation(
                2, ground_truth_entails_answer=0.4, answer_entails_ground_truth=0.0, answer_refusal=True
            ),
        ),
    ]
    reports = label_reports(rows, make_settings())
    assert reports["correct"].primary.score == "answer_entails_ground_truth"
    assert reports["correct"].primary.roc_auc == 1.0
    assert [o.score for o in reports["correct"].others] == ["ground_truth_entails_answer", "agreement"]
    assert reports["correct"].others[0].roc_auc == 0.0  # the other direction ranks these two the wrong way
    agreement = next(o for o in reports["correct"].others if o.score == "agreement")
    assert agreement.n == 2 and agreement.roc_auc == 1.0
    refusal = reports["answer_refusal"].primary
    assert refusal.roc_auc == 1.0 and refusal.balanced_accuracy == 1.0
    assert "grounded" not in reports


def test_gold_answers_and_trust_eval_case() -> None:
    nq = _line(1, ground_truth="savior | save", gold_answers=["savior", "save"])
    assert gold_answers(nq) == ["savior", "save"]
    assert gold_answers(_line(2, ground_truth="a | b")) == ["a", "b"]
    assert gold_answers(_line(3, ground_truth="A long sentence.")) == []
    case = trust_eval_case(nq, _evaluation(1, answer_refusal=False, ground_truth_refusal=False), False)
    assert case is not None and case.answerable is True and case.refused is False
    assert trust_eval_case(nq, _evaluation(1), False) is None  # no refusal decision: not a Trust-Eval case
    labeled = _line(4, labels={"answerable": 0})
    case = trust_eval_case(labeled, _evaluation(4, answer_refusal=True), False)
    assert case is not None and case.answerable is False


async def test_build_report_sums_and_errors() -> None:
    call = JudgeCall(stage="nli", judge="j", model="m", input_tokens=100, output_tokens=10, cost_usd=0.01)
    rows = [
        (
            _line(1, ground_truth="Paris | City of Light", labels={"correct": 1}),
            _evaluation(
                1,
                ground_truth_entails_answer=1.0,
                answer_refusal=False,
                ground_truth_refusal=False,
                calls=[call, call.model_copy(update={"stage": "refusal", "cached": True})],
                judge_calls=1,
                input_tokens=100,
                output_tokens=10,
                cost_usd=0.01,
                stage_seconds={"nli": 0.5, "convert": 0.1},
                hallucination=True,
            ),
        ),
        (
            _line(2, answer="I don't know", ground_truth="Rome | Roma", labels={"correct": 0}),
            _evaluation(2, ground_truth_entails_answer=0.0, answer_refusal=True, ground_truth_refusal=False),
        ),
    ]
    errors = [LineError(line=7, reason="not valid JSON"), LineError(line=3, stage="nli", reason="boom")]
    report = await build_report(
        input_path="x.jsonl",
        rows=rows,
        errors=errors,
        lines_read=4,
        blank_lines=1,
        judge_name="lexical",
        judge_model="lexical-v1",
        settings=make_settings(),
        wall_seconds=2.0,
        generated_at=datetime(2026, 11, 23, 12, tzinfo=UTC),
    )
    assert report.evaluated == 2 and report.failed == 2 and [e.line for e in report.errors] == [3, 7]
    assert report.interactions_per_second == pytest.approx(1.0)
    assert report.counts["answer_refusals"] == 1 and report.counts["hallucinations"] == 1
    assert (
        report.calls.calls == 2
        and report.calls.cached == 1
        and report.calls.by_stage == {"nli": 1, "refusal": 1}
    )
    assert report.calls.input_tokens == 100 and report.calls.per_interaction["input_tokens"] == 50
    assert report.stage_seconds["nli"].total_seconds == 0.5 and report.stage_seconds["nli"].n == 1
    assert report.scores["ground_truth_entails_answer"].n == 2
    assert report.trust_eval is not None
    # case 1 answered, answerable, "a" does not contain Paris -> EM 0; case 2 refused but answerable
    assert report.trust_eval.answerable_rec == pytest.approx(1 / 2)
    assert report.trust_eval.regular_em == 0.0
    json.loads(report.model_dump_json())  # serialisable (no NaN/inf)


def test_bootstrap_intervals_with_every_auc_and_balanced_accuracy() -> None:
    # 40 cases: score = label with 8 of them flipped -> AUC 0.8, balanced accuracy 0.8 at 0.5
    labels = [i % 2 for i in range(40)]
    scores = [float(y if i >= 8 else 1 - y) for i, y in enumerate(labels)]
    peers = [{"p": y} for y in labels]
    rows = [
        (
            _line(i, contexts=[f"passage {i}"], labels={"grounded": y}, peers=peer),
            _evaluation(i, context_entailment=s, grounded_precision=s),
        )
        for i, (y, s, peer) in enumerate(zip(labels, scores, peers, strict=True))
    ]
    settings = make_settings()
    settings = settings.with_changes(judge={"kind": "openai"})
    block = label_reports(rows, settings, bootstrap=300)["grounded"]
    p = block.primary
    assert p.roc_auc == pytest.approx(0.8) and p.balanced_accuracy == pytest.approx(0.8)
    for value, ci in ((p.roc_auc, p.roc_auc_ci), (p.balanced_accuracy, p.balanced_accuracy_ci)):
        assert ci is not None and ci.resamples == 300 and ci.level == 0.95
        assert ci.low < value < ci.high and ci.high - ci.low > 0.1  # 40 cases: a wide interval
    assert p.best_balanced_accuracy_ci is not None
    assert block.others[0].roc_auc_ci == p.roc_auc_ci  # same scores, same seed: same interval
    assert block.peers is not None
    perfect = block.peers.peers_ci["p"]
    assert perfect is not None and perfect.low == perfect.high == 1.0  # a perfect peer stays perfect
    assert block.peers.ours_balanced_accuracy_ci == p.balanced_accuracy_ci
    # one shared passage: one group, one piece of evidence, so every resample is the whole set
    shared = [(_line(i, contexts=["c"], labels={"grounded": y}), e) for i, ((_, e), y) in
              enumerate(zip(rows, labels, strict=True))]  # fmt: skip
    one = label_reports(shared, settings, bootstrap=50)["grounded"].primary.roc_auc_ci
    assert one is not None and one.low == one.high == pytest.approx(0.8)
    # no resamples: no intervals
    none = label_reports(rows, settings, bootstrap=0)["grounded"].primary
    assert none.roc_auc_ci is None and none.balanced_accuracy_ci is None


def test_each_label_kinds_report_scores_come_from_the_label_registry() -> None:
    from schemas.label import LABEL_TARGETS

    assert LABEL_SCORES == {
        "grounded": ["context_entailment", "grounded_precision"],
        "correct": ["answer_entails_ground_truth", "ground_truth_entails_answer", "agreement"],
        "answer_refusal": ["answer_refusal"],
    }
    for target in LABEL_TARGETS.values():
        assert set(target.scores) <= set(SCORES) | FLAG_SCORES
        if target.threshold is not None:  # the score its flag thresholds is the one reported first
            assert target.scores[0] == target.threshold[0]
