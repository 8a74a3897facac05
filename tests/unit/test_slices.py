"""Slices: the mix/rate decomposition against hand-computed figures, the per-slice sums in ClickHouse
against the product's own window aggregator, and the API (breakdown, what changed, a slice's series)."""

from __future__ import annotations

import json
import random
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from pipeline.answerability import answerability
from pipeline.metrics.wilson import wilson_interval
from pipeline.slices import breakdown, decompose
from schemas.alert import Alert
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.interaction import Interaction
from schemas.metrics import METRICS, METRICS_BY_NAME, MetricKind, Over, pooled
from schemas.slices import BreakdownQuery, SliceTotals
from streams.clickhouse.slices import SliceReader, metric_sql
from streams.clickhouse.store import ClickHouseStore
from streams.windows.aggregator import WindowStats
from tests.fixtures.dashboard import client_for
from tests.fixtures.messages import EVALUATED_AT
from tests.fixtures.store import store_settings
from tests.fixtures.wall_clock import recent
from tests.integration.chdb import fresh_chdb_url

RATE = METRICS_BY_NAME["hallucination_rate"]
MEAN = METRICS_BY_NAME["mean_context_entailment"]
VOLUME = METRICS_BY_NAME["interactions"]


def totals(value: str, events: float, n: int) -> SliceTotals:
    return SliceTotals(value=value, total=events, n=n, interactions=n)


def by_value(d: Any) -> dict[str, Any]:
    return {c.value: c for c in d.contributions}


def test_decomposition_matches_the_hand_computed_split() -> None:
    # baseline: A 8/80 (0.10), B 10/20 (0.50): R0 = 0.18. current: A 10/50 (0.20), B 25/50 (0.50): R1 = 0.35
    # midpoint 0.265. A: mix (0.5 - 0.8) * (0.15 - 0.265) = 0.0345, rate (0.2 - 0.1) * 0.65 = 0.065
    #                 B: mix (0.5 - 0.2) * (0.50 - 0.265) = 0.0705, rate 0
    d = decompose(RATE, [totals("A", 8, 80), totals("B", 10, 20)], [totals("A", 10, 50), totals("B", 25, 50)])
    assert d.baseline == pytest.approx(0.18) and d.current == pytest.approx(0.35)
    assert d.change == pytest.approx(0.17)
    a, b = by_value(d)["A"], by_value(d)["B"]
    assert (a.mix, a.rate, a.contribution) == (
        pytest.approx(0.0345),
        pytest.approx(0.065),
        pytest.approx(0.0995),
    )
    assert (b.mix, b.rate, b.contribution) == (
        pytest.approx(0.0705),
        pytest.approx(0.0),
        pytest.approx(0.0705),
    )
    assert [c.value for c in d.contributions] == ["A", "B"]  # largest first
    assert (a.baseline_share, a.current_share) == (pytest.approx(0.8), pytest.approx(0.5))


def test_a_new_slice_is_all_mix_and_tops_the_list() -> None:
    # baseline v1 10/100; current v1 5/50, v2 25/50: R0 0.1, R1 0.3, midpoint 0.2
    # v1: mix (0.5 - 1) * (0.1 - 0.2) = 0.05; v2 (new: its current value both sides): 0.5 * (0.5 - 0.2) = 0.15
    d = decompose(RATE, [totals("v1", 10, 100)], [totals("v1", 5, 50), totals("v2", 25, 50)])
    v1, v2 = by_value(d)["v1"], by_value(d)["v2"]
    assert d.contributions[0].value == "v2" and v2.baseline is None and v2.current == pytest.approx(0.5)
    assert (v2.mix, v2.rate) == (pytest.approx(0.15), pytest.approx(0.0))
    assert (v1.mix, v1.rate) == (pytest.approx(0.05), pytest.approx(0.0))
    gone = decompose(RATE, [totals("v1", 5, 50), totals("v2", 25, 50)], [totals("v1", 10, 100)])
    assert by_value(gone)["v2"].contribution == pytest.approx(-0.15)  # a slice that left: all mix too


def test_contributions_always_add_up_to_the_change() -> None:
    rng = random.Random(3)
    for _ in range(200):
        names = [f"s{i}" for i in range(rng.randint(1, 6))]

        def period(names: list[str] = names) -> list[SliceTotals]:
            out = []
            for name in rng.sample(names, rng.randint(1, len(names))):
                n = rng.randint(0, 50)
                out.append(SliceTotals(value=name, total=rng.random() * n, n=n, interactions=n + 3))
            return out

        before, after = period(), period()
        for metric in (MEAN, VOLUME):
            d = decompose(metric, before, after)
            if d.change is None:
                assert d.contributions == []
                continue
            assert sum(c.contribution for c in d.contributions) == pytest.approx(d.change, abs=1e-9)
            if metric.kind is not MetricKind.SUM:
                assert all(c.mix + c.rate == pytest.approx(c.contribution) for c in d.contributions)  # type: ignore[operator]


