"""Answerability and refusal groundedness: the rule's order of sources, its flags through the real
pipeline (lexical judge, no mocks), the window's Trust-Eval figures through chDB, and parity with
``groundwatch eval``'s Trust-Eval report on the same cases."""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from groundwatch.commands import eval_cmd
from pipeline.answerability import answerability, answerable_from, nothing_retrieved
from pipeline.dataset import read_dataset
from pipeline.evaluator import Evaluator
from pipeline.judges.lexical import LexicalJudge
from schemas.alert import BaselineRule
from schemas.evaluation import Evaluation
from schemas.interaction import Interaction, Passage
from schemas.metrics import METRICS_BY_NAME, higher_is_bad, pooled
from schemas.settings import WindowSettings
from schemas.window import WindowAggregate
from streams.clickhouse.store import ClickHouseStore
from streams.windows.closer import WindowCloser
from tests.fixtures.alerts import run
from tests.fixtures.answerability import ANSWER, CONTEXT, GT_REFUSAL, PARITY_LINES, REFUSAL
from tests.settings_factory import make_settings

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
FIGURES = ("reject_recall", "reject_precision", "answerable_recall", "answerable_precision")


# ---- the rule ---------------------------------------------------------------------------------------


def test_the_first_source_that_knows_decides() -> None:
    # the third argument: nothing retrieved (no evidence, and the setting says that means unanswerable)
    assert answerable_from({"answerable": 0}, False, False) == (False, "label")  # the label beats the truth
    assert answerable_from({"answerable": 1}, True, True) == (True, "label")
    assert answerable_from({"answerable": 2, "correct": 1}, True, False) == (False, "ground_truth")
    assert answerable_from(None, False, True) == (True, "ground_truth")  # the truth beats no evidence
    assert answerable_from({}, None, True) == (False, "contexts")
    assert answerable_from(None, None, False) == (None, "unknown")  # evidence there decides nothing


def test_no_evidence_decides_only_when_the_setting_says_so() -> None:
    blank = [Passage(text="  ")]
    tool = [Passage(text="order 7 shipped", document="tool:orders")]
    assert nothing_retrieved([], [], True) and nothing_retrieved(blank, [], True)
    assert not nothing_retrieved([], [], False)  # off: an app may not send what it retrieved
    assert not nothing_retrieved(blank, tool, True)  # a tool result is evidence


def test_each_flag_is_none_outside_its_denominator() -> None:
    over = answerability(None, False, False, True)  # answerable, refused
    assert (over.over_refusal, over.answered_answerable, over.justified_refusal) == (True, False, False)
    assert over.answered_unanswerable is None and over.refused_unanswerable is None
    assert over.justified_answer is None
    blind = answerability(None, True, False, False)  # unanswerable, answered
    assert (blind.answered_unanswerable, blind.refused_unanswerable, blind.justified_answer) == (
        True,
        False,
        False,
    )
    assert blind.over_refusal is None and blind.answered_answerable is None
    assert blind.justified_refusal is None
    unknown_refusal = answerability(None, True, False, None)  # a blank answer: not a Trust-Eval case
    assert unknown_refusal.answerable is False and unknown_refusal.answerable_source == "ground_truth"
    assert all(
        getattr(unknown_refusal, f) is None
        for f in ("over_refusal", "answered_unanswerable", "justified_refusal", "justified_answer")
    )
    unknown = answerability(None, None, False, True)
    assert unknown.answerable is None and unknown.justified_refusal is None and unknown.over_refusal is None


def test_recalls_and_precisions_are_bad_when_they_fall() -> None:
    """Alert baselines and the dashboard read the direction from the catalogue."""
    assert higher_is_bad("over_refusal_rate") and higher_is_bad("answered_unanswerable_rate")
    assert not any(higher_is_bad(name) for name in FIGURES)


def test_a_baseline_rule_fires_when_reject_recall_falls_not_when_it_rises() -> None:
    rule = BaselineRule(name="b", kind="baseline", metric="reject_recall", windows=1, baseline_windows=4,
                        min_interactions=50, min_baseline_interactions=100, cooldown_seconds=0)  # fmt: skip
    steady = [(80, 100)] * 4  # 80 % of unanswerable questions refused
    fired = run(rule, [*steady, (50, 100)])
    assert [a.state for a in fired] == ["firing"] and fired[0].op == "<"
    assert run(rule, [*steady, (99, 100)]) == []


# ---- through the pipeline ---------------------------------------------------------------------------


