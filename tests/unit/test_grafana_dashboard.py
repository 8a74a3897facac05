"""The Grafana dashboard (deploy/grafana): generated, not hand-edited, and every query it holds runs on the
real schema (embedded chDB) with its macros expanded as Grafana and the ClickHouse plugin would, returning
exactly the pooled figures of the interactions behind the windows."""

from __future__ import annotations

import asyncio
import importlib.util
import json
import math
import random
from collections import defaultdict
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from pipeline.answerability import answerability
from schemas.alert import Alert
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow, call_latencies
from schemas.latency import histogram, quantile
from schemas.metrics import METRICS, MetricKind
from schemas.results import JudgeCall
from streams.clickhouse.dead_letter_rows import DEAD_LETTER_COLUMNS
from streams.clickhouse.store import ClickHouseStore
from streams.windows.aggregator import WindowStats
from tests.fixtures.messages import EVALUATED_AT
from tests.fixtures.store import store_settings
from tests.unit.grafana_macros import QueryContext, Variable, expand

ROOT = Path(__file__).resolve().parents[2]
GRAFANA = ROOT / "deploy" / "grafana"
Z = 1.959963984540054

APPS = ("support-bot", "docs-qa")
MODELS = ("gpt-4o-mini", "llama-3.1-8b")
#: the second app runs only the second model: the model variable must follow the app selection
PAIRS = ((APPS[0], MODELS[0]), (APPS[0], MODELS[1]), (APPS[1], MODELS[1]))
BASE = datetime(2025, 3, 3, 8, 0, tzinfo=UTC)
WINDOW = timedelta(minutes=5)
WINDOW_STARTS = [BASE + i * timedelta(minutes=15) for i in range(16)]  # 4 hours
STAGES = ("nli", "refusal", "sink")


def load_generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location("groundwatch_grafana_generate", GRAFANA / "generate.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# ---- the checked-in files ------------------------------------------------------------------------------


def test_checked_in_dashboard_is_what_generate_py_produces() -> None:
    gen = load_generator()
    on_disk = (GRAFANA / "dashboards" / "groundwatch.json").read_text(encoding="utf-8")
    assert on_disk == gen.render(), "stale dashboard JSON: run python deploy/grafana/generate.py"
    assert gen.main(["--check"]) == 0


def test_every_metric_has_a_panel_and_every_rate_a_wilson_band() -> None:
    dashboard = load_generator().build_dashboard()
    sqls = {p["title"]: p["targets"][0]["rawSql"] for p in dashboard["panels"] if p["type"] != "row"}
    for m in METRICS:
        assert m.label in sqls, m.name
        assert f"AS {m.name}\n" in sqls[m.label]
    banded = [p for p in dashboard["panels"] if p.get("repeat") == "series"]
    rates = [m.name for m in METRICS if m.kind is MetricKind.RATE]
    assert [[r for r in rates if f"k / n AS {r},\n" in p["targets"][0]["rawSql"]] for p in banded] == [
        [r] for r in rates
    ]
    for p in banded:
        upper = next(o for o in p["fieldConfig"]["overrides"] if o["matcher"]["options"] == "wilson_upper")
        assert {"id": "custom.fillBelowTo", "value": "wilson_lower"} in upper["properties"]
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    uids = {p["datasource"]["uid"] for p in dashboard["panels"] if "datasource" in p}
    provisioned = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "clickhouse.yaml").read_text())
    assert uids == {provisioned["datasources"][0]["uid"]}


def test_provisioning_files() -> None:
    ds = yaml.safe_load((GRAFANA / "provisioning" / "datasources" / "clickhouse.yaml").read_text())
    source = ds["datasources"][0]
    assert source["type"] == "grafana-clickhouse-datasource"
    for key in ("host", "port", "protocol", "username", "defaultDatabase"):
        assert str(source["jsonData"][key]).startswith("$"), key  # from the environment, never literal
    assert str(source["secureJsonData"]["password"]).startswith("$")
    providers = yaml.safe_load((GRAFANA / "provisioning" / "dashboards" / "groundwatch.yaml").read_text())
    path = providers["providers"][0]["options"]["path"]
    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())
    grafana = compose["services"]["grafana"]
    assert any(v.endswith(f":{path}:ro") and v.startswith("./grafana/dashboards") for v in grafana["volumes"])
    assert all(p.startswith("127.0.0.1:") for p in grafana["ports"])
    assert ":" in grafana["image"] and not grafana["image"].endswith(":latest")
    assert grafana["environment"]["GF_INSTALL_PLUGINS"].startswith("grafana-clickhouse-datasource ")
    assert {"redpanda", "clickhouse", "worker"} <= set(compose["services"])


