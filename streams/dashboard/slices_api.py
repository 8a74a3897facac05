"""The dashboard's slice endpoints (docs/slices.md):

    GET /api/slices/dimensions  the dimensions stored in a range and the configured ones (start, end)
    GET /api/slices/breakdown   a metric per slice of one dimension, with Wilson intervals and volume
                                (metric, dimension, start, end, app, model*, slice*, limit)
    GET /api/slices/changes     each slice's contribution to the metric's change from a baseline period,
                                mix and rate shift (the breakdown's parameters + baseline_start, baseline_end)
    GET /api/slices/overview    the overview's series of one slice (the overview's parameters + slice*),
                                computed from the interactions: windows hold no dimensions; the alerts
                                about the slice (rules with group_by)

``slice`` is the slice filter, repeated ``key:value`` terms (schemas/slice_filter.py). Query parameters
are validated by schemas/slices.py (a 400 naming the field).
"""

from __future__ import annotations

from aiohttp import web

from schemas.alert import Alert
from schemas.dashboard import AlertsQuery, TimeRange
from schemas.slice_filter import SliceFilter
from schemas.slices import BreakdownQuery, ChangesQuery, SliceOverview, SliceOverviewQuery
from streams.alerts.slices import slice_values
from streams.clickhouse.slices import SliceReader
from streams.dashboard.http import SETTINGS_KEY, json_response, parse_query, queries_of
from streams.dashboard.queries import DashboardQueries
from streams.dashboard.rollup import choose_rollup
from streams.slices import read_breakdown, read_changes, slice_series


def _reader(request: web.Request) -> tuple[DashboardQueries, SliceReader]:
    queries = queries_of(request)
    return queries, SliceReader(queries.store)


async def dimensions(request: web.Request) -> web.Response:
    q = parse_query(request, TimeRange)
    _, reader = _reader(request)
    stored = await reader.dimensions(q.start, q.end)
    configured = list(request.app[SETTINGS_KEY].dimensions.names)
    return web.json_response({"dimensions": configured + [d for d in stored if d not in configured]})


async def breakdown(request: web.Request) -> web.Response:
    q = parse_query(request, BreakdownQuery, lists=("models",), repeated=("slice",))
    _, reader = _reader(request)
    return json_response(await read_breakdown(reader, q))


async def changes(request: web.Request) -> web.Response:
    q = parse_query(request, ChangesQuery, lists=("models",), repeated=("slice",))
    _, reader = _reader(request)
    return json_response(await read_changes(reader, q))


def in_slice(alert: Alert, f: SliceFilter) -> bool:
    """An alert about the filtered traffic or a slice within it: its app and model match and it names
    each of the filter's dimensions with its value (a rule grouped by several dimensions names
    ``prompt_version=v2, retriever=dense``)."""
    named = slice_values(alert.slice)
    return (
        f.app in (None, alert.app)
        and f.model in (None, alert.model)
        and all(named.get(k) == v for k, v in f.dimensions.items())
    )


async def overview(request: web.Request) -> web.Response:
    q = parse_query(request, SliceOverviewQuery, lists=("models",), repeated=("slice",))
    queries, reader = _reader(request)
    rollup, step = choose_rollup(q.end - q.start, await queries.window_seconds(), q.rollup)
    series = slice_series(await reader.series_rows(q, step))
    model = q.models[0] if len(q.models) == 1 else None
    alerts = [
        a
        for a in await queries.alerts(AlertsQuery(start=q.start, end=q.end, app=q.app, model=model))
        if in_slice(a, q.slice) and (not q.models or a.model in q.models)
    ]
    return json_response(
        SliceOverview(
            start=q.start, end=q.end, rollup=rollup, step_seconds=step, slice=q.slice, series=series,
            alerts=alerts,
        )
    )  # fmt: skip


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/slices/dimensions", dimensions)
    app.router.add_get("/api/slices/breakdown", breakdown)
    app.router.add_get("/api/slices/changes", changes)
    app.router.add_get("/api/slices/overview", overview)
