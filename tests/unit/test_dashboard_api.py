"""The dashboard's JSON API on real chDB: pooled figures, Wilson bands, bad parameters, auth."""

from __future__ import annotations

import base64
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import pytest
from aiohttp.test_utils import TestClient, TestServer
from pydantic import SecretStr

from pipeline.metrics.wilson import wilson_interval
from schemas.alert import Alert
from schemas.errors import DashboardConfigError
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.interaction import Interaction
from schemas.results import HypothesisResult, PairResult, StatementVerdict
from schemas.settings import DashboardSettings, Settings
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.api import root_app
from streams.dashboard.auth import require_credentials
from streams.windows.aggregator import WindowStats
from tests.fixtures.dashboard import client_for
from tests.fixtures.messages import EVALUATED_AT

T0 = datetime(2026, 11, 20, 10, 0, tzinfo=UTC)
MINUTE = timedelta(minutes=1)
TOKEN = "s3cret-dashboard-token"


def evaluation(i: int, at: datetime, *, model: str = "m1", hallucination: bool | None = False) -> Evaluation:
    interaction = Interaction(
        interaction_id=f"i{i}", timestamp=at, app="bot", model=model, question="When?",
        contexts=[{"text": "It opened in 1990.", "document": "doc.md"}], answer="It opened in 1991.",
        ground_truth="1990",
    )  # fmt: skip
    statement = StatementVerdict(
        statement="It opened in 1991.", verdict="contradicted" if hallucination else "entailed",
        reason="the premise says 1990", tag="number", score=0.0 if hallucination else 1.0,
    )  # fmt: skip
    return Evaluation(evaluated_at=EVALUATED_AT,
        interaction_id=f"i{i}", timestamp=at, app="bot", model=model, judge="lexical",
        context_entailment=0.1 if hallucination else 0.9, hallucination=hallucination, answer_refusal=False,
        grounded_precision=0.0 if hallucination else 1.0, input_tokens=10, output_tokens=2, cost_usd=0.001,
        pairs=[PairResult(pair="context_answer", score=statement.score,
                          hypotheses=[HypothesisResult(hypothesis=statement.statement, statements=[statement],
                                                       score=statement.score)])],
        interaction=interaction,
    )  # fmt: skip


@pytest.fixture()
async def store(store: ClickHouseStore) -> AsyncIterator[ClickHouseStore]:
    """The shared fixture's store with this module's rows."""
    s = store
    # two 1-minute windows of m1 (3 of 10 hallucinated, then 1 of 4) and one of m2
    plan = [(T0, "m1", 10, 3), (T0 + MINUTE, "m1", 4, 1), (T0, "m2", 5, 0)]
    n = 0
    for start, model, count, bad in plan:
        evals = [
            evaluation(n + k, start + timedelta(seconds=k), model=model, hallucination=k < bad)
            for k in range(count)
        ]
        n += count
        s.insert_evaluations_sync(evals)
        window = WindowStats().extend(EvalRow.from_evaluation(e) for e in evals)
        await s.insert_window(
            window.result(window_start=start, window_end=start + MINUTE, app="bot", model=model), T0
        )
    await s.insert_alert(
        Alert(alert_id="a1", rule="halluc", metric="hallucination_rate", app="bot", model="m1", value=0.3,
              threshold=0.2, op=">", windows=1, interactions=10, window_start=T0, window_end=T0 + MINUTE,
              message="hallucination_rate 0.3 > 0.2", fired_at=T0 + MINUTE)
    )  # fmt: skip
    yield s


def window_range(minutes: int = 2) -> dict[str, str]:
    return {"start": T0.isoformat(), "end": (T0 + minutes * MINUTE).isoformat()}


