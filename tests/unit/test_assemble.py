"""Assembling an Evaluation from the stage results."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from pipeline.assemble import assemble, count_judge_calls
from schemas.interaction import Interaction
from schemas.results import (
    Converted,
    HypothesisResult,
    JudgeCall,
    NliResult,
    PairResult,
    RefusalResult,
    StatementVerdict,
)
from tests.fixtures.messages import EVALUATED_AT
from tests.settings_factory import make_settings

WHEN = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def call(stage: str, tokens: int, *, cached: bool = False, attempts: int = 1) -> JudgeCall:
    return JudgeCall(
        stage=stage,
        judge="j",
        model="m",
        input_tokens=tokens,
        output_tokens=tokens // 10,
        latency_ms=tokens / 10,
        cost_usd=tokens / 1000,
        cached=cached,
        attempts=attempts,
    )


def converted(answer: str = "The button resets the router.", contexts: bool = True) -> Converted:
    item = Interaction(
        interaction_id="a1",
        timestamp=WHEN,
        app="shop",
        model="bot-7",
        conversation_id="c9",
        question="What does the button do?",
        contexts=[{"text": "The button resets the router."}] if contexts else [],
        answer=answer,
        ground_truth="It resets the router.",
        labels={"grounded": 1},
    )
    return Converted(
        interaction=item,
        question_sentences=["What does the button do?"],
        answer_sentences=[answer] if answer else [],
        ground_truth_sentences=["The button resets the router."],
        calls=[call("pronouns", 100)],
        seconds=0.25,
    )


def pair(name: str, scores: list[float] | None) -> PairResult:
    if scores is None:
        return PairResult(pair=name)
    hyps = [
        HypothesisResult(
            hypothesis=f"h{i}",
            statements=[
                StatementVerdict(
                    statement=f"s{i}", verdict="entailed" if s == 1 else "not_stated", score=s, tag="claim"
                )
            ],
            score=s,
        )
        for i, s in enumerate(scores)
    ]
    return PairResult(pair=name, hypotheses=hyps, score=sum(scores) / len(scores))


def nli(context: list[float] | None = (1.0, 0.0), **refusal: bool | None) -> NliResult:  # type: ignore[assignment]
    return NliResult(
        interaction_id="a1",
        pairs=[
            pair("context_answer", list(context) if context is not None else None),
            pair("ground_truth_answer", [1.0]),
            pair("answer_ground_truth", [0.5, 1.0]),
        ],
        calls=[call("nli", 1000), call("nli", 500, cached=True)],
        seconds=1.5,
        **refusal,
    )


def refusal(answer: bool | None = False) -> RefusalResult:
    return RefusalResult(
        interaction_id="a1",
        answer_refusal=answer,
        ground_truth_refusal=False,
        calls=[call("refusal", 50), call("refusal", 30, attempts=0)],
        seconds=0.5,
    )


def test_all_fields() -> None:
    settings = make_settings()
    settings = settings.with_changes(judge={"kind": "cascade"})
    ev = assemble(converted(), nli(), refusal(), settings, relevance=0.8, evaluated_at=EVALUATED_AT)
    assert (ev.interaction_id, ev.timestamp, ev.app, ev.model, ev.conversation_id) == (
        "a1",
        WHEN,
        "shop",
        "bot-7",
        "c9",
    )
    assert ev.judge == "cascade"
    assert ev.context_entailment == 0.5
    assert ev.ground_truth_entails_answer == 1.0
    assert ev.answer_entails_ground_truth == 0.75
    assert ev.answer_refusal is False and ev.ground_truth_refusal is False
    assert ev.grounded_precision == 0.5
    assert ev.unsupported_claims == ["s1"]
    assert ev.hallucination is True  # 0.5 is under the cascade judge's calibrated 0.85
    assert ev.relevance == 0.8
    assert [p.pair for p in ev.pairs] == ["context_answer", "ground_truth_answer", "answer_ground_truth"]
    assert len(ev.calls) == 5
    assert ev.judge_calls == 3  # the cache hit and the refusal share without attempts are not counted
    assert ev.input_tokens == 100 + 1000 + 500 + 50 + 30
    assert ev.output_tokens == 10 + 100 + 50 + 5 + 3
    assert ev.cost_usd == pytest.approx(1.68)
    assert ev.judge_latency_ms == pytest.approx(168.0)
    assert ev.stage_seconds == {"convert": 0.25, "nli": 1.5, "refusal": 0.5}
    assert ev.complete is True and ev.missing == []
    assert ev.labels == {"grounded": 1}


@pytest.mark.parametrize(
    ("scores", "threshold", "expected"),
    [([0.0, 0.0], 0.5, True), ([1.0, 0.0], 0.5, False), ([1.0, 0.0], 0.6, True), ([1.0, 1.0], 0.5, False)],
)
def test_hallucination_threshold(scores: list[float], threshold: float, expected: bool) -> None:
    settings = make_settings()
    settings = settings.with_changes(pipeline={"hallucination_threshold": threshold})
    assert (
        assemble(converted(), nli(scores), refusal(), settings, evaluated_at=EVALUATED_AT).hallucination
        is expected
    )


def test_hallucination_none_for_refusal_no_context_unknown_refusal_or_no_answer() -> None:
    s = make_settings()
    assert (
        assemble(converted(), nli([0.0]), refusal(True), s, evaluated_at=EVALUATED_AT).hallucination is None
    )
    assert (
        assemble(converted(contexts=False), nli(None), refusal(), s, evaluated_at=EVALUATED_AT).hallucination
        is None
    )
    assert (
        assemble(converted(), nli([0.0]), refusal(None), s, evaluated_at=EVALUATED_AT).hallucination is None
    )
    assert (
        assemble(converted(answer=""), nli([0.0]), refusal(), s, evaluated_at=EVALUATED_AT).hallucination
        is None
    )


def test_missing_parts() -> None:
    s = make_settings()
    ev = assemble(converted(), None, refusal(), s, missing=["relevance"], evaluated_at=EVALUATED_AT)
    assert ev.complete is False
    assert ev.missing == ["relevance", "nli"]
    assert ev.context_entailment is None and ev.pairs == [] and ev.grounded_precision is None
    ev = assemble(converted(), nli(), None, s, evaluated_at=EVALUATED_AT)
    assert ev.missing == ["refusal"] and ev.answer_refusal is None and ev.hallucination is None
    assert ev.stage_seconds == {"convert": 0.25, "nli": 1.5}


def test_same_mode_takes_refusal_from_nli() -> None:
    s = make_settings()
    s = s.with_changes(pipeline={"refusal_mode": "same"})
    ev = assemble(
        converted(),
        nli([0.0], answer_refusal=False, ground_truth_refusal=True),
        None,
        s,
        evaluated_at=EVALUATED_AT,
    )
    assert ev.complete is True
    assert (ev.answer_refusal, ev.ground_truth_refusal) == (False, True)
    assert ev.hallucination is True


def test_weights_and_unsupported_threshold_come_from_settings() -> None:
    s = make_settings()
    s = s.with_changes(pipeline={"statement_weights": {"claim": 2.0}})
    s = s.with_changes(pipeline={"unsupported_claim_threshold": 0.0})
    ev = assemble(converted(), nli([1.0, 0.0]), refusal(), s, evaluated_at=EVALUATED_AT)
    assert ev.grounded_precision == 0.5
    assert ev.unsupported_claims == []


def test_count_judge_calls() -> None:
    assert (
        count_judge_calls([call("nli", 1), call("nli", 1, cached=True), call("refusal", 1, attempts=0)]) == 1
    )


def test_threshold_for_judge_defaults_and_explicit_values() -> None:
    pipe = make_settings().pipeline
    assert pipe.threshold_for("context_entailment", "lexical") == 0.81
    assert pipe.threshold_for("grounded_precision", "cascade") == 0.81
    assert pipe.threshold_for("context_entailment", "openai") == 0.5
    assert pipe.threshold_for("answer_entails_ground_truth", "lexical") == 0.5
    assert pipe.threshold_for("relevance", "lexical") == 0.5
    pipe = make_settings(pipeline={"judge_correct_thresholds": {"local": 0.7}}).pipeline
    assert pipe.threshold_for("agreement", "local") == 0.7
    # set explicitly: every judge
    pipe = make_settings(
        pipeline={"judge_correct_thresholds": {"local": 0.7}, "correct_threshold": 0.6}
    ).pipeline
    assert pipe.threshold_for("agreement", "local") == 0.6
    settings = make_settings()
    settings = settings.with_changes(judge={"kind": "openai"})
    ev = assemble(converted(), nli(), refusal(), settings, evaluated_at=EVALUATED_AT)
    assert ev.hallucination is False  # 0.5 is not under the 0.5 threshold


def test_an_app_and_models_own_thresholds_come_before_every_other_setting() -> None:
    pipe = make_settings(
        pipeline={
            "hallucination_threshold": 0.6,
            "correct_threshold": 0.4,
            "app_thresholds": {
                "shop": {"hallucination": 0.3, "models": {"bot-7": {"hallucination": 0.9}, "bot-8": {}}},
                "wiki": {"correct": 0.7},
            },
        }
    ).pipeline
    assert pipe.threshold_for("context_entailment", "lexical", "shop", "bot-7") == 0.9
    assert pipe.threshold_for("context_entailment", "lexical", "shop", "bot-8") == 0.3  # the app's
    assert pipe.threshold_for("grounded_precision", "lexical", "shop") == 0.3
    assert pipe.threshold_for("context_entailment", "lexical", "wiki", "any") == 0.6  # not set: global
    assert pipe.threshold_for("answer_entails_ground_truth", "lexical", "wiki", "any") == 0.7
    assert pipe.threshold_for("answer_entails_ground_truth", "lexical", "shop", "bot-7") == 0.4
    assert pipe.threshold_for("context_entailment", "lexical") == 0.6  # no app given
    assert pipe.threshold_for("relevance", "lexical", "shop", "bot-7") == 0.5


def test_the_hallucination_flag_uses_the_interactions_app_and_model_threshold() -> None:
    # context entailment 0.5 (statements 1.0 and 0.0): flagged under 0.6, not under 0.4
    base = make_settings(judge={"kind": "openai"})
    assert assemble(converted(), nli(), refusal(), base, evaluated_at=EVALUATED_AT).hallucination is False
    strict = base.with_changes(
        pipeline={"app_thresholds": {"shop": {"models": {"bot-7": {"hallucination": 0.6}}}}}
    )
    assert assemble(converted(), nli(), refusal(), strict, evaluated_at=EVALUATED_AT).hallucination is True
    other = base.with_changes(
        pipeline={"app_thresholds": {"shop": {"models": {"bot-9": {"hallucination": 0.6}}}}}
    )
    assert assemble(converted(), nli(), refusal(), other, evaluated_at=EVALUATED_AT).hallucination is False


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        ('{"shop": {"halucination": 0.7}}', "halucination"),
        ('{"shop": {"hallucination": 1.5}}', "less than or equal to 1"),
        ('{"shop": {"models": {"bot": {"correct": -0.1}}}}', "greater than or equal to 0"),
        ('{"shop": {"models": {"bot": {"models": {}}}}}', "models"),
        ('{"shop": 0.7}', "valid dictionary"),
    ],
)
def test_app_thresholds_out_of_range_or_with_unknown_keys_are_refused_in_one_line(
    value: str, reason: str
) -> None:
    from pydantic import ValidationError

    from schemas.settings import describe_settings_error, settings_from_env

    with pytest.raises(ValidationError) as caught:
        settings_from_env({"GROUNDWATCH_PIPELINE__APP_THRESHOLDS": value})
    line = describe_settings_error(caught.value)
    assert "GROUNDWATCH_PIPELINE__APP_THRESHOLDS" in line and reason in line and "\n" not in line


def test_a_flagged_answer_names_the_statements_its_threshold_did_not_support() -> None:
    """One operating threshold decides the flag and each statement's verdict: a partial-credit judge's
    statement called entailed at 0.729 under the lexical 0.81 is not_stated and an unsupported claim, so
    the flagged answer names it; over the threshold a statement is entailed whatever the judge wrote."""
    s = make_settings().with_changes(judge={"kind": "lexical"})
    statement = StatementVerdict(
        statement="It covers two years.", verdict="entailed", score=0.729, reason="r"
    )
    over = StatementVerdict(statement="It covers defects.", verdict="not_stated", score=0.9)
    hyp = HypothesisResult(hypothesis="It covers two years.", statements=[statement], score=0.729)
    result = NliResult(
        interaction_id="a1", pairs=[PairResult(pair="context_answer", hypotheses=[hyp], score=0.729)]
    )
    ev = assemble(converted(), result, refusal(), s, evaluated_at=EVALUATED_AT)
    assert (ev.hallucination, ev.context_entailment) == (True, 0.729)
    assert ev.unsupported_claims == ["It covers two years."]
    [judged] = ev.pairs[0].hypotheses[0].statements
    assert judged.verdict == "not_stated" and "under the operating threshold 0.81" in judged.reason
    hyp2 = HypothesisResult(hypothesis="h", statements=[over], score=0.9)
    result2 = NliResult(
        interaction_id="a1", pairs=[PairResult(pair="context_answer", hypotheses=[hyp2], score=0.9)]
    )
    ev2 = assemble(converted(), result2, refusal(), s, evaluated_at=EVALUATED_AT)
    assert ev2.hallucination is False and ev2.unsupported_claims == []
    assert ev2.pairs[0].hypotheses[0].statements[0].verdict == "entailed"
