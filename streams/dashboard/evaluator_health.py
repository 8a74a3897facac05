"""``GET /api/evaluators``: the evaluators' health over a range, from the stored evaluations.

The judge's own stages (NLI, refusal, relevance when on) from each judged row's ``missing``: a stage that
failed, or whose result never came, is named there (its dead letter says why). Yours from the
``custom_scores``, ``custom_missing`` and ``custom_versions`` maps; the kind of a missing score's reason is
``CustomScore.failure_kind``'s, the same as the worker's counters on /metrics."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from aiohttp import web

from schemas.evaluator_health import (
    STAGE_MISSING,
    EvaluatorHealth,
    EvaluatorHealthQuery,
    EvaluatorHealthReport,
)
from schemas.results import CustomScore
from schemas.utc import utc
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.http import json_response, parse_query, queries_of

_TS = "DateTime64(3, 'UTC')"

#: the rule of schemas.evaluator_health.stage_outcomes, over a row of the evaluations table
STAGES_SQL = (
    "arrayJoin(if(relevance IS NOT NULL OR has(missing, 'relevance'), ['nli', 'refusal', 'relevance'], "
    "['nli', 'refusal'])) AS stage"
)


def _range_sql(q: EvaluatorHealthQuery) -> str:
    return (
        f"timestamp >= {{start:{_TS}}} AND timestamp < {{end:{_TS}}}"
        + (" AND app = {app:String}" if q.app is not None else "")
        + (" AND model = {model:String}" if q.model is not None else "")
    )


def _params(q: EvaluatorHealthQuery) -> dict[str, object]:
    return {"start": q.start, "end": q.end, "app": q.app or "", "model": q.model or ""}


async def read_stage_health(store: ClickHouseStore, q: EvaluatorHealthQuery) -> list[EvaluatorHealth]:
    """The judge's stages over the judged rows of the range, lowest coverage first."""
    rows = await store.query(
        "SELECT stage, count() AS applied, countIf(NOT lost) AS scored, maxIf(timestamp, NOT lost) AS last "
        f"FROM (SELECT timestamp, {STAGES_SQL}, has(missing, stage) OR has(missing, 'converted') AS lost "
        f"FROM {store.db}.evaluations FINAL WHERE judged = 1 AND {_range_sql(q)}) GROUP BY stage",
        _params(q),
    )
    out = [
        EvaluatorHealth(
            evaluator=str(r["stage"]), kind="built-in", versions=[], applied=int(r["applied"]),
            scored=int(r["scored"]), coverage=int(r["scored"]) / int(r["applied"]),
            missing_by_kind={STAGE_MISSING: lost} if (lost := int(r["applied"]) - int(r["scored"])) else {},
            last_scored=utc(r["last"]) if int(r["scored"]) else None,
        )
        for r in rows
    ]  # fmt: skip
    return sorted(out, key=lambda h: (h.coverage or 0.0, h.evaluator))


async def read_evaluator_health(store: ClickHouseStore, q: EvaluatorHealthQuery) -> EvaluatorHealthReport:
    """The judge's stages, then your evaluators."""
    return EvaluatorHealthReport(
        evaluators=[*await read_stage_health(store, q), *await read_custom_health(store, q)]
    )


async def read_custom_health(store: ClickHouseStore, q: EvaluatorHealthQuery) -> list[EvaluatorHealth]:
    """Your evaluators over the range, lowest coverage first."""
    rows = await store.query(
        "SELECT name, custom_versions[name] AS version, mapContains(custom_scores, name) AS scored, "
        "custom_missing[name] AS reason, count() AS n, max(timestamp) AS last "
        "FROM (SELECT custom_scores, custom_missing, custom_versions, timestamp, "
        "arrayJoin(arrayDistinct(arrayConcat(mapKeys(custom_scores), mapKeys(custom_missing)))) AS name "
        f"FROM {store.db}.evaluations FINAL WHERE {_range_sql(q)}) GROUP BY name, version, scored, reason",
        _params(q),
    )
    versions: dict[str, set[str]] = defaultdict(set)
    scored: dict[str, int] = defaultdict(int)
    applied: dict[str, int] = defaultdict(int)
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    last: dict[str, datetime] = {}
    for r in rows:
        name, n = str(r["name"]), int(r["n"])
        applied[name] += n
        if r["version"]:
            versions[name].add(str(r["version"]))
        if r["scored"]:
            scored[name] += n
            at = utc(r["last"])
            last[name] = max(last.get(name, at), at)
        else:
            kind = CustomScore(score=None, reason=str(r["reason"])).failure_kind or "unknown"
            kinds[name][kind] += n
    out = [
        EvaluatorHealth(
            evaluator=name,
            kind="custom",
            versions=sorted(versions[name]),
            applied=applied[name],
            scored=scored[name],
            coverage=scored[name] / applied[name] if applied[name] else None,
            missing_by_kind=dict(sorted(kinds[name].items(), key=lambda kv: -kv[1])),
            last_scored=last.get(name),
        )
        for name in applied
    ]
    out.sort(key=lambda h: (h.coverage if h.coverage is not None else -1.0, h.evaluator))
    return out


async def evaluators(request: web.Request) -> web.Response:
    q = parse_query(request, EvaluatorHealthQuery)
    return json_response(await read_evaluator_health(queries_of(request).store, q))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/evaluators", evaluators)