# ---- data written through the product's own code ------------------------------------------------------


@dataclass
class Data:
    store: ClickHouseStore
    evaluations: list[tuple[datetime, Evaluation]]  # (window start, evaluation)
    dead_letters: list[tuple[datetime, str, str, str]]  # (failed_at, stage, app, model), deduplicated
    alerts: list[Alert]


def _maybe(rng: random.Random, value: Any, none_share: float) -> Any:
    return None if rng.random() < none_share else value


def _evaluation(rng: random.Random, i: int, ts: datetime, app: str, model: str, lexical: bool) -> Evaluation:
    if rng.random() < 0.1:  # skipped by sampling: counted, never scored (the rates leave it out)
        reason = rng.choice(["sampled_out:default", "budget:cost_per_day"])
        return Evaluation(interaction_id=f"{app}-{model}-{i}", timestamp=ts, app=app, model=model,
                          evaluated_at=EVALUATED_AT,
                          judge="openai", judged=False, skip_reason=reason)  # fmt: skip
    refusal = _maybe(rng, rng.random() < 0.12, 0.05)
    ctx = _maybe(rng, round(rng.random(), 3), 0.1)
    calls = [] if lexical else [
        JudgeCall(stage="nli", judge="openai", model="gpt-4o-mini", latency_ms=rng.lognormvariate(6.5, 0.6),
                  cached=rng.random() < 0.15, input_tokens=400, output_tokens=60)
        for _ in range(rng.randint(1, 4))
    ]  # fmt: skip
    tool_calls = rng.randint(0, 3)
    gt_refusal = _maybe(rng, rng.random() < 0.3, 0.2)
    answerable = answerability(None, gt_refusal, rng.random() < 0.2, refusal)
    return Evaluation(
        evaluated_at=EVALUATED_AT,
        interaction_id=f"{app}-{model}-{i}",
        timestamp=ts,
        app=app,
        model=model,
        judge="lexical" if lexical else "openai",
        tool_calls=tool_calls,
        tool_error=rng.random() < 0.2 if tool_calls else None,
        ungrounded_arguments=rng.random() < 0.1 if tool_calls else None,
        no_evidence=None if refusal is not False else rng.random() < 0.15,
        context_entailment=ctx,
        ground_truth_entails_answer=_maybe(rng, round(rng.random(), 3), 0.3),
        answer_entails_ground_truth=_maybe(rng, round(rng.random(), 3), 0.3),
        answer_refusal=refusal,
        ground_truth_refusal=gt_refusal,
        grounded_precision=_maybe(rng, round(rng.random(), 3), 0.15),
        hallucination=None if refusal is not False or ctx is None else ctx < 0.5,
        calls=calls,
        input_tokens=sum(c.input_tokens for c in calls),
        output_tokens=sum(c.output_tokens for c in calls),
        cost_usd=round(0.0004 * len(calls), 6),
        complete=rng.random() > 0.05,
        **_citation_figures(rng, refusal),
        **answerable.model_dump(),
    )


def _citation_figures(rng: random.Random, refusal: bool | None) -> dict[str, Any]:
    """An answer that cites (about half of those not refusals) has citation figures; others none."""
    if refusal is not False or rng.random() < 0.5:
        return {}
    cited = rng.random() < 0.9  # some citing answers cite only passages that do not exist
    dangling = rng.randint(0, 1) if rng.random() < 0.3 else 0
    return {
        "citation_recall": round(rng.random(), 3) if cited else None,
        "citation_precision": round(rng.random(), 3) if cited else None,
        "uncited_statements": round(rng.random(), 3),
        "miscited": rng.random() < 0.2 if cited else None,
        "dangling_citations": dangling,
        "dangling_citation": dangling > 0,
    }