async def test_overview_pools_windows_exactly_with_wilson_bands(store: ClickHouseStore) -> None:
    client = await client_for(store)
    try:
        # one bucket holding both minutes: rates pool numerators and denominators, not window rates
        response = await client.get("/dashboard/api/overview", params={**window_range(), "rollup": "hour"})
        assert response.status == 200
        body = await response.json()
        assert body["rollup"] == "hour"
        m1 = next(s for s in body["series"] if s["model"] == "m1")
        assert m1["values"]["interactions"] == [14.0]
        assert m1["values"]["hallucination_rate"] == [pytest.approx(4 / 14)]
        low, high = wilson_interval(4, 14) or (0, 0)
        assert m1["lower"]["hallucination_rate"] == [pytest.approx(low)]
        assert m1["upper"]["hallucination_rate"] == [pytest.approx(high)]
        assert m1["support"]["hallucination_rate"] == [14]
        assert m1["values"]["mean_grounded_precision"] == [pytest.approx(10 / 14)]
        assert m1["values"]["judge_tokens"] == [14 * 12.0]
        assert [a["alert_id"] for a in body["alerts"]] == ["a1"]
        # per window (auto for a 2-minute range): one point each, and a model filter
        response = await client.get("/dashboard/api/overview", params={**window_range(), "model": "m1"})
        body = await response.json()
        assert body["rollup"] == "window" and [s["model"] for s in body["series"]] == ["m1"]
        assert body["series"][0]["values"]["hallucination_rate"] == [pytest.approx(0.3), pytest.approx(0.25)]
    finally:
        await client.close()


async def test_bucket_lists_worst_first_and_interaction_has_statements(store: ClickHouseStore) -> None:
    client = await client_for(store)
    try:
        params = {"app": "bot", "model": "m1", **window_range(1)}
        body = await (await client.get("/dashboard/api/bucket", params=params)).json()
        assert body["total"] == 10
        assert [r["hallucination"] for r in body["interactions"][:4]] == [True, True, True, False]
        first = body["interactions"][0]["interaction_id"]
        detail = await (await client.get(f"/dashboard/api/interactions/{first}")).json()
        statement = detail["evaluation"]["pairs"][0]["hypotheses"][0]["statements"][0]
        assert statement["verdict"] == "contradicted" and statement["reason"] == "the premise says 1990"
        assert detail["evaluation"]["interaction"]["contexts"][0]["text"] == "It opened in 1990."
        assert (await client.get("/dashboard/api/interactions/nope")).status == 404
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"start": "yesterday", "end": "2026-11-20T10:00:00Z"}, "start"),
        ({"start": "2026-11-20T10:00:00Z", "end": "2026-11-20T09:00:00Z"}, "query"),
        ({"start": "2020-01-01T00:00:00Z", "end": "2026-01-01T00:00:00Z"}, "query"),  # over 400 days
        ({**window_range(), "rollup": "week"}, "rollup"),
        ({**window_range(), "colour": "red"}, "colour"),
        ({"end": "2026-11-20T10:00:00Z"}, "start"),
    ],
)
async def test_bad_parameters_are_400_with_the_field(
    store: ClickHouseStore, params: dict[str, str], field: str
) -> None:
    client = await client_for(store)
    try:
        response = await client.get("/dashboard/api/overview", params=params)
        assert response.status == 400
        body = await response.json()
        assert field in {d["field"] for d in body["details"]}, body
    finally:
        await client.close()


async def test_request_values_are_parameters_not_sql(store: ClickHouseStore) -> None:
    client = await client_for(store)
    try:
        hostile = "bot' OR 1=1 --"
        response = await client.get("/dashboard/api/overview", params={**window_range(), "app": hostile})
        assert response.status == 200 and (await response.json())["series"] == []
        response = await client.get(
            "/dashboard/api/bucket", params={**window_range(), "app": hostile, "model": "m1"}
        )
        assert response.status == 200 and (await response.json())["total"] == 0
    finally:
        await client.close()


async def test_page_and_vendored_chart_library_are_served(store: ClickHouseStore) -> None:
    client = await client_for(store)
    try:
        page = await client.get("/dashboard/")
        assert page.status == 200 and "uPlot.iife.min.js" in await page.text()
        assert "default-src 'self'" in page.headers["Content-Security-Policy"]
        lib = await client.get("/dashboard/static/vendor/uplot/uPlot.iife.min.js")
        assert lib.status == 200 and "uPlot" in await lib.text()
        assert (await client.get("/", allow_redirects=False)).headers["Location"] == "/dashboard/"
    finally:
        await client.close()