def test_a_sum_is_not_split_and_an_empty_period_has_no_change() -> None:
    d = decompose(VOLUME, [totals("a", 10, 10)], [totals("a", 4, 4), totals("b", 9, 9)])
    assert d.change == 3 and by_value(d)["b"].contribution == 9 and by_value(d)["a"].mix is None
    empty = decompose(RATE, [], [totals("a", 1, 2)])
    assert empty.change is None and empty.contributions == [] and empty.current == 0.5


def test_breakdown_gives_wilson_intervals_for_rates_only() -> None:
    rows = breakdown(RATE, [totals("x", 3, 10), totals("y", 0, 0)])
    assert (rows[0].value, rows[0].metric) == ("x", pytest.approx(0.3))
    assert (rows[0].lower, rows[0].upper) == pytest.approx(wilson_interval(3, 10))
    assert rows[1].metric is None and rows[1].lower is None
    assert breakdown(MEAN, [totals("x", 3, 10)])[0].lower is None


def test_every_sum_metric_sums_in_sql_what_each_row_declares_it_adds() -> None:
    tokens = metric_sql(METRICS_BY_NAME["judge_tokens"], "app = 'a'")
    assert tokens == (
        "sumIf(toFloat64(input_tokens), (app = 'a') AND judged = 1) + "
        "sumIf(toFloat64(output_tokens), (app = 'a') AND judged = 1)",
        "0",
    )
    for m in METRICS:
        if m.kind is MetricKind.SUM and m.over is Over.INTERACTION:
            assert metric_sql(m)[0] == " + ".join(r.sql() for r in m.per_row), m.name
            assert [r.column for r in m.per_row] == list(m.sum_columns), m.name
            for r in m.per_row:  # fields of a row, and columns of evaluations by the same name
                assert {r.value or "judged", *(f for f, _ in r.when)} <= set(EvalRow.model_fields), m.name


def test_a_conversation_metric_has_no_per_interaction_value() -> None:
    """Conversation metrics live in the windows: per interaction they are 0 over 0 (undefined), and
    their SQL names no column evaluations lack."""
    for m in METRICS:
        if m.over is Over.CONVERSATION:
            assert metric_sql(m, "app = 'x'") == ("toFloat64(0)", "toUInt64(0)"), m.name


# ---- on chDB ----------------------------------------------------------------------------------------

T0 = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)
DAY = timedelta(days=1)


def evaluation(i: int, at: datetime, version: str | None, bad: bool, *, judged: bool = True) -> Evaluation:
    metadata = {"retriever": "bm25" if i % 3 else "dense"}
    if version is not None:
        metadata["prompt_version"] = version
    interaction = Interaction(
        interaction_id=f"i{i}", timestamp=at, app="bot", model="m", question="q",
        answer="a" * (50 if i % 2 else 700), metadata=metadata,
    )  # fmt: skip
    if not judged:
        return Evaluation(evaluated_at=EVALUATED_AT,
            interaction_id=f"i{i}", timestamp=at, app="bot", model="m", judge="lexical",
            interaction=interaction, judged=False, skip_reason="rate",
        )  # fmt: skip
    return Evaluation(evaluated_at=EVALUATED_AT,
        interaction_id=f"i{i}", timestamp=at, app="bot", model="m", judge="lexical", interaction=interaction,
        context_entailment=0.2 if bad else 0.9, hallucination=bad, answer_refusal=i % 5 == 0,
        input_tokens=10 + i % 7, output_tokens=3, cost_usd=0.001 * (i % 4), complete=i % 11 != 0,
        **answerability(None, i % 3 == 0, False, i % 5 == 0).model_dump(),
    )  # fmt: skip


def traffic() -> list[Evaluation]:
    """Day 1: v1 only, 10 % hallucinated. Day 2: v1 (10 %) and v2 (60 %), some without a version, some
    unjudged."""
    rng = random.Random(5)
    out = []
    for i in range(200):
        day = 0 if i < 100 else 1
        version: str | None = "v1" if day == 0 or i % 2 else "v2"
        if i % 17 == 0:
            version = None
        bad = rng.random() < (0.6 if version == "v2" else 0.1)
        out.append(evaluation(i, T0 + day * DAY + timedelta(minutes=i), version, bad, judged=i % 13 != 0))
    return out