def _build(store: ClickHouseStore) -> Data:
    rng = random.Random(20250303)
    for table in ("window_aggregates", "dead_letters", "alerts"):
        # keep replaced rows unmerged, so only queries that read with FINAL count each row once
        store.client.command(f"SYSTEM STOP MERGES {store.db}.{table}")
    evaluations: list[tuple[datetime, Evaluation]] = []
    n = 0
    for app, model in PAIRS:
        for w, start in enumerate(WINDOW_STARTS):
            lexical = (app, model) == PAIRS[2] and w % 4 == 0  # windows without a judge call
            batch = []
            for _ in range(rng.randint(6, 14)):
                n += 1
                ts = start + timedelta(seconds=rng.uniform(0, WINDOW.total_seconds() - 1))
                batch.append(_evaluation(rng, n, ts, app, model, lexical))
            store.insert_evaluations_sync(batch)
            evaluations += [(start, e) for e in batch]
            # each interaction has no conversation_id: a conversation of one turn
            stats = WindowStats().extend(EvalRow.from_evaluation(e) for e in batch).count_conversations([])
            window = stats.result(window_start=start, window_end=start + WINDOW, app=app, model=model)
            if w == 3:  # an earlier computation of the same window, replaced (read with FINAL)
                stale = WindowStats().extend(EvalRow.from_evaluation(e) for e in batch[:2])
                asyncio.run(store.insert_window(
                    stale.result(window_start=start, window_end=start + WINDOW, app=app, model=model),
                    datetime(2025, 3, 3, tzinfo=UTC),
                ))  # fmt: skip
            asyncio.run(store.insert_window(window, datetime.now(UTC)))

    letters: list[tuple[datetime, str, str, str]] = []
    rows = []
    for i in range(40):
        failed_at = BASE + timedelta(minutes=rng.uniform(0, 240))
        app, model = rng.choice([*PAIRS, ("", "")])
        stage = rng.choice(STAGES)
        row = [f"{i:064x}", failed_at, stage, "JudgeError", "timeout", "nli", None, app, model, 120, 0]
        rows.append(row)
        letters.append((failed_at, stage, app, model))
    store.client.insert(f"{store.db}.dead_letters", rows, column_names=DEAD_LETTER_COLUMNS)
    # redelivered letters, written again later: each replaces its own row
    store.client.insert(f"{store.db}.dead_letters", rows[::10], column_names=DEAD_LETTER_COLUMNS)

    alerts = []
    for (app, model), w in zip(PAIRS, (5, 2, 11), strict=True):
        start = WINDOW_STARTS[w]
        alert = Alert(
            alert_id=f"hallucination-high:{app}:{model}:{start.isoformat()}",
            rule="hallucination-high",
            metric="hallucination_rate",
            app=app,
            model=model,
            value=0.41,
            threshold=0.3,
            op=">",
            windows=3,
            interactions=30,
            window_start=start - 2 * timedelta(minutes=15),
            window_end=start + WINDOW,
            message="hallucination_rate 0.410 > 0.3 over the last 3 windows (30 interactions)",
            fired_at=start + WINDOW,
        )
        asyncio.run(store.insert_alert(alert))
        asyncio.run(store.insert_alert(alert))  # a re-evaluation writes the same alert again
        alerts.append(alert)
    return Data(store, evaluations, letters, alerts)


@pytest.fixture(scope="module")
def data() -> Iterator[Data]:
    store = ClickHouseStore.open_sync(store_settings())
    try:
        yield _build(store)
    finally:
        store.close()


# ---- expected figures, straight from the interactions ---------------------------------------------------


def _rate(values: list[Any]) -> float | None:
    known = [float(v) for v in values if v is not None]
    return sum(known) / len(known) if known else None


def _cv_hallucinated(e: Evaluation) -> bool | None:
    """A conversation of one turn with a hallucinated answer; None (not counted) when it was not judged."""
    return bool(e.hallucination) if e.judged else None