async def test_page_modules_are_served_as_javascript_and_all_resolve(store: ClickHouseStore) -> None:
    """The page loads one ES module; every module it imports, transitively, is served as JavaScript
    (with nosniff a browser runs nothing else), whatever the machine's MIME table says of .js."""
    client = await client_for(store)
    try:
        page = await client.get("/dashboard/")
        assert '<script type="module" src="static/main.js">' in await page.text()
        seen: set[str] = set()
        todo = ["main.js"]
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            response = await client.get(f"/dashboard/static/{name}")
            assert response.status == 200, name
            assert response.headers["Content-Type"].split(";")[0] == "text/javascript", name
            assert response.headers["X-Content-Type-Options"] == "nosniff"
            todo += re.findall(r'from "\./([a-z_]+\.js)"', await response.text())
        assert {"main.js", "table.js", "format.js", "slices.js", "overview.js"} <= seen
        css = await client.get("/dashboard/static/dashboard.css")
        assert css.headers["Content-Type"].split(";")[0] == "text/css"
        missing = await client.get("/dashboard/static/nothing.js")
        assert missing.status == 404
    finally:
        await client.close()


async def test_api_is_503_until_clickhouse_is_open() -> None:
    client = await client_for(None)
    try:
        assert (await client.get("/dashboard/api/options")).status == 503
    finally:
        await client.close()


async def test_token_and_basic_auth(store: ClickHouseStore) -> None:
    settings = DashboardSettings(token=SecretStr(TOKEN), username="ops", password=SecretStr("pw"))
    client = await client_for(store, settings)
    try:
        assert (await client.get("/dashboard/api/options")).status == 401
        assert (
            await client.get("/dashboard/api/options", headers={"Authorization": "Bearer wrong"})
        ).status == 401
        ok = await client.get("/dashboard/api/options", headers={"Authorization": f"Bearer {TOKEN}"})
        assert ok.status == 200
        basic = "Basic " + base64.b64encode(b"ops:pw").decode()
        assert (await client.get("/dashboard/api/options", headers={"Authorization": basic})).status == 200
        # a browser: ?token= once sets the cookie and drops the token from the address
        first = await client.get(f"/dashboard/?token={TOKEN}&range=7d", allow_redirects=False)
        assert first.status == 302 and "token" not in first.headers["Location"]
        assert (await client.get("/dashboard/api/options")).status == 200  # the cookie jar has it now
    finally:
        await client.close()


def test_binding_beyond_loopback_needs_credentials() -> None:
    require_credentials("127.0.0.1", DashboardSettings())
    require_credentials("::1", DashboardSettings())
    with pytest.raises(DashboardConfigError, match="without credentials"):
        require_credentials("0.0.0.0", DashboardSettings())
    require_credentials("0.0.0.0", DashboardSettings(token=SecretStr(TOKEN)))
    with pytest.raises(ValueError, match="go together"):
        DashboardSettings(username="ops")


async def test_a_reviewer_labels_an_interaction_and_the_quality_page_reads_it(store: ClickHouseStore) -> None:
    client = await client_for(store)
    try:
        iid = store.query_sync(f"SELECT interaction_id FROM {store.db}.evaluations LIMIT 1")[0][
            "interaction_id"
        ]
        label = {"interaction_id": iid, "kind": "grounded", "value": 0, "reviewer": "ann", "note": "made up"}
        response = await client.post("/dashboard/api/labels", json=label)
        assert response.status == 201, await response.text()
        stored = await response.json()
        assert (stored["reviewer"], stored["source"], stored["value"]) == ("ann", "reviewer", 0)
        detail = await (await client.get(f"/dashboard/api/interactions/{iid}")).json()
        assert [(x["kind"], x["value"], x["note"]) for x in detail["labels"]] == [("grounded", 0, "made up")]
        quality = await (await client.get("/dashboard/api/quality", params=window_range())).json()
        [block] = [b for b in quality["apps"] if b["kind"] == "grounded"]
        assert block["labels"] == 1 and block["corrected"]["status"] == "too_few_labels"
        review = await (await client.get("/dashboard/api/review", params=window_range())).json()
        assert iid not in {i["interaction_id"] for i in review["items"]}  # labeled: out of the queue
        assert sum(p["labeled_this_week"] for p in review["progress"]) == 1
    finally:
        await client.close()