def _interaction(
    iid: str, answer: str, ground_truth: str | None, contexts: list[str] | None = None, **extra: object
) -> Interaction:
    return Interaction.model_validate(
        {
            "interaction_id": iid,
            "timestamp": T0 + timedelta(seconds=len(iid)),
            "app": "a",
            "model": "m",
            "question": "Where is the jack?",
            "contexts": [CONTEXT] if contexts is None else contexts,
            "answer": answer,
            "ground_truth": ground_truth,
            **extra,
        }
    )


async def _evaluate(*interactions: Interaction, no_evidence_unanswerable: bool = True) -> list[Evaluation]:
    settings = make_settings().with_changes(pipeline={"no_evidence_unanswerable": no_evidence_unanswerable})
    evaluator = Evaluator(LexicalJudge(), settings)
    try:
        return [await evaluator.evaluate(i) for i in interactions]
    finally:
        await evaluator.aclose()


async def test_adversarial_ground_truths_and_contexts() -> None:
    empty, blank, refusal_gt, no_contexts, blank_contexts, refused_bare, blank_answer = await _evaluate(
        _interaction("empty", ANSWER, ""),  # an empty ground truth says nothing: the evidence decides
        _interaction("blank", ANSWER, "  \n\t "),
        _interaction("refgt", ANSWER, GT_REFUSAL),  # the truth is "no answer", the answer answers anyway
        _interaction("nocx", ANSWER, None, contexts=[]),
        _interaction("blankcx", REFUSAL, None, contexts=["   "]),
        _interaction("refnocx", REFUSAL, "", contexts=[]),
        _interaction("blankans", " ", "Under the rear seat."),
    )
    for e in (empty, blank):
        assert e.ground_truth_refusal is None
        assert (e.answerable, e.answerable_source, e.over_refusal, e.justified_answer) == (
            None,
            "unknown",
            None,
            None,
        )
    assert refusal_gt.ground_truth_refusal is True and refusal_gt.answer_refusal is False
    assert (refusal_gt.answerable, refusal_gt.answerable_source) == (False, "ground_truth")
    assert refusal_gt.answered_unanswerable is True and refusal_gt.justified_answer is False
    assert refusal_gt.over_refusal is None and refusal_gt.justified_refusal is None
    assert (no_contexts.answerable, no_contexts.answerable_source) == (False, "contexts")
    assert no_contexts.answered_unanswerable is True and no_contexts.no_evidence is True
    assert (blank_contexts.answerable, blank_contexts.answerable_source) == (False, "contexts")
    assert blank_contexts.answer_refusal is True and blank_contexts.refused_unanswerable is True
    assert blank_contexts.justified_refusal is True
    assert refused_bare.justified_refusal is True and refused_bare.answerable_source == "contexts"
    assert blank_answer.answer_refusal is None and blank_answer.answerable is True
    assert blank_answer.over_refusal is None and blank_answer.justified_answer is None


async def test_without_the_setting_no_evidence_leaves_answerability_unknown() -> None:
    [e] = await _evaluate(_interaction("nocx", ANSWER, None, contexts=[]), no_evidence_unanswerable=False)
    assert (e.answerable, e.answerable_source, e.answered_unanswerable) == (None, "unknown", None)
    assert e.no_evidence is True


async def test_a_label_decides_before_the_ground_truth() -> None:
    [e] = await _evaluate(_interaction("lab", REFUSAL, "Under the rear seat.", labels={"answerable": 0}))
    assert (e.answerable, e.answerable_source, e.ground_truth_refusal) == (False, "label", False)
    assert e.refused_unanswerable is True and e.justified_refusal is True


# ---- the window, through chDB -----------------------------------------------------------------------


async def _window(store: ClickHouseStore, evaluations: list[Evaluation]) -> WindowAggregate:
    """The window the worker closes over these evaluations, recomputed from their stored rows."""
    closer = WindowCloser(WindowSettings(size_seconds=3600, grace_seconds=0, idle_close_seconds=1000), store)
    await store.insert_evaluations(evaluations)
    await store.insert_evaluations(evaluations[:2])  # redelivered: counted once
    await closer.touch(evaluations)
    [window] = await closer.close_due(final=True)
    return window