def _cv_unresolved(e: Evaluation) -> bool | None:
    return bool(e.answer_refusal or e.hallucination) if e.judged else None


EXPECTED: dict[str, Callable[[list[Evaluation]], float | None]] = {
    "hallucination_rate": lambda es: _rate([e.hallucination for e in es]),
    "answer_refusal_rate": lambda es: _rate([e.answer_refusal for e in es]),
    "ground_truth_refusal_rate": lambda es: _rate([e.ground_truth_refusal for e in es]),
    "mean_context_entailment": lambda es: _rate([e.context_entailment for e in es]),
    "mean_ground_truth_entails_answer": lambda es: _rate([e.ground_truth_entails_answer for e in es]),
    "mean_answer_entails_ground_truth": lambda es: _rate([e.answer_entails_ground_truth for e in es]),
    "mean_grounded_precision": lambda es: _rate([e.grounded_precision for e in es]),
    "mean_tool_calls": lambda es: _rate([e.tool_calls for e in es]),
    "tool_error_rate": lambda es: _rate([e.tool_error for e in es]),
    "no_evidence_rate": lambda es: _rate([e.no_evidence for e in es]),
    "ungrounded_arguments_rate": lambda es: _rate([e.ungrounded_arguments for e in es]),
    "mean_citation_recall": lambda es: _rate([e.citation_recall for e in es]),
    "mean_citation_precision": lambda es: _rate([e.citation_precision for e in es]),
    "mean_uncited_statements": lambda es: _rate([e.uncited_statements for e in es]),
    "miscited_rate": lambda es: _rate([e.miscited for e in es]),
    "dangling_citation_rate": lambda es: _rate([e.dangling_citation for e in es]),
    "over_refusal_rate": lambda es: _rate([e.over_refusal for e in es]),
    "answered_unanswerable_rate": lambda es: _rate([e.answered_unanswerable for e in es]),
    "reject_recall": lambda es: _rate([e.refused_unanswerable for e in es]),
    "reject_precision": lambda es: _rate([e.justified_refusal for e in es]),
    "answerable_recall": lambda es: _rate([e.answered_answerable for e in es]),
    "answerable_precision": lambda es: _rate([e.justified_answer for e in es]),
    "interactions": lambda es: float(len(es)),
    "judged": lambda es: float(sum(e.judged for e in es)),
    "skipped": lambda es: float(sum(not e.judged for e in es)),
    "incomplete": lambda es: float(sum(not e.complete for e in es)),
    "judge_tokens": lambda es: float(sum(e.input_tokens + e.output_tokens for e in es)),
    "judge_cost_usd": lambda es: sum(e.cost_usd for e in es),
    # every interaction is a conversation of one turn (no conversation_id); a skipped one has no verdict
    "conversation_hallucinated_rate": lambda es: _rate([_cv_hallucinated(e) for e in es]),
    "conversation_unresolved_rate": lambda es: _rate([_cv_unresolved(e) for e in es]),
    "conversation_reask_rate": lambda es: _rate([False for _ in es]),
    "conversation_contradiction_rate": lambda es: _rate([False for _ in es]),
    "mean_turns_per_conversation": lambda es: _rate([1 for _ in es]),
    "conversations_closed": lambda es: float(len(es)),
}
RATE_FLAGS: dict[str, Callable[[Evaluation], bool | None]] = {
    "hallucination_rate": lambda e: e.hallucination,
    "answer_refusal_rate": lambda e: e.answer_refusal,
    "ground_truth_refusal_rate": lambda e: e.ground_truth_refusal,
    # conversations of one turn (no conversation_id): a skipped one has no verdict (not counted), but
    # counts in the rates read from texts
    "conversation_hallucinated_rate": lambda e: _cv_hallucinated(e),
    "conversation_unresolved_rate": lambda e: _cv_unresolved(e),
    "conversation_reask_rate": lambda e: False,
    "conversation_contradiction_rate": lambda e: False,
    "tool_error_rate": lambda e: e.tool_error,
    "no_evidence_rate": lambda e: e.no_evidence,
    "ungrounded_arguments_rate": lambda e: e.ungrounded_arguments,
    "miscited_rate": lambda e: e.miscited,
    "dangling_citation_rate": lambda e: e.dangling_citation,
    "over_refusal_rate": lambda e: e.over_refusal,
    "answered_unanswerable_rate": lambda e: e.answered_unanswerable,
    "reject_recall": lambda e: e.refused_unanswerable,
    "reject_precision": lambda e: e.justified_refusal,
    "answerable_recall": lambda e: e.answered_answerable,
    "answerable_precision": lambda e: e.justified_answer,
}


