"""The Documents and Compare endpoints on real chDB: exact counts per document from the recorded
passages (current evaluations only), every catalogue metric per slice agreeing with the windows, the
alert code's Fisher test, repeated questions, and bad slice terms as 400s."""

from __future__ import annotations

import statistics
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.interaction import Interaction
from schemas.metrics import METRICS, MetricKind, pooled
from schemas.results import HypothesisResult, PairResult, StatementVerdict
from schemas.slice_filter import COLUMNS, SliceFilter
from streams.alerts.stats import Obs
from streams.clickhouse.slices import carried
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.compare import (
    QUESTION_MEAN,
    QUESTION_RATE,
    mean_difference,
    per_question_sql,
    two_sided_fisher,
)
from streams.windows.aggregator import WindowStats
from tests.fixtures.dashboard import client_for
from tests.fixtures.store import store_settings
from tests.fixtures.wall_clock import recent
from tests.integration.chdb import fresh_chdb_url

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
CONTEXTS = [
    {"text": "The museum opened in 1990.", "document": "good.md"},
    {"text": "Tickets cost 12 euros.", "document": "bad.md"},
    {"text": "  ", "document": "blank.md"},  # never retrieved: a blank passage is not judged
    {"text": "Parking is free."},  # no document name
    {"text": "The cafe closes at six.", "document": "idle.md"},
]


def st(verdict: str, passage: int | None) -> StatementVerdict:
    return StatementVerdict(
        statement=f"{verdict} claim",
        verdict=verdict,
        score=1.0 if verdict == "entailed" else 0.0,
        passage=passage,
    )  # type: ignore[arg-type]


def evaluation(iid: str, model: str, k: int, question: str, statements: list[StatementVerdict], *,
               at_ms: int = 0) -> Evaluation:  # fmt: skip
    bad = k < 3 and model == "m1"
    contexts = CONTEXTS if model == "m1" else [CONTEXTS[0], CONTEXTS[4]]
    interaction = Interaction(
        interaction_id=iid, timestamp=T0 + timedelta(seconds=k), app="bot", model=model, question=question,
        contexts=contexts, answer="It opened in 1990.",
    )  # fmt: skip
    return Evaluation(
        interaction_id=iid, timestamp=interaction.timestamp, app="bot", model=model, judge="lexical",
        evaluated_at=T0 + timedelta(minutes=5, milliseconds=at_ms),
        context_entailment=0.1 if bad else 0.9, hallucination=bad, answer_refusal=False,
        grounded_precision=0.0 if bad else 1.0, input_tokens=10 + k, output_tokens=2, cost_usd=0.001 * k,
        pairs=[PairResult(pair="context_answer", score=0.5,
                          hypotheses=[HypothesisResult(hypothesis="h", statements=statements, score=0.5)])],
        interaction=interaction,
    )  # fmt: skip


def m1_statements(k: int) -> list[StatementVerdict]:
    """good.md supports every answer; bad.md: 3 contradicted, 5 not stated, 2 entailed; one unplaced."""
    against_bad = "contradicted" if k < 3 else "not_stated" if k < 8 else "entailed"
    out = [st("entailed", 0), st(against_bad, 1)]
    if k == 9:
        out.append(st("not_stated", None))
    return out


@pytest.fixture()
async def store(store: ClickHouseStore) -> AsyncIterator[ClickHouseStore]:
    """The shared fixture's store with this module's rows."""
    s = store
    museum = "When did the museum open?"
    m1 = [
        evaluation(f"m1-{k}", "m1", k, museum if k < 5 else f"Question {k}?", m1_statements(k))
        for k in range(10)
    ]
    m2 = [
        evaluation(f"m2-{k}", "m2", k, "when did the   MUSEUM open? ", [st("entailed", 0)]) for k in range(5)
    ]
    # an earlier evaluation of m1-9 whose statements no longer count (fewer, other verdicts, other documents)
    stale = evaluation("m1-9", "m1", 9, "Question 9?", [st("contradicted", 4)] * 6, at_ms=-1000)
    s.insert_evaluations_sync([stale])
    s.insert_evaluations_sync(m1 + m2)
    for model, evals in (("m1", m1), ("m2", m2)):
        # conversations on: each interaction without a conversation_id is a conversation of one turn
        window = WindowStats().extend(EvalRow.from_evaluation(e) for e in evals).count_conversations([])
        await s.insert_window(
            window.result(window_start=T0, window_end=T0 + timedelta(minutes=1), app="bot", model=model), T0
        )
    yield s