@pytest.mark.parametrize("mode", ["off", "all"])
async def test_a_reviewers_note_is_masked_in_privacy_mode_all(store: ClickHouseStore, mode: str) -> None:
    client = await client_for(store, full=Settings.from_values({"privacy": {"mode": mode}}))
    try:
        iid = store.query_sync(f"SELECT interaction_id FROM {store.db}.evaluations LIMIT 1")[0][
            "interaction_id"
        ]
        note = "the user (jane.doe@example.com) asked twice"
        label = {"interaction_id": iid, "kind": "grounded", "value": 1, "reviewer": "ann", "note": note}
        assert (await client.post("/dashboard/api/labels", json=label)).status == 201
        [stored] = store.query_sync(
            f"SELECT note FROM {store.db}.labels FINAL WHERE interaction_id = {{i:String}}", {"i": iid}
        )
        assert stored["note"] == (note if mode == "off" else "the user (<EMAIL_1>) asked twice")
    finally:
        await client.close()


@pytest.mark.parametrize(
    ("body", "content_type", "reason"),
    [
        (
            '{"interaction_id": "x", "kind": "grounded", "value": 2, "reviewer": "a"}',
            "application/json",
            "value",
        ),
        ('{"interaction_id": "x", "kind": "grounded", "value": 1}', "application/json", "reviewer"),
        ('{"interaction_id": "x", "kind": "vibes", "value": 1, "reviewer": "a"}', "application/json", "kind"),
        ("\xff not json", "application/json", "body"),
        ("interaction_id=x&kind=grounded&value=1", "application/x-www-form-urlencoded", ""),
        ("[" * 100_000 + "]" * 100_000, "application/json", "nested deeper than"),
        ('{"interaction_id": "x"}', "application/json; charset=no-such-charset", "unknown charset"),
        ('{"interaction_id": "x"}', "application/json; charset=utf-16", "not utf-16 text"),
    ],
)
async def test_a_bad_label_is_a_400_naming_the_field(
    store: ClickHouseStore, body: str, content_type: str, reason: str
) -> None:
    client = await client_for(store)
    try:
        response = await client.post(
            "/dashboard/api/labels", data=body.encode("latin-1"), headers={"Content-Type": content_type}
        )
        assert response.status == 400
        text = await response.text()
        assert reason in text
    finally:
        await client.close()


async def test_a_label_of_an_unknown_interaction_is_a_404(store: ClickHouseStore) -> None:
    client = await client_for(store)
    try:
        label = {"interaction_id": "nope", "kind": "grounded", "value": 1, "reviewer": "ann"}
        assert (await client.post("/dashboard/api/labels", json=label)).status == 404
    finally:
        await client.close()


async def test_the_overview_draws_the_corrected_rate_per_bucket_once_labels_allow(
    store: ClickHouseStore,
) -> None:
    from schemas.label import Label
    from schemas.settings import Settings
    from streams.clickhouse.labels import LabelStore

    # m1: i0-i9 in the first minute (i0-i2 flagged), i10-i13 in the second (i10 flagged). People say
    # i0, i1, i3 are hallucinated (i3 missed by the judge) and i2, i4-i9 grounded (i2 a false alarm):
    # Se = 2/3, Sp = 6/7. m2 (nothing flagged): two hallucinated, two grounded: Se 0 + Sp 1, chance.
    said = {0: 0, 1: 0, 3: 0, 2: 1, **{k: 1 for k in range(4, 10)}, 14: 0, 15: 0, 16: 1, 17: 1}
    await LabelStore(store).insert(
        [
            Label(labeled_at=EVALUATED_AT, interaction_id=f"i{k}", kind="grounded", value=v, reviewer="ann")
            for k, v in said.items()
        ]
    )
    se, sp = 2 / 3, 6 / 7
    settings = Settings.from_values({"labels": {"min_per_class": 2}})
    client = TestClient(TestServer(root_app(lambda: store, DashboardSettings(), settings), host="127.0.0.1"))
    await client.start_server()
    try:
        body = await (await client.get("/dashboard/api/overview", params=window_range())).json()
        by_model = {s["model"]: s for s in body["series"]}
        line = by_model["m1"]["corrected"]["hallucination_rate"]
        assert line["status"] == "ok" and line["note"] == "" and line["cases"] == 10
        assert (line["sensitivity"], line["specificity"]) == (pytest.approx(se), pytest.approx(sp))
        expected = [(p + sp - 1) / (se + sp - 1) for p in (3 / 10, 1 / 4)]
        assert line["value"] == [pytest.approx(v) for v in expected]
        assert line["corrected"] == pytest.approx((4 / 14 + sp - 1) / (se + sp - 1))
        for low, value, high in zip(line["lower"], line["value"], line["upper"], strict=True):
            assert 0 <= low < value < high <= 1
        chance = by_model["m2"]["corrected"]["hallucination_rate"]
        assert chance["status"] == "no_better_than_chance" and chance["value"] == []
        assert "no better than chance" in chance["note"]
        # fewer labels than min_per_class of a class: a note saying how many more, no line
        strict = Settings.from_values({"labels": {"min_per_class": 4}})
        await client.close()
        client = TestClient(
            TestServer(root_app(lambda: store, DashboardSettings(), strict), host="127.0.0.1")
        )
        await client.start_server()
        body = await (await client.get("/dashboard/api/overview", params=window_range())).json()
        line = next(s for s in body["series"] if s["model"] == "m1")["corrected"]["hallucination_rate"]
        assert (line["status"], line["labels_needed"], line["value"]) == ("too_few_labels", 1, [])
        assert "4 of each" in line["note"]
    finally:
        await client.close()


