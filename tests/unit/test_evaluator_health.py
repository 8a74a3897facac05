"""The evaluators' health over a range (GET /dashboard/api/evaluators) from evaluations stored on chDB: the
judge's stages and your evaluators, coverage of what each ran on, missing scores by the kind of their
reason, the time of the last score."""

from __future__ import annotations

from datetime import timedelta

from schemas.evaluator_health import stage_outcomes
from schemas.results import CustomScore
from streams.clickhouse.store import ClickHouseStore
from tests.fixtures.dashboard import client_for
from tests.fixtures.messages import T0, evaluation, interaction


async def test_each_evaluator_with_its_coverage_failures_by_kind_and_last_score(
    store: ClickHouseStore,
) -> None:
    rows = []
    for i in range(10):
        custom = {"tone": CustomScore(score=1.0, version="2")}
        if i < 6:  # the leaver scored the first four, then exits on every call
            custom["leaver"] = (
                CustomScore(score=0.0, version="1") if i < 4 else
                CustomScore(score=None, reason="raised SystemExit: 1", version="1")
            )  # fmt: skip
        if i == 9:
            custom["tone"] = CustomScore(score=None, reason="timeout: still running after 1 s", version="2")
        at = T0 + timedelta(minutes=i)
        rows.append(evaluation(interaction(interaction_id=f"i{i}", timestamp=at), custom=custom))
    await store.insert_evaluations(rows)
    client = await client_for(store)
    try:
        span = {"start": T0.isoformat(), "end": (T0 + timedelta(hours=1)).isoformat()}
        body = await (await client.get("/dashboard/api/evaluators", params=span)).json()
        later = {"start": (T0 + timedelta(hours=1)).isoformat(), "end": (T0 + timedelta(hours=2)).isoformat()}
        empty = await (await client.get("/dashboard/api/evaluators", params=later)).json()
        bad = await client.get("/dashboard/api/evaluators", params={"start": "yesterday"})
        mine = await (await client.get("/dashboard/api/evaluators", params={**span, "app": "bot"})).json()
        other = await (
            await client.get("/dashboard/api/evaluators", params={**span, "app": "bot", "model": "x"})
        ).json()
    finally:
        await client.close()
    stages = [e for e in body["evaluators"] if e["kind"] == "built-in"]
    assert [(s["evaluator"], s["applied"], s["scored"]) for s in stages] == [
        ("nli", 10, 10),
        ("refusal", 10, 10),
    ]
    leaver, tone = [e for e in body["evaluators"] if e["kind"] == "custom"]  # lowest coverage first
    assert (leaver["evaluator"], leaver["applied"], leaver["scored"]) == ("leaver", 6, 4)
    assert leaver["coverage"] == 4 / 6 and leaver["missing_by_kind"] == {"raised": 2}
    assert leaver["last_scored"].startswith((T0 + timedelta(minutes=3)).isoformat()[:19])
    assert (tone["applied"], tone["scored"], tone["missing_by_kind"]) == (10, 9, {"timeout": 1})
    assert tone["versions"] == ["2"] and tone["last_scored"].startswith(
        (T0 + timedelta(minutes=8)).isoformat()[:19]
    )
    assert empty == {"evaluators": []} and bad.status == 400
    assert mine == body and other == {"evaluators": []}  # the page's app and model filter


async def test_the_judges_stages_count_where_they_failed_and_relevance_only_where_it_is_on(
    store: ClickHouseStore,
) -> None:
    """A stage named in an Evaluation's ``missing`` failed there (or its result never came); relevance
    counts only over the rows it was on for; rows not judged (sampled out) count for none."""
    rows = []
    for i in range(8):
        at = T0 + timedelta(minutes=i)
        missing = ["nli"] if i in (5, 7) else ["converted", "nli", "refusal"] if i == 6 else []
        fields: dict[str, object] = {"missing": missing, "complete": not missing}
        if i < 4:
            fields["relevance"] = 0.9 if i != 3 else None
            if i == 3:
                fields["missing"] = ["relevance"]
                fields["complete"] = False
        rows.append(evaluation(interaction(interaction_id=f"s{i}", timestamp=at), **fields))
    skipped = evaluation(interaction(interaction_id="skip", timestamp=T0), judged=False, missing=["nli"])
    await store.insert_evaluations([*rows, skipped])
    client = await client_for(store)
    try:
        span = {"start": T0.isoformat(), "end": (T0 + timedelta(hours=1)).isoformat()}
        body = await (await client.get("/dashboard/api/evaluators", params=span)).json()
    finally:
        await client.close()
    by_name = {e["evaluator"]: e for e in body["evaluators"]}
    assert [e["evaluator"] for e in body["evaluators"]] == ["nli", "relevance", "refusal"]  # lowest first
    nli, relevance, refusal = by_name["nli"], by_name["relevance"], by_name["refusal"]
    assert (nli["applied"], nli["scored"], nli["missing_by_kind"]) == (8, 5, {"failed or timed out": 3})
    assert nli["last_scored"].startswith((T0 + timedelta(minutes=4)).isoformat()[:19])
    assert (refusal["applied"], refusal["scored"]) == (8, 7)  # the row whose conversion never came
    assert (relevance["applied"], relevance["scored"], relevance["coverage"]) == (4, 3, 0.75)
    assert all(e["kind"] == "built-in" and e["versions"] == [] for e in body["evaluators"])
    # the worker's counters (/metrics) apply the same rule to each Evaluation
    counted: dict[str, list[int]] = {}
    for row in [*rows, skipped]:
        for stage, scored in stage_outcomes(row).items():
            counted.setdefault(stage, [0, 0])[0] += 1
            counted[stage][1] += scored
    assert counted == {e["evaluator"]: [e["applied"], e["scored"]] for e in body["evaluators"]}
