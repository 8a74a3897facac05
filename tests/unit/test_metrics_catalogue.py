"""The metric catalogue (schemas/metrics.py) covers what windows store and what alert rules may watch."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import ValidationError

from groundwatch.trend_report import Report, figure, render
from pipeline.answerability import answerability
from schemas.alert import AlertRules
from schemas.conversation import ConversationRollup
from schemas.dashboard import OverviewQuery
from schemas.evaluation_row import EvalRow
from schemas.metrics import (
    CONVERSATION_SUMS,
    INTERACTION_SUMS,
    METRICS,
    METRICS_BY_NAME,
    Metric,
    MetricKind,
    Over,
    RowSum,
    pooled,
)
from schemas.window import WindowAggregate
from streams.alerts.lifecycle import Slot, decide
from streams.alerts.stats import observe
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.queries import DashboardQueries
from streams.windows.aggregator import WindowStats

T0 = datetime(2026, 1, 1, tzinfo=UTC)
GENERATOR = Path(__file__).resolve().parents[2] / "deploy" / "grafana" / "generate.py"


def grafana_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("groundwatch_grafana_generate", GENERATOR)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_rate_and_mean_a_window_stores_is_declared() -> None:
    stored = {f for f in WindowAggregate.model_fields if f.endswith("_rate") or f.startswith("mean_")}
    assert stored <= set(METRICS_BY_NAME), stored - set(METRICS_BY_NAME)


def test_ratios_have_a_denominator_and_sums_none() -> None:
    for m in METRICS:
        assert (m.denominator is None) == (m.kind is MetricKind.SUM), m.name
    assert len(METRICS_BY_NAME) == len(METRICS)


def test_every_column_a_metric_names_exists() -> None:
    """A metric's source is an EvalRow field and its columns are window_aggregates columns, so window
    aggregation, alert rules and the SQL all read the same data."""
    for m in METRICS:
        columns = [m.count_column, m.events_column, *m.sum_columns]
        for column in filter(None, columns):
            assert column in WindowAggregate.model_fields, (m.name, column)
        if m.kind is not MetricKind.SUM:
            rows = ConversationRollup if m.over is Over.CONVERSATION else EvalRow
            assert m.source in rows.model_fields, (m.name, m.source)
            assert m.name in WindowAggregate.model_fields, m.name


def test_a_metric_missing_its_columns_is_refused() -> None:
    with pytest.raises(ValidationError, match="source and count_column"):
        Metric(name="x_rate", label="x", short="x", kind=MetricKind.RATE, source="hallucination")
    with pytest.raises(ValidationError, match="sum_columns only"):
        Metric(name="x", label="x", short="x", kind=MetricKind.SUM)
    with pytest.raises(ValidationError, match="only a rate counts events"):
        Metric(
            name="m",
            label="m",
            short="m",
            kind=MetricKind.MEAN,
            source="s",
            count_column="c",
            events_column="e",
        )


def test_window_totals_agree_with_the_aggregation() -> None:
    """``Metric.totals`` (Python, used by alerts and reports) pools as the SQL numerator does."""
    rows = [
        EvalRow(
            interaction_id=str(i),
            timestamp=T0,
            app="a",
            model="m",
            hallucination=None if i % 5 == 0 else i % 3 == 0,
            answer_refusal=i % 4 == 0,
            context_entailment=i / 10,
            input_tokens=10,
        )
        for i in range(10)
    ]
    window = WindowStats().extend(rows).result(window_start=T0, window_end=T0, app="a", model="m")
    assert METRICS_BY_NAME["hallucination_rate"].totals(window) == (3.0, 8)  # 3, 6 and 9 of the 8 answered
    assert METRICS_BY_NAME["answer_refusal_rate"].totals(window) == (3.0, 10)
    total, n = METRICS_BY_NAME["mean_context_entailment"].totals(window)
    assert (round(total, 9), n) == (4.5, 10)
    assert METRICS_BY_NAME["judge_tokens"].totals(window) == (100.0, 0)
    assert METRICS_BY_NAME["mean_grounded_precision"].totals(window) == (0.0, 0)


def test_pooled_is_the_sum_of_numerators_over_the_sum_of_denominators() -> None:
    def window(hallucinations: int, answered: int) -> WindowAggregate:
        rows = [
            EvalRow(interaction_id=str(i), timestamp=T0, app="a", model="m", hallucination=i < hallucinations)
            for i in range(answered)
        ]
        return WindowStats().extend(rows).result(window_start=T0, window_end=T0, app="a", model="m")

    rate = METRICS_BY_NAME["hallucination_rate"]
    assert pooled(rate, [window(1, 10), window(9, 10)]) == 0.5
    assert pooled(rate, [window(1, 2), window(0, 98)]) == 0.01  # not the mean of 0.5 and 0
    assert pooled(rate, []) is None
    assert pooled(METRICS_BY_NAME["interactions"], [window(1, 10), window(0, 5)]) == 15


# ---- every metric of the catalogue, through every place that shows or watches it ----------------------


def _full_window(start: datetime) -> WindowAggregate:
    """A window where every metric has a value (a skipped and an incomplete interaction included)."""
    rows = [
        EvalRow(
            interaction_id=str(i),
            timestamp=start,
            app="a",
            model="m",
            hallucination=i % 3 == 0,
            answer_refusal=i % 4 == 0,
            ground_truth_refusal=i % 5 == 0,
            context_entailment=i / 10,
            ground_truth_entails_answer=1 - i / 10,
            answer_entails_ground_truth=i / 20,
            grounded_precision=(i % 7) / 7,
            input_tokens=10 + i,
            output_tokens=3,
            cost_usd=0.001 * i,
            complete=i != 2,
            tool_calls=i % 3,
            tool_error=(i % 2 == 0) if i % 3 else None,
            no_evidence=i % 5 == 0,
            ungrounded_arguments=(i == 4) if i % 3 else None,
            citation_recall=(i % 4) / 4 if i % 2 else None,
            citation_precision=(i % 3) / 3 if i % 2 else None,
            uncited_statements=(i % 5) / 5 if i != 0 else None,
            miscited=(i % 3 == 1) if i % 2 else None,
            dangling_citation=i == 5 if i != 0 else None,
            **answerability(None, i % 5 == 0, False, i % 4 == 0).model_dump(exclude={"answerable_source"}),
        )
        for i in range(10)
    ] + [EvalRow(interaction_id="s", timestamp=start, app="a", model="m", judged=False, skip_reason="x")]
    talk = ConversationRollup(
        app="a", model="m", conversation_id="c", first_turn_at=start, last_turn_at=start, turns=3,
        judged_turns=3, hallucinated_turns=1, any_hallucinated=True, ended_unresolved=True, reasked=True,
        contradicted=True,
    )  # fmt: skip
    return WindowStats().extend(rows).count_conversations([talk]).result(
        window_start=start, window_end=start + timedelta(hours=1), app="a", model="m"
    )  # fmt: skip


def test_the_ddl_holds_every_window_column(store: ClickHouseStore) -> None:
    """The migrations' window_aggregates (deploy/clickhouse) and schemas/window.py agree, column for
    column, so every column a metric names is stored and read back."""
    rows = store.query_sync(
        "SELECT name FROM system.columns WHERE database = {db:String} AND table = 'window_aggregates'",
        {"db": store.db},
    )
    assert {r["name"] for r in rows} == {*WindowAggregate.model_fields, "computed_at", "version"}


async def test_every_metric_is_charted_alerted_on_reported_and_in_grafana(store: ClickHouseStore) -> None:
    start = T0  # on a window boundary; the store keeps its rows (no TTL)
    window = _full_window(start)
    await store.insert_window(window, start)
    queries = DashboardQueries(store)
    options = await queries.options()
    overview = await queries.overview(OverviewQuery(start=start, end=start + timedelta(hours=1)))
    [series] = overview.series
    report = render(Report(counts={}, windows=[window], alerts=[]))
    heads = ("window start", f"{start:%Y-%m-%d}")
    [header, row] = [line for line in report.splitlines() if line.startswith(heads)]
    panels = {p["title"] for p in grafana_generator().build_dashboard()["panels"]}
    served = [m["name"] for m in options.metrics]
    assert served == [m.name for m in METRICS]  # the dashboard's charts are drawn from this list
    for m in METRICS:
        value = pooled(m, [window])
        assert value is not None and (m.kind is MetricKind.SUM or m.unit or 0 <= value <= 1), m.name
        # charted: the API serves the metric and its bucket's value
        assert series.values[m.name] == [pytest.approx(value)], m.name
        # alerted on: a rule parses and fires at the window's value
        rule = AlertRules.model_validate(
            {
                "rules": [
                    {"name": "r", "metric": m.name, "op": ">=", "threshold": value, "min_interactions": 1}
                ]
            }
        ).rules[0]
        slot = Slot(window.window_start, window.window_end, observe(m.name, window))
        alert = decide(rule, "a", "m", [slot], None, None, start)
        assert alert is not None and alert.value == pytest.approx(value), m.name
        # reported: a column of the trend report, with the window's value in it
        assert m.short in header and figure(m, value) in row, m.name
        # and a panel of the Grafana dashboard
        assert m.label in panels, m.name


def test_a_sum_declares_what_one_row_adds_to_each_of_its_columns() -> None:
    with pytest.raises(ValidationError, match="per_row"):
        Metric(name="x", label="x", short="x", kind=MetricKind.SUM, sum_columns=("count",))
    with pytest.raises(ValidationError, match="per_row"):  # a row sum for another column than it names
        Metric(
            name="x", label="x", short="x", kind=MetricKind.SUM, sum_columns=("count",),
            per_row=(RowSum(column="judged"),),
        )  # fmt: skip
    with pytest.raises(ValidationError, match="per_row"):  # a rate adds no row sums
        Metric(
            name="x_rate", label="x", short="x", kind=MetricKind.RATE, source="hallucination",
            count_column="answered", per_row=(RowSum(column="count"),),
        )  # fmt: skip
    assert set(INTERACTION_SUMS) == {
        c for m in METRICS if m.kind is MetricKind.SUM and m.over is Over.INTERACTION for c in m.sum_columns
    }
    assert set(CONVERSATION_SUMS) == {"conversations"}


def test_a_window_counts_each_sum_as_its_rows_declare_it() -> None:
    """A skipped row counts as received only (its tokens, cost and incompleteness are not the judge's),
    and a judged incomplete row counts as judged and incomplete: what ``per_row`` declares, in Python
    (the aggregator) and in SQL (slices)."""
    rows = [
        EvalRow(interaction_id="1", timestamp=T0, app="a", model="m", input_tokens=10, output_tokens=4,
                cost_usd=0.25),
        EvalRow(interaction_id="2", timestamp=T0, app="a", model="m", complete=False, input_tokens=1),
        EvalRow(interaction_id="3", timestamp=T0, app="a", model="m", judged=False, skip_reason="budget",
                complete=False, input_tokens=7, cost_usd=1.0),
    ]  # fmt: skip
    window = WindowStats().extend(rows).result(window_start=T0, window_end=T0, app="a", model="m")
    figures = {m.name: pooled(m, [window]) for m in METRICS if m.kind is MetricKind.SUM}
    assert figures == {
        "interactions": 3, "judged": 2, "skipped": 1, "incomplete": 1, "judge_tokens": 15,
        "judge_cost_usd": 0.25, "conversations_closed": 0,
    }  # fmt: skip
    assert (window.input_tokens, window.output_tokens, window.skipped_by_reason) == (11, 4, {"budget": 1})
    assert INTERACTION_SUMS["incomplete"].sql("app = 'a'") == (
        "sumIf(toFloat64(1), (app = 'a') AND judged = 1 AND complete = 0)"
    )
    assert INTERACTION_SUMS["cost_usd"].sql() == "sumIf(toFloat64(cost_usd), (1) AND judged = 1)"
