"""Worker metrics: judge calls counted from Evaluations, dead letters by stage, lag and totals at scrape."""

from __future__ import annotations

from types import SimpleNamespace

from prometheus_client import generate_latest

from pipeline.answerability import answerability
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction
from schemas.results import JudgeCall
from schemas.tools import ToolStep
from streams.telemetry import WorkerMetrics, faust_lag
from tests.fixtures.messages import EVALUATED_AT


def value(metrics: WorkerMetrics, name: str, **labels: str) -> float:
    got = metrics.registry.get_sample_value(name, labels)
    return 0.0 if got is None else got


def test_judge_calls_tokens_cost_and_cache_hits_come_from_the_call_records() -> None:
    calls = [
        JudgeCall(stage="nli", judge="openai", model="m", input_tokens=100, output_tokens=20, latency_ms=400,
                  cost_usd=0.01, attempts=3),
        JudgeCall(stage="refusal", judge="openai", model="m", input_tokens=10, output_tokens=2, attempts=0),
        JudgeCall(stage="nli", judge="openai", model="m", cached=True),
        JudgeCall(stage="nli", judge="lexical", model="lexical-v1"),
    ]  # fmt: skip
    metrics = WorkerMetrics()
    evaluation = Evaluation(interaction_id="i", timestamp="2026-11-20T10:00:00Z", app="a", model="x",
                            evaluated_at=EVALUATED_AT, judge="openai", calls=calls)  # fmt: skip
    metrics.written([evaluation, evaluation.model_copy(update={"calls": []})], 0.25)
    assert value(metrics, "groundwatch_sink_rows_total") == 2
    assert value(metrics, "groundwatch_events_out_total", stage="sink") == 2
    assert value(metrics, "groundwatch_judge_calls_total", judge="openai", model="m", stage="nli") == 1
    assert value(metrics, "groundwatch_judge_calls_total", judge="openai", model="m", stage="refusal") == 0
    assert value(metrics, "groundwatch_judge_retries_total", judge="openai", model="m") == 2
    assert value(metrics, "groundwatch_judge_tokens_total", judge="openai", model="m", direction="in") == 100
    assert value(metrics, "groundwatch_judge_cost_usd_total", judge="openai", model="m") == 0.01
    assert value(metrics, "groundwatch_judge_cache_hits_total", judge="openai", model="m") == 1
    assert value(metrics, "groundwatch_judge_call_seconds_count", judge="openai", model="m") == 1
    assert value(metrics, "groundwatch_sink_flush_seconds_sum") == 0.25


def test_tool_calls_answers_without_evidence_and_ungrounded_arguments_are_counted() -> None:
    interaction = Interaction(
        interaction_id="t", question="q?", answer="a.",
        steps=[ToolStep(name="search_kb", result="[]"), ToolStep(name="get_order", status="error"),
               ToolStep(name="search_kb", result="x", earlier_turn=True)],
    )  # fmt: skip
    metrics = WorkerMetrics()
    evaluation = Evaluation(interaction_id="t", timestamp="2026-11-20T10:00:00Z", app="a", model="x",
                            evaluated_at=EVALUATED_AT,
                            judge="lexical", interaction=interaction, no_evidence=True,
                            ungrounded_arguments=False)  # fmt: skip
    metrics.written([evaluation, Evaluation(interaction_id="u", timestamp="2026-11-20T10:00:00Z", app="a",
                                            evaluated_at=EVALUATED_AT,
                                            model="x", judge="lexical")], 0.1)  # fmt: skip
    assert value(metrics, "groundwatch_tool_calls_total", app="a", tool="search_kb", status="ok") == 1
    assert value(metrics, "groundwatch_tool_calls_total", app="a", tool="get_order", status="error") == 1
    assert value(metrics, "groundwatch_answers_without_evidence_total", app="a") == 1
    assert value(metrics, "groundwatch_ungrounded_tool_arguments_total", app="a") == 0


def test_checked_miscited_and_dangling_citations_are_counted() -> None:
    metrics = WorkerMetrics()
    base = {"timestamp": "2026-11-20T10:00:00Z", "app": "a", "model": "x", "evaluated_at": EVALUATED_AT,
            "judge": "lexical"}  # fmt: skip
    written = [
        Evaluation(interaction_id="m", miscited=True, dangling_citations=2, dangling_citation=True, **base),
        Evaluation(
            interaction_id="ok", miscited=False, dangling_citations=0, dangling_citation=False, **base
        ),
        Evaluation(interaction_id="none", **base),  # cites nothing
    ]
    metrics.written(written, 0.1)
    assert value(metrics, "groundwatch_cited_answers_total", app="a") == 2
    assert value(metrics, "groundwatch_miscited_answers_total", app="a") == 1
    assert value(metrics, "groundwatch_dangling_citations_total", app="a") == 2


def test_answerability_cases_are_counted_by_cell_and_source() -> None:
    """Trust-Eval's four cells by app: reject recall is refused=true over answerable=false, and so on."""
    metrics = WorkerMetrics()

    def case(iid: str, gt_refusal: bool | None, refused: bool | None) -> Evaluation:
        return Evaluation(
            interaction_id=iid, timestamp="2026-11-20T10:00:00Z", app="a", model="x",
            evaluated_at=EVALUATED_AT, judge="lexical", answer_refusal=refused,
            ground_truth_refusal=gt_refusal,
            **answerability(None, gt_refusal, False, refused).model_dump(),
        )  # fmt: skip

    metrics.written(
        [case("1", True, True), case("2", True, False), case("3", False, True), case("4", False, False),
         case("5", False, False), case("6", None, True), case("7", True, None)],
        0.1,
    )  # fmt: skip
    cells = {
        (answerable, refused): value(
            metrics, "groundwatch_answerability_cases_total", app="a", answerable=answerable, refused=refused,
            source="ground_truth",
        )
        for answerable in ("true", "false")
        for refused in ("true", "false")
    }  # fmt: skip
    assert cells == {("false", "true"): 1, ("false", "false"): 1, ("true", "true"): 1, ("true", "false"): 2}