@pytest.fixture()
async def store(store: ClickHouseStore) -> AsyncIterator[ClickHouseStore]:
    """The shared fixture's store with this module's rows."""
    s = store
    s.insert_evaluations_sync(traffic())
    yield s


def oracle(evaluations: list[Evaluation], dimension: str, start: datetime, end: datetime) -> dict[str, Any]:
    """Per slice, the product's window aggregator over the slice's rows (with conversations on: the rows
    hold no conversation_id, so each is a conversation of one turn)."""
    groups: dict[str, list[Evaluation]] = {}
    for e in evaluations:
        if start <= e.timestamp < end:
            meta = e.interaction.metadata if e.interaction else {}
            groups.setdefault(str(meta.get(dimension, "(none)")), []).append(e)
    return {
        value: WindowStats()
        .extend(EvalRow.from_evaluation(e) for e in rows)
        .count_conversations([])
        .result(window_start=start, window_end=end, app="bot", model="m")
        for value, rows in groups.items()
    }


async def test_per_slice_sums_in_sql_match_the_window_aggregator(store: ClickHouseStore) -> None:
    reader = SliceReader(store)
    q = BreakdownQuery(start=T0, end=T0 + 2 * DAY, metric="hallucination_rate", dimension="prompt_version")
    expected = oracle(traffic(), "prompt_version", T0, T0 + 2 * DAY)
    for metric in METRICS:
        got = {t.value: t for t in await reader.totals(metric, "prompt_version", q, T0, T0 + 2 * DAY)}
        assert set(got) == set(expected) == {"v1", "v2", "(none)"}
        for value, window in expected.items():
            total, n = metric.totals(window)
            assert got[value].total == pytest.approx(total), (metric.name, value)
            assert got[value].n == n, (metric.name, value)
            assert got[value].interactions == window.count


async def test_a_replayed_interaction_counts_once_where_its_current_row_is(store: ClickHouseStore) -> None:
    """Replayed later the same day with another time and version, an interaction leaves its old period
    and slice: the period and slice conditions apply to each interaction's current row, not to any
    stored copy (the table keeps one row per id and event day)."""
    original = traffic()[150]  # day 2, 02:30; day 2's traffic runs 01:40-03:19
    split = T0 + DAY + timedelta(hours=4)
    assert original.interaction and T0 + DAY <= original.timestamp < split
    moved = evaluation(150, T0 + DAY + timedelta(hours=5), "v9", True).model_copy(
        update={"evaluated_at": original.evaluated_at + timedelta(hours=1)}
    )
    store.insert_evaluations_sync([moved])
    reader = SliceReader(store)
    q = BreakdownQuery(
        start=T0 + DAY, end=T0 + 2 * DAY, metric="hallucination_rate", dimension="prompt_version"
    )
    early = {t.value: t.interactions for t in await reader.totals(RATE, "prompt_version", q, T0 + DAY, split)}
    late = {
        t.value: t.interactions for t in await reader.totals(RATE, "prompt_version", q, split, T0 + 2 * DAY)
    }
    assert "v9" not in early and sum(early.values()) == 99
    assert late == {"v9": 1}


async def test_the_api_breaks_down_explains_the_change_and_filters_by_slice(store: ClickHouseStore) -> None:
    client = await client_for(store)
    day1 = {"baseline_start": T0.isoformat(), "baseline_end": (T0 + DAY).isoformat()}
    day2 = {"start": (T0 + DAY).isoformat(), "end": (T0 + 2 * DAY).isoformat()}
    try:
        params = {**day2, "metric": "hallucination_rate", "dimension": "prompt_version"}
        body = await (await client.get("/dashboard/api/slices/breakdown", params=params)).json()
        expected = oracle(traffic(), "prompt_version", T0 + DAY, T0 + 2 * DAY)
        rows = {r["value"]: r for r in body["slices"]}
        assert rows["v2"]["metric"] == pytest.approx(expected["v2"].hallucination_rate)
        assert rows["v2"]["n"] == expected["v2"].answered
        assert body["period"]["interactions"] == 100
        changes = await (await client.get("/dashboard/api/slices/changes", params={**params, **day1})).json()
        assert changes["contributions"][0]["value"] == "v2"
        total = sum(c["contribution"] for c in changes["contributions"])
        assert total == pytest.approx(changes["change"]) and changes["change"] > 0.1
        # the page filtered to one slice: the overview's series from its interactions only
        sliced = {**day2, "slice": "prompt_version:v2", "rollup": "day"}
        body = await (await client.get("/dashboard/api/slices/overview", params=sliced)).json()
        (series,) = body["series"]
        assert series["values"]["interactions"] == [expected["v2"].count]
        assert series["values"]["hallucination_rate"] == [pytest.approx(expected["v2"].hallucination_rate)]
        filtered = {**params, "slice": "retriever:dense", "dimension": "answer_length"}
        body = await (await client.get("/dashboard/api/slices/breakdown", params=filtered)).json()
        dense = [
            e
            for e in traffic()
            if T0 + DAY <= e.timestamp and e.interaction and e.interaction.metadata["retriever"] == "dense"
        ]
        assert body["period"]["interactions"] == len(dense)
        assert {r["value"] for r in body["slices"]} <= {"<100", "500-1999"}
        names = await (await client.get("/dashboard/api/slices/dimensions", params=day2)).json()
        assert {"prompt_version", "retriever", "turn"} <= set(names["dimensions"])
        for bad in (
            {**params, "metric": "nope"},
            {**params, "dimension": "a b"},
            {**params, "slice": "novalue"},
        ):
            response = await client.get("/dashboard/api/slices/breakdown", params=bad)
            assert response.status == 400, bad
        assert (await client.get("/dashboard/api/slices/overview", params=day2)).status == 400  # no slice
    finally:
        await client.close()