def wilson(k: int, n: int) -> tuple[float, float]:
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def _bucket(ts: datetime, seconds: int) -> datetime:
    epoch = int(ts.timestamp())
    return datetime.fromtimestamp(epoch - epoch % seconds, tz=UTC)


@dataclass
class Scenario:
    name: str
    interval: int
    apps: list[str] | None  # None: "All"
    models: list[str] | None
    start: datetime = BASE - timedelta(hours=1)
    end: datetime = BASE + timedelta(hours=5)

    def selected(self, app: str, model: str) -> bool:
        return (self.apps is None or app in self.apps) and (self.models is None or model in self.models)

    def in_range(self, ts: datetime) -> bool:
        return int(self.start.timestamp()) <= ts.timestamp() <= int(self.end.timestamp())


SCENARIOS = [
    Scenario("all, windows", 300, None, None),
    Scenario("all, hourly", 3600, None, None),
    Scenario("one app, half-hourly", 1800, [APPS[1]], None),
    Scenario("one model, hourly", 3600, None, [MODELS[0]]),
    Scenario("two models picked, hourly", 3600, [APPS[0]], list(MODELS)),
    Scenario("one app and model, 2 h range", 900, [APPS[0]], [MODELS[1]], BASE, BASE + timedelta(hours=2)),
]


def buckets(data: Data, s: Scenario) -> dict[tuple[datetime, str, str], list[Evaluation]]:
    out: dict[tuple[datetime, str, str], list[Evaluation]] = defaultdict(list)
    for start, e in data.evaluations:
        if s.selected(e.app, e.model) and s.in_range(start):
            out[(_bucket(start, s.interval), e.app, e.model)].append(e)
    return out


# ---- running the dashboard's SQL ----------------------------------------------------------------------


def run(data: Data, sql: str, ctx: QueryContext) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    expanded = expand(sql, ctx).replace("groundwatch.", f"{data.store.db}.")
    result = data.store.client.query(expanded)
    assert result.result_rows, f"no rows from:\n{expanded}"
    return list(result.column_names), [t.name for t in result.column_types], list(result.result_rows)