async def test_the_drill_down_exports_its_interactions_as_eval_jsonl(store: ClickHouseStore) -> None:
    from pipeline.dataset import parse_line
    from schemas.label import Label
    from schemas.settings import Limits
    from streams.clickhouse.labels import LabelStore

    await LabelStore(store).insert(
        [Label(labeled_at=EVALUATED_AT, interaction_id="i0", kind="grounded", value=0, reviewer="ann")]
    )
    client = await client_for(store)
    try:
        # the second minute of m1: i10-i13
        params = {
            "app": "bot",
            "model": "m1",
            "start": (T0 + MINUTE).isoformat(),
            "end": (T0 + 2 * MINUTE).isoformat(),
        }
        response = await client.get("/dashboard/api/export", params=params)
        assert response.status == 200
        assert response.content_type == "application/x-ndjson"
        assert response.headers["Content-Disposition"] == (
            'attachment; filename="groundwatch-bot-m1-20261120T1001.jsonl"'
        )
        lines = (await response.text()).splitlines()
        cases = [parse_line(line, n, Limits()) for n, line in enumerate(lines, 1)]
        assert sorted(c.interaction.interaction_id for c in cases) == ["i10", "i11", "i12", "i13"]  # type: ignore[union-attr]
        # the first minute holds the labeled i0: its label and this judge's verdict as a peer
        params = {**params, "start": T0.isoformat(), "end": (T0 + MINUTE).isoformat()}
        lines = (await (await client.get("/dashboard/api/export", params=params)).text()).splitlines()
        [first] = [json.loads(line) for line in lines if json.loads(line)["interaction_id"] == "i0"]
        assert first["labels"] == {"grounded": 0} and first["peers"] == {"lexical:lexical": 0}
        assert len(lines) == 10
        # the page's slice filter holds: only the slice's interactions
        for term, expected in (("has_ground_truth:yes", 10), ("has_ground_truth:no", 0)):
            sliced = await client.get("/dashboard/api/export", params={**params, "slice": term})
            assert len((await sliced.text()).splitlines()) == expected, term
        bad = await client.get("/dashboard/api/export", params={**params, "model": ""})
        assert bad.status == 400 and "model" in await bad.text()
    finally:
        await client.close()


async def test_the_label_kinds_asked_on_the_interaction_page_come_from_the_registry(
    store: ClickHouseStore,
) -> None:
    from schemas.label import LABEL_TARGETS

    client = await client_for(store)
    try:
        kinds = await (await client.get("/dashboard/api/label-kinds")).json()
    finally:
        await client.close()
    assert [k["kind"] for k in kinds] == [t.kind.value for t in LABEL_TARGETS.values() if t.keys]
    assert {k["kind"] for k in kinds} == {"grounded", "correct", "answer_refusal"}
    keys = [key for k in kinds for key in k["keys"]]
    assert len(keys) == len(set(keys))  # one key, one answer
    assert kinds[0] == {"kind": "grounded", "question": "Grounded in its context?", "yes_text": "grounded",
                        "no_text": "hallucinated", "keys": ["g", "h"]}  # fmt: skip