async def test_window_figures_through_chdb_and_undefined_when_no_case(store: ClickHouseStore) -> None:
    evaluations = await _evaluate(
        _interaction("a1", ANSWER, "Under the rear seat."),  # answerable, answered
        _interaction("a2", REFUSAL, "Under the rear seat."),  # answerable, refused: over-refusal
        _interaction("a3", ANSWER, "Under the rear seat of the car."),  # answerable, answered
        _interaction("u1", ANSWER, GT_REFUSAL),  # unanswerable, answered
        _interaction("u2", REFUSAL, GT_REFUSAL),  # unanswerable, refused
        _interaction("unknown1", ANSWER, None),  # evidence, no ground truth: not a case
    )
    window = await _window(store, evaluations)
    figure = {name: pooled(METRICS_BY_NAME[name], [window]) for name in METRICS_BY_NAME}
    assert figure["over_refusal_rate"] == pytest.approx(1 / 3)
    assert figure["answerable_recall"] == pytest.approx(2 / 3)
    assert figure["answered_unanswerable_rate"] == pytest.approx(1 / 2)
    assert figure["reject_recall"] == pytest.approx(1 / 2)
    assert figure["reject_precision"] == pytest.approx(1 / 2)  # u2 of the refusals a2, u2
    assert figure["answerable_precision"] == pytest.approx(2 / 3)  # a1, a3 of the answers a1, a3, u1
    assert (window.answerable_questions, window.unanswerable_questions) == (3, 2)
    stored = store.query_sync(
        "SELECT interaction_id, answerable_source FROM {db:Identifier}.evaluations FINAL "
        "ORDER BY interaction_id",
        {"db": store.db},
    )
    assert {r["interaction_id"]: r["answerable_source"] for r in stored} == {
        "a1": "ground_truth", "a2": "ground_truth", "a3": "ground_truth", "u1": "ground_truth",
        "u2": "ground_truth", "unknown1": "unknown",
    }  # fmt: skip


async def test_a_window_without_cases_is_undefined_not_zero(store: ClickHouseStore) -> None:
    evaluations = await _evaluate(_interaction("x1", ANSWER, None), _interaction("x2", REFUSAL, None))
    window = await _window(store, evaluations)
    for name in ("over_refusal_rate", "answered_unanswerable_rate", *FIGURES):
        assert getattr(window, name) is None and pooled(METRICS_BY_NAME[name], [window]) is None, name


# ---- parity with groundwatch eval -------------------------------------------------------------------


def test_stream_window_and_eval_report_give_the_same_figures(
    store: ClickHouseStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cases.jsonl"
    lines = [
        {"question": "Where is the jack?", "contexts": [CONTEXT], "app": "a", "model": "m",
         "timestamp": (T0 + timedelta(seconds=i)).isoformat(), **line}
        for i, line in enumerate(PARITY_LINES)
    ]  # fmt: skip
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    parser = argparse.ArgumentParser()
    eval_cmd.add_arguments(parser)
    out = tmp_path / "report.json"
    args = parser.parse_args([str(path), "--judge", "lexical", "--out", str(out), "--quiet"])
    monkeypatch.setenv("GROUNDWATCH_PIPELINE__NO_EVIDENCE_UNANSWERABLE", "true")
    assert eval_cmd.run(args) == 0
    report = json.loads(out.read_text())
    offline = report["trust_eval"]
    # answerable p1 p2 p10 (p2 refused), unanswerable p3 p4 p5 p7 p8 (p3 p7 answered), p6 unknown, p9 blank
    assert (report["counts"]["over_refusals"], report["counts"]["answered_unanswerable"]) == (1, 2)
    assert report["counts"]["answerability_known"] == 9

    interactions = [line.interaction for line in read_dataset(path).lines]

    async def stream() -> WindowAggregate:
        return await _window(store, await _evaluate(*interactions))

    window = asyncio.run(stream())
    online = {name: pooled(METRICS_BY_NAME[name], [window]) for name in FIGURES}
    expected = {
        "reject_recall": offline["reject_rec"],
        "reject_precision": offline["reject_prec"],
        "answerable_recall": offline["answerable_rec"],
        "answerable_precision": offline["answerable_prec"],
    }
    assert online == pytest.approx(expected)
    # the report's catalogue figures (pooled as a window pools) agree too, the two rates included
    rates = (*FIGURES, "over_refusal_rate", "answered_unanswerable_rate")
    pooled_online = {name: pooled(METRICS_BY_NAME[name], [window]) for name in rates}
    assert {name: report["metrics"][name] for name in rates} == pytest.approx(pooled_online)
    # the cases: answerable p1 p2 p10, unanswerable p3 p4 p5 p7 p8; refused p2 p4 p5 p8
    assert expected == pytest.approx(
        {"reject_recall": 3 / 5, "reject_precision": 3 / 4, "answerable_recall": 2 / 3,
         "answerable_precision": 2 / 4}
    )  # fmt: skip
    assert window.answerable_questions == offline["answerable_num"] == 3