def utc_naive(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def context(data: Data, s: Scenario, dashboard: dict[str, Any]) -> QueryContext:
    """Resolve the template variables in order, each from its own query (as Grafana does on load)."""
    ctx = QueryContext(start=s.start, end=s.end, interval_seconds=s.interval)
    selections = {"app": s.apps, "model": s.models, "series": None}
    for var in dashboard["templating"]["list"]:
        _, types, rows = run(data, var["query"]["rawSql"], ctx)
        assert types == ["String"] or types == ["LowCardinality(String)"], (var["name"], types)
        options = [r[0] for r in rows]
        assert options, var["name"]
        ctx.variables[var["name"]] = Variable(var["name"], options, selections[var["name"]])
    return ctx


def assert_time_series(
    names: list[str], types: list[str], rows: list[tuple[Any, ...]], labels: list[str]
) -> None:
    assert rows, "no rows"
    assert names[0] == "time" and types[0].startswith("DateTime"), (names, types)
    assert names[1 : 1 + len(labels)] == labels
    for t in types[1 : 1 + len(labels)]:
        assert t in ("String", "LowCardinality(String)"), types
    for t in types[1 + len(labels) :]:
        assert t in ("Float64", "Nullable(Float64)"), types
    times = [r[0] for r in rows]
    assert times == sorted(times), "a time series frame must be sorted by time"


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads((GRAFANA / "dashboards" / "groundwatch.json").read_text(encoding="utf-8"))


def panels(dashboard: dict[str, Any]) -> list[dict[str, Any]]:
    return [p for p in dashboard["panels"] if p["type"] != "row"]


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_variables_list_what_is_selectable(data: Data, dashboard: dict[str, Any], s: Scenario) -> None:
    ctx = context(data, s, dashboard)
    assert ctx.variables["app"].options == sorted(APPS)
    assert ctx.variables["model"].options == sorted({m for a, m in PAIRS if s.apps is None or a in s.apps})
    assert ctx.variables["series"].options == sorted(f"{a} / {m}" for a, m in PAIRS if s.selected(a, m))


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_metric_panels_pool_the_interactions_exactly(
    data: Data, dashboard: dict[str, Any], s: Scenario
) -> None:
    ctx = context(data, s, dashboard)
    expected_buckets = buckets(data, s)
    by_name = {m.name: m for m in METRICS}
    checked = 0
    for panel in panels(dashboard):
        if "repeat" in panel:
            continue
        sql = panel["targets"][0]["rawSql"]
        names, types, rows = run(data, sql, ctx)
        value_names = names[3:]
        if names[1] == "stage":
            continue  # dead letters: their own test
        assert_time_series(names, types, rows, ["app", "model"])
        got = {(utc_naive(r[0]), r[1], r[2]): r[3:] for r in rows}
        for app, model in {(k[1], k[2]) for k in got}:
            assert s.selected(app, model), (panel["title"], app, model)
        if value_names[0] in by_name:
            metric = by_name[value_names[0]]
            want = {k: EXPECTED[metric.name](es) for k, es in expected_buckets.items()}
            want = {k: v for k, v in want.items() if v is not None}
            assert set(got) == set(want), panel["title"]
            for k, v in want.items():
                assert got[k][0] == pytest.approx(v, rel=1e-9, abs=1e-12), (panel["title"], k)
                if metric.kind is not MetricKind.SUM and metric.unit == "":
                    assert 0.0 <= got[k][0] <= 1.0
        else:
            assert value_names == ["judge_latency_p50_ms", "judge_latency_p95_ms"], value_names
            want_latency = {}
            for k, es in expected_buckets.items():
                counts = histogram(x for e in es for x in call_latencies(e))
                if sum(counts):
                    want_latency[k] = (quantile(counts, 0.5), quantile(counts, 0.95))
            assert set(got) == set(want_latency)
            for k, (p50, p95) in want_latency.items():
                assert got[k] == pytest.approx((p50, p95), rel=1e-9), k
                assert 0 < got[k][0] <= got[k][1]
        checked += 1
    assert checked == len(METRICS) + 1  # every metric, and the latency panel


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_wilson_band_panels_per_app_and_model(data: Data, dashboard: dict[str, Any], s: Scenario) -> None:
    ctx = context(data, s, dashboard)
    expected_buckets = buckets(data, s)
    banded = [p for p in panels(dashboard) if p.get("repeat") == "series"]
    assert banded
    for panel in banded:
        for series in ctx.variables["series"].values():
            app, model = series.split(" / ")
            repeated = QueryContext(
                ctx.start, ctx.end, ctx.interval_seconds, ctx.variables, {"series": series}
            )
            names, types, rows = run(data, panel["targets"][0]["rawSql"], repeated)
            assert_time_series(names, types, rows, [])
            rate_name = names[1]
            flag = RATE_FLAGS[rate_name]
            want = {}
            for (t, a, m), es in expected_buckets.items():
                known = [flag(e) for e in es if flag(e) is not None]
                if a == app and m == model and known:
                    k, n = sum(bool(x) for x in known), len(known)
                    want[t] = (k / n, *wilson(k, n))
            got = {utc_naive(r[0]): r[1:] for r in rows}
            assert set(got) == set(want), (panel["title"], series)
            for t, (rate, lower, upper) in want.items():
                assert got[t] == pytest.approx((rate, lower, upper), rel=1e-9, abs=1e-12), (series, t)
                assert 0.0 <= got[t][1] <= got[t][0] <= got[t][2] <= 1.0


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_dead_letters_panel(data: Data, dashboard: dict[str, Any], s: Scenario) -> None:
    ctx = context(data, s, dashboard)
    panel = next(p for p in panels(dashboard) if p["title"] == "Dead letters by stage")
    names, types, rows = run(data, panel["targets"][0]["rawSql"], ctx)
    assert_time_series(names, types, rows, ["stage"])
    want: dict[tuple[datetime, str], float] = defaultdict(float)
    for failed_at, stage, app, model in data.dead_letters:
        unnamed = app == "" and model == ""
        if (unnamed or s.selected(app, model)) and s.in_range(failed_at):
            want[(_bucket(failed_at, s.interval), stage)] += 1
    assert {(utc_naive(r[0]), r[1]): r[2] for r in rows} == dict(want)


@pytest.mark.parametrize("s", SCENARIOS, ids=lambda s: s.name)
def test_alert_annotations(data: Data, dashboard: dict[str, Any], s: Scenario) -> None:
    ctx = context(data, s, dashboard)
    ours = [
        a for a in dashboard["annotations"]["list"] if a.get("datasource", {}).get("uid") != "-- Grafana --"
    ]
    assert len(ours) == 1
    names, types, rows = run(data, ours[0]["target"]["rawSql"], ctx)
    assert names == ["time", "text", "tags"]
    assert types[0].startswith("DateTime") and types[1] == "String"
    want = sorted(
        (a.window_end, f"{a.app} / {a.model}: {a.message}", a.rule)
        for a in data.alerts
        if s.selected(a.app, a.model) and s.in_range(a.window_end)
    )
    assert [(utc_naive(r[0]), r[1], r[2]) for r in rows] == want
    if s.apps is None and s.models is None:
        assert len(rows) == len(data.alerts)


def test_readme_read_only_user_sql_parses(data: Data) -> None:
    """chDB has no access management to run it on; ClickHouse's own parser at least checks the syntax."""
    readme = (GRAFANA / "README.md").read_text(encoding="utf-8")
    block = readme.split("```sql\n", 1)[1].split("```", 1)[0]
    statements = [s.strip() for s in block.split(";") if s.strip()]
    assert [s.split()[0] for s in statements] == ["CREATE", "CREATE", "GRANT"]
    assert "readonly = 1" in statements[0] and "max_execution_time CHANGEABLE_IN_READONLY" in statements[0]
    for sql in statements:
        formatted = data.store.query_sync("SELECT formatQuery({q:String}) AS f", {"q": sql})[0]["f"]
        assert formatted.split()[0] == sql.split()[0]


def test_the_sql_file_pools_every_metric_over_its_own_denominator(data: Data) -> None:
    """deploy/dashboards/groundwatch.sql's pooled query (generated from the catalogue) gives, per app and
    model, exactly the figure of the interactions behind the windows: a mean over the interactions it
    scored (not weighted by every interaction, skipped and unscored ones included)."""
    text = (ROOT / "deploy" / "dashboards" / "groundwatch.sql").read_text(encoding="utf-8")
    assert text == load_generator().render_sql(text), "stale: run python deploy/grafana/generate.py"
    pooled = load_generator().pooled_sql("groundwatch").replace("$__timeFilter(window_start)", "1")
    result = data.store.client.query(pooled.rstrip(";").replace("groundwatch.", f"{data.store.db}."))
    names = list(result.column_names)
    assert names[2:-1] == [m.name for m in METRICS]
    by_pair: dict[tuple[str, str], list[Evaluation]] = defaultdict(list)
    for _, e in data.evaluations:
        by_pair[(e.app, e.model)].append(e)
    assert {(r[0], r[1]) for r in result.result_rows} == set(by_pair)
    for row in result.result_rows:
        got = dict(zip(names, row, strict=True))
        for m in METRICS:
            want = EXPECTED[m.name](by_pair[(row[0], row[1])])
            assert got[m.name] == pytest.approx(want, rel=1e-9, abs=1e-12), (row[0], row[1], m.name)