async def test_the_drill_down_keeps_the_slice_filter(store: ClickHouseStore) -> None:
    """A point of a chart filtered to one slice opens that slice's interactions of the bucket: the same
    ones and as many as the sliced series counted there, never the whole series'."""
    client = await client_for(store)
    day2 = {"start": (T0 + DAY).isoformat(), "end": (T0 + 2 * DAY).isoformat()}
    everything = [e for e in traffic() if T0 + DAY <= e.timestamp < T0 + 2 * DAY]

    def of(version: str | None) -> set[str]:
        return {
            e.interaction_id
            for e in everything
            if e.interaction and e.interaction.metadata.get("prompt_version") == version
        }

    try:
        point = {**day2, "app": "bot", "model": "m", "limit": "1000"}
        whole = await (await client.get("/dashboard/api/bucket", params=point)).json()
        assert whole["total"] == len(everything) == 100
        assert whole["slice"] == {"app": None, "model": None, "dimensions": {}}
        for text, version in (("prompt_version:v2", "v2"), ("prompt_version:(none)", None)):
            body = await (await client.get("/dashboard/api/bucket", params={**point, "slice": text})).json()
            ids = {r["interaction_id"] for r in body["interactions"]}
            assert ids == of(version) and body["total"] == len(ids)
            assert body["slice"]["dimensions"] == dict([text.split(":")])
            assert 0 < len(ids) < 100
            series = {**day2, "slice": text, "rollup": "day"}
            sliced = await (await client.get("/dashboard/api/slices/overview", params=series)).json()
            assert sliced["series"][0]["values"]["interactions"] == [float(body["total"])]
        # worst first within the slice: v2's hallucinations lead its list
        v2 = await (
            await client.get("/dashboard/api/bucket", params={**point, "slice": "prompt_version:v2"})
        ).json()
        flags = [r["hallucination"] for r in v2["interactions"]]
        assert True in flags and flags == sorted(flags, key=lambda f: f is not True)
        for bad in ("novalue", "a b:v2", "prompt_version=v2", "prompt_version:"):
            response = await client.get("/dashboard/api/bucket", params={**point, "slice": bad})
            assert response.status == 400, bad
            assert "slice" in json.dumps(await response.json())
    finally:
        await client.close()


async def test_a_slice_overview_carries_the_alerts_about_that_slice(store: ClickHouseStore) -> None:
    def alert(aid: str, slice_: str) -> Alert:
        return Alert(
            alert_id=aid, rule="r", metric="hallucination_rate", app="bot", model="m", value=0.6,
            threshold=0.4, op=">", windows=1, interactions=20, window_start=T0 + DAY,
            window_end=T0 + DAY + timedelta(hours=1), message=aid, slice=slice_,
            fired_at=T0 + DAY + timedelta(hours=1),
        )  # fmt: skip

    for aid, slice_ in (
        ("v2", "prompt_version=v2"),
        ("v2-dense", "prompt_version=v2, retriever=dense"),
        ("v1", "prompt_version=v1"),
        ("v20", "prompt_version=v20"),
        ("whole", ""),
    ):
        await store.insert_alert(alert(aid, slice_))
    client = await client_for(store)
    try:
        params = {"start": T0.isoformat(), "end": (T0 + 2 * DAY).isoformat(), "slice": "prompt_version:v2"}
        body = await (await client.get("/dashboard/api/slices/overview", params=params)).json()
        assert sorted(a["alert_id"] for a in body["alerts"]) == ["v2", "v2-dense"]
        other = await (
            await client.get("/dashboard/api/slices/overview", params={**params, "model": "x"})
        ).json()
        assert other["alerts"] == []
    finally:
        await client.close()