def test_dead_letters_judge_errors_lag_and_totals() -> None:
    metrics = WorkerMetrics()
    metrics.dead_letter("validate", "InvalidMessage")
    metrics.dead_letter("nli", "JudgeError")
    from collections import namedtuple

    tp = namedtuple("TP", "topic partition")("gw.interactions", 1)
    consumer = SimpleNamespace(assignment=lambda: {tp}, highwater=lambda t: 120, _committed_offset={tp: 100})
    metrics.watch_lag(faust_lag(SimpleNamespace(consumer=consumer)))
    metrics.watch_counts(lambda: {"windows_closed": 7, "alert_transitions": 1})
    assert (
        value(metrics, "groundwatch_dead_letters_total", stage="validate", error_type="InvalidMessage") == 1
    )
    assert value(metrics, "groundwatch_judge_errors_total", stage="nli") == 1
    assert value(metrics, "groundwatch_consumer_lag", topic="gw.interactions", partition="1") == 20
    assert value(metrics, "groundwatch_windows_closed_total") == 7
    text = generate_latest(metrics.registry).decode()
    assert "groundwatch_alert_transitions_total 1.0" in text


def test_custom_evaluators_scores_and_failures_are_counted_per_evaluator_and_version() -> None:
    from schemas.results import CustomScore

    metrics = WorkerMetrics()
    scores = [CustomScore(score=1.0, version="2"), CustomScore(score=0.0, version="2"),
              CustomScore(score=None, reason="timeout: still running after 2 s", version="2")]  # fmt: skip
    evaluations = [
        Evaluation(interaction_id=f"i{k}", timestamp="2026-11-20T10:00:00Z", app="a", model="x",
                   evaluated_at=EVALUATED_AT, judge="lexical", custom={"comp": score})
        for k, score in enumerate(scores)
    ]  # fmt: skip
    metrics.written(evaluations, 0.1)
    labels = {"evaluator": "comp", "version": "2", "app": "a", "model": "x"}
    assert value(metrics, "groundwatch_custom_scored_total", **labels) == 2
    assert value(metrics, "groundwatch_custom_score_total", **labels) == 1.0
    assert value(metrics, "groundwatch_custom_missing_total", **labels, reason="timeout") == 1


def test_each_evaluators_failures_by_kind_and_the_time_of_its_last_score() -> None:
    from schemas.results import CustomScore
    from tests.fixtures.messages import evaluation, interaction

    metrics = WorkerMetrics()
    scored = evaluation(interaction(interaction_id="a"), custom={
        "tone": CustomScore(score=1.0, version="1"),
        "leaver": CustomScore(score=None, reason="raised SystemExit: 1", version="1"),
        "shape": CustomScore(score=None, reason="bad result: returned str 'x'", version="1"),
    })  # fmt: skip
    silent = evaluation(interaction(interaction_id="b"), custom={
        "tone": CustomScore(score=None, reason="timeout: still running after 1 s", version="1"),
    })  # fmt: skip
    metrics.written([scored, silent], 0.01)
    labels = {"version": "1", "app": "bot", "model": "m"}
    assert (
        value(metrics, "groundwatch_custom_missing_total", evaluator="leaver", reason="raised", **labels) == 1
    )
    assert (
        value(metrics, "groundwatch_custom_missing_total", evaluator="shape", reason="bad result", **labels)
        == 1
    )
    assert (
        value(metrics, "groundwatch_custom_missing_total", evaluator="tone", reason="timeout", **labels) == 1
    )
    last = "groundwatch_custom_last_score_timestamp_seconds"
    assert value(metrics, last, evaluator="tone") == EVALUATED_AT.timestamp()
    assert metrics.registry.get_sample_value(last, {"evaluator": "leaver"}) is None  # never scored


def test_each_judge_stage_counts_its_results_and_the_time_of_its_last_one() -> None:
    from tests.fixtures.messages import evaluation, interaction

    metrics = WorkerMetrics()
    whole = evaluation(interaction(interaction_id="a"), relevance=0.8)
    nli_failed = evaluation(interaction(interaction_id="b"), missing=["nli"], complete=False)
    skipped = evaluation(interaction(interaction_id="c"), judged=False)
    metrics.written([whole, nli_failed, skipped], 0.01)
    results = "groundwatch_stage_results_total"
    assert value(metrics, results, stage="nli", app="bot", outcome="scored") == 1
    assert value(metrics, results, stage="nli", app="bot", outcome="missing") == 1
    assert value(metrics, results, stage="refusal", app="bot", outcome="scored") == 2
    assert value(metrics, results, stage="relevance", app="bot", outcome="scored") == 1  # where it was on
    assert value(metrics, results, stage="relevance", app="bot", outcome="missing") == 0
    last = "groundwatch_stage_last_result_timestamp_seconds"
    assert value(metrics, last, stage="nli") == EVALUATED_AT.timestamp()