RANGE = {"start": T0.isoformat(), "end": (T0 + timedelta(hours=1)).isoformat()}


async def get(store: ClickHouseStore, path: str, params: list[tuple[str, str]]) -> tuple[int, Any]:
    client = await client_for(store)
    try:
        response = await client.get(f"/dashboard/api/{path}", params=[*RANGE.items(), *params])
        return response.status, await response.json()
    finally:
        await client.close()


async def test_documents_count_retrievals_and_the_verdicts_judged_against_each(
    store: ClickHouseStore,
) -> None:
    status, body = await get(store, "documents", [])
    assert status == 200
    docs = {d["document"]: d for d in body["documents"]}
    assert [d["document"] for d in body["documents"]] == ["bad.md", "idle.md", "", "good.md"]
    bad = docs["bad.md"]
    counts = (bad["retrieved"], bad["statements"], bad["supported"], bad["contradicted"], bad["not_stated"])
    assert counts == (10, 10, 2, 3, 5)
    assert bad["unsupported_share"] == pytest.approx(0.8) and bad["lower"] < 0.8 < bad["upper"]
    assert docs["good.md"]["retrieved"] == 15 and docs["good.md"]["statements"] == 15
    assert docs["good.md"]["unsupported_share"] == 0.0 and not docs["good.md"]["never_supporting"]
    idle = docs["idle.md"]  # retrieved by all 15, the stale evaluation's statements against it gone
    assert (idle["retrieved"], idle["statements"], idle["never_supporting"]) == (15, 0, True)
    assert docs[""]["retrieved"] == 10 and docs[""]["never_supporting"]
    assert "blank.md" not in docs
    assert body["statements_without_passage"] == 1 and body["total"] == 4


async def test_documents_of_one_slice(store: ClickHouseStore) -> None:
    status, body = await get(store, "documents", [("slice", "model:m2"), ("slice", "app:bot")])
    assert status == 200 and body["slice"] == {"app": "bot", "model": "m2", "dimensions": {}}
    assert {d["document"]: d["retrieved"] for d in body["documents"]} == {"good.md": 5, "idle.md": 5}
    assert body["statements_without_passage"] == 0


async def test_compare_every_metric_agrees_with_the_windows_and_tests_like_the_alerts(
    store: ClickHouseStore,
) -> None:
    status, body = await get(store, "compare", [("a", "model:m1"), ("b", "model:m2"), ("b", "app:bot")])
    assert status == 200
    metrics = {m["name"]: m for m in body["metrics"]}
    assert set(metrics) == {m.name for m in METRICS}
    windows = {w.model: w for w in store.windows_sync(None)}
    for m in METRICS:  # the slice's figure from its interactions = the catalogue's from its windows
        for side, model in (("a", "m1"), ("b", "m2")):
            assert metrics[m.name][side] == pytest.approx(pooled(m, [windows[model]])), (m.name, side)
    h = metrics["hallucination_rate"]
    assert (h["a"], h["b"], h["a_n"], h["b_n"], h["test"]) == (pytest.approx(0.3), 0.0, 10, 5, "fisher")
    assert h["difference"] == pytest.approx(-0.3) and h["lower"] < -0.3 < h["upper"]
    assert h["p_value"] == pytest.approx(2 * 120 / 455) and not h["significant"]  # C(10,3)/C(15,3), doubled
    ce = metrics["mean_context_entailment"]
    a_values = [0.1] * 3 + [0.9] * 7
    se = (statistics.variance(a_values) / 10) ** 0.5
    assert ce["difference"] == pytest.approx(0.9 - statistics.mean(a_values))
    assert ce["upper"] - ce["lower"] == pytest.approx(2 * 1.959963984540054 * se)
    assert ce["test"] == "welch" and ce["significant"]
    assert metrics["interactions"]["difference"] == -5 and metrics["interactions"]["p_value"] is None
    (q,) = body["questions"]
    assert body["repeated_questions"] == 1
    assert q["question"] == "When did the museum open?" and (q["a_n"], q["b_n"]) == (5, 5)
    assert q["a_hallucination_rate"] == pytest.approx(0.6) and q["b_hallucination_rate"] == 0.0
    assert q["a_example"] in {"m1-0", "m1-1", "m1-2"}


