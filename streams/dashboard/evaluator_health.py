"""``GET /api/evaluators``: your own evaluators' health over a range, from the stored evaluations (their
``custom_scores``, ``custom_missing`` and ``custom_versions`` maps). The kind of a missing score's reason
is ``CustomScore.failure_kind``'s, the same as the worker's counters on /metrics."""

from __future__ import annotations

from collections import defaultdict
from datetime import datetime

from aiohttp import web

from schemas.evaluator_health import EvaluatorHealth, EvaluatorHealthQuery, EvaluatorHealthReport
from schemas.results import CustomScore
from schemas.utc import utc
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.http import json_response, parse_query, queries_of

_TS = "DateTime64(3, 'UTC')"


async def read_evaluator_health(store: ClickHouseStore, q: EvaluatorHealthQuery) -> EvaluatorHealthReport:
    rows = await store.query(
        "SELECT name, custom_versions[name] AS version, mapContains(custom_scores, name) AS scored, "
        "custom_missing[name] AS reason, count() AS n, max(timestamp) AS last "
        "FROM (SELECT custom_scores, custom_missing, custom_versions, timestamp, "
        "arrayJoin(arrayDistinct(arrayConcat(mapKeys(custom_scores), mapKeys(custom_missing)))) AS name "
        f"FROM {store.db}.evaluations FINAL "
        f"WHERE timestamp >= {{start:{_TS}}} AND timestamp < {{end:{_TS}}}"
        + (" AND app = {app:String}" if q.app is not None else "")
        + (" AND model = {model:String}" if q.model is not None else "")
        + ") GROUP BY name, version, scored, reason",
        {"start": q.start, "end": q.end, "app": q.app or "", "model": q.model or ""},
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
    return EvaluatorHealthReport(evaluators=out)


async def evaluators(request: web.Request) -> web.Response:
    q = parse_query(request, EvaluatorHealthQuery)
    return json_response(await read_evaluator_health(queries_of(request).store, q))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/evaluators", evaluators)