def test_report_by_a_dimension_and_what_changed(capsys: pytest.CaptureFixture[str]) -> None:
    from groundwatch import cli

    url = fresh_chdb_url()
    s = ClickHouseStore.open_sync(store_settings(url))
    # the command's period ends at the wall clock's now: the traffic's second day moves to the day before
    # yesterday (a day before now is then past all of it, whatever the time of day)
    shift = recent(start_of="day", days=2) - (T0 + DAY)
    s.insert_evaluations_sync([e.model_copy(update={"timestamp": e.timestamp + shift}) for e in traffic()])
    s.close()
    since = (T0 + DAY + shift).isoformat()
    # --since is a start; the period ends now, so the comparison is the same span shifted back a day
    assert cli.main(["report", "--clickhouse", url, "--by", "prompt_version", "--since", since]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("hallucination_rate by prompt_version") and "over 100 interactions" in out[0]
    assert {line.split()[0] for line in out[2:]} == {"v1", "v2", "(none)"}
    argv = ["report", "--clickhouse", url, "--by", "prompt_version", "--since", since, "--compare-to", "1d"]
    assert cli.main([*argv, "--json"]) == 0
    body = json.loads(capsys.readouterr().out)
    # the period is day 2 until now; a day earlier, the baseline holds day 1 and day 2
    assert (body["baseline"]["interactions"], body["current"]["interactions"]) == (200, 100)
    assert body["contributions"][0]["value"] == "v2"
    assert cli.main(argv) == 0
    text = capsys.readouterr().out.splitlines()
    assert text[0].startswith("what changed in hallucination_rate by prompt_version") and text[2].startswith(
        "v2"
    )
    # a dimension neither configured nor stored (a typo) is one line naming the ones there are
    assert cli.main(["report", "--clickhouse", url, "--by", "prompt_verison", "--since", since]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1 and "'prompt_verison' is not a dimension" in err[0] and "prompt_version" in err[0]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--compare-to", "7d"], "--compare-to goes with --by DIMENSION"),
        (["--by", "x", "--compare-to", "soon"], "--compare-to: expected a duration"),
        (["--by", "x", "--metric", "nope"], "--metric: not a metric"),
        (["--by", "a b"], "dimension"),
    ],
)
def test_report_by_refuses_bad_arguments_in_one_line(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from groundwatch import cli

    assert cli.main(["report", "--clickhouse", fresh_chdb_url(), *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1 and message in captured.err


async def test_compare_two_prompt_versions_of_one_app(store: ClickHouseStore) -> None:
    """Compare's sides are the one slice filter: app and a dimension each; every metric per side equals
    the product's window aggregator over that side's rows, and v2's higher hallucination rate is
    significant by the alert code's Fisher test."""
    day2 = {"start": (T0 + DAY).isoformat(), "end": (T0 + 2 * DAY).isoformat()}
    expected = oracle(traffic(), "prompt_version", T0 + DAY, T0 + 2 * DAY)
    sides = [("a", "app:bot"), ("a", "prompt_version:v1"), ("b", "app:bot"), ("b", "prompt_version:v2")]
    client = await client_for(store)
    try:
        response = await client.get("/dashboard/api/compare", params=[*day2.items(), *sides])
        assert response.status == 200, await response.text()
        body = await response.json()
        assert body["a"] == {"app": "bot", "model": None, "dimensions": {"prompt_version": "v1"}}
        assert body["b"]["dimensions"] == {"prompt_version": "v2"}
        metrics = {m["name"]: m for m in body["metrics"]}
        for m in METRICS:
            for side, version in (("a", "v1"), ("b", "v2")):
                assert metrics[m.name][side] == pytest.approx(pooled(m, [expected[version]])), (m.name, side)
        h = metrics["hallucination_rate"]
        assert h["test"] == "fisher" and h["difference"] > 0.3 and h["significant"]
        assert h["a_n"] == expected["v1"].answered and h["b_n"] == expected["v2"].answered
        # the interactions without a version are a slice too; another app's are none of them
        none = [("a", "prompt_version:(none)"), ("b", "app:other"), ("b", "prompt_version:v2")]
        body = await (await client.get("/dashboard/api/compare", params=[*day2.items(), *none])).json()
        metrics = {m["name"]: m for m in body["metrics"]}
        assert metrics["interactions"]["a"] == expected["(none)"].count > 0
        assert metrics["interactions"]["b"] == 0
    finally:
        await client.close()