@pytest.mark.parametrize(
    ("path", "params", "field"),
    [
        ("compare", [("a", "colour red")], "a"),
        ("compare", [("a", "col our:red")], "a"),
        ("compare", [("a", "app:x"), ("a", "app:y")], "a"),
        ("compare", [("b", "model")], "b"),
        ("compare", [("a", "model:x"), ("a", "model:y")], "a"),
        ("documents", [("slice", "app:" + "x" * 300)], "slice.app"),
        ("documents", [("limit", "0")], "limit"),
    ],
)
async def test_bad_slice_terms_are_400s_naming_the_field(
    store: ClickHouseStore, path: str, params: list[tuple[str, str]], field: str
) -> None:
    status, body = await get(store, path, params)
    assert status == 400 and body["details"][0]["field"] == field


async def test_a_hostile_slice_value_is_a_plain_parameter(store: ClickHouseStore) -> None:
    status, body = await get(store, "documents", [("slice", "model:m1' OR 1=1 --")])
    assert status == 200 and body["documents"] == [] and body["total"] == 0


def test_every_slice_key_has_its_sql() -> None:
    assert {*COLUMNS, "dimensions"} == set(SliceFilter.model_fields)


def test_the_tests_in_both_directions() -> None:
    assert two_sided_fisher(Obs(3, 10), Obs(0, 5)) == two_sided_fisher(Obs(0, 5), Obs(3, 10))
    assert two_sided_fisher(Obs(5, 10), Obs(5, 10)) == 1.0
    d, low, up, p = mean_difference((3, 3.0, 3.0), (3, 0.0, 0.0))  # constant sides: a certain difference
    assert (d, low, up, p) == (-1.0, -1.0, -1.0, 0.0)
    assert mean_difference((1, 0.5, 0.25), (4, 2.0, 1.5))[1:] == (None, None, None)


def test_report_documents_prints_the_ranking_worst_first(capsys: pytest.CaptureFixture[str]) -> None:
    from groundwatch import cli

    url = fresh_chdb_url()
    s = ClickHouseStore.open_sync(store_settings(url))
    now = recent()  # report --documents reads the range that ends at the wall clock's now
    evals = [
        evaluation(f"r{k}", "m1", k, "Why?", m1_statements(k)).model_copy(update={"timestamp": now})
        for k in range(10)
    ]
    s.insert_evaluations_sync(evals)
    s.close()
    assert cli.main(["report", "--documents", "--model", "m1", "--clickhouse", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "model:m1: 4 documents, worst first" in lines[0]
    assert lines[2].startswith("bad.md") and "80.0%" in lines[2]
    assert lines[3].startswith("(no document name)") and lines[3].endswith("retrieved, never supporting")
    assert lines[4].startswith("idle.md") and lines[4].endswith("retrieved, never supporting")
    assert lines[-1] == "1 answer statements have no recorded passage"
    assert cli.main(["report", "--documents", "--model", "m" * 300, "--clickhouse", url]) == 2
    assert "--app/--model" in capsys.readouterr().err


async def test_compare_ranks_repeated_questions_by_how_far_the_slices_differ() -> None:
    """Questions asked in both slices with known hallucination rates: the ones that differ come most
    different first (context entailment breaking a tie), the ones answered alike are counted but not
    listed, even when their averages differ by rounding alone, and the counts hold however many rows
    are asked for."""
    s = ClickHouseStore.open_sync(store_settings())
    # question: (A's hallucinations of 4, B's of 4, B's context entailment; A's is 0.9)
    plan = {"Q same": (1, 1, 0.9), "Q far": (0, 4, 0.9), "Q mid": (1, 3, 0.9), "Q near": (2, 3, 0.9),
            "Q tie low": (0, 1, 0.2), "Q back": (4, 1, 0.9)}  # fmt: skip
    evals = []
    for question, (bad_a, bad_b, ce_b) in plan.items():
        for model, bad, ce in (("m1", bad_a, 0.9), ("m2", bad_b, ce_b)):
            for k in range(4):
                e = evaluation(f"{question}-{model}-{k}", model, k, question, [st("entailed", 0)])
                evals.append(e.model_copy(update={"hallucination": k < bad, "context_entailment": ce}))
    # the same entailment averaged over one and three interactions: 0.1 and (0.1 + 0.1 + 0.1) / 3 =
    # 0.10000000000000002 in floats, a difference of rounding alone
    for model, values in (("m1", (0.1,)), ("m2", (0.1, 0.1, 0.1))):
        for k, ce in enumerate(values):
            e = evaluation(f"noise-{model}-{k}", model, k, "Q noise", [st("entailed", 0)])
            evals.append(e.model_copy(update={"hallucination": False, "context_entailment": ce}))
    evals.append(evaluation("only-a", "m1", 0, "Q only in A", [st("entailed", 0)]))
    s.insert_evaluations_sync(evals)
    slices = [("a", "model:m1"), ("b", "model:m2")]
    try:
        status, body = await get(s, "compare", [*slices, ("questions", "4")])
        assert status == 200
        assert [q["question"] for q in body["questions"]] == ["Q far", "Q back", "Q mid", "Q tie low"]
        assert [(q["a_hallucination_rate"], q["b_hallucination_rate"]) for q in body["questions"]] == [
            (0.0, 1.0), (1.0, 0.25), (0.25, 0.75), (0.0, 0.25)
        ]  # fmt: skip
        assert (body["repeated_questions"], body["differing_questions"]) == (7, 5)
        status, body = await get(s, "compare", [*slices, ("questions", "20")])
        assert [q["question"] for q in body["questions"]][-2:] == ["Q tie low", "Q near"]
        status, body = await get(s, "compare", [*slices, ("questions", "0")])
        assert body["questions"] == [] and (body["repeated_questions"], body["differing_questions"]) == (7, 5)
        status, body = await get(s, "compare", [("a", "model:m1"), ("b", "model:m1")])  # a slice with itself
        assert body["questions"] == [] and (body["repeated_questions"], body["differing_questions"]) == (8, 0)
        # the sides are read together: a row of both slices counts on each side
        assert all(m["a"] == m["b"] and m["a_n"] == m["b_n"] for m in body["metrics"])
        assert {m["name"]: m["a"] for m in body["metrics"]}["interactions"] == 26  # 6 x 4 + 2
    finally:
        s.close()


def test_the_repeated_questions_read_their_rate_and_mean_from_the_catalogue() -> None:
    """The per-question figures are the catalogue's metrics, their columns and conditions as slices and
    breakdowns read them (``carried``), not conditions written again."""
    assert (QUESTION_RATE.kind, QUESTION_MEAN.kind) == (MetricKind.RATE, MetricKind.MEAN)
    sql = per_question_sql("db", "app = 'x'", "app = 'y'")
    for metric, column in ((QUESTION_RATE, "h"), (QUESTION_MEAN, "ce")):
        for side in ("a", "b"):
            value, known = carried(metric, f"in_{side}")
            assert f"avgIfOrNull({value}, {known}) AS {side}_{column}" in sql
    assert sql.count(str(QUESTION_MEAN.source)) >= 2 and "hallucination IS NOT NULL" in sql
