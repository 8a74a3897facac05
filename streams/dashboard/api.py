"""The dashboard's HTTP side: the page, its static files and the JSON API it alone reads (aiohttp).

    GET /                         the page (static/index.html)
    GET /api/options              apps and models with data, window size, metric catalogue
    GET /api/overview             series per app/model over a range (start, end, app, model*, rollup)
    GET /api/bucket               one bucket's interactions, worst first (app, model, start, end, limit)
    GET /api/interactions/{id}    one interaction with its statements, verdicts and costs
    GET /api/alerts               alerts in a range (start, end, app, model, limit)

Query parameters are validated by the models in schemas/dashboard.py: a bad one is a 400 naming the
field and the reason. The same application is mounted at /dashboard/ on the worker's web server and
served by ``groundwatch dashboard``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from schemas.dashboard import AlertsQuery, BucketQuery, OverviewQuery
from schemas.settings import DashboardSettings
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.auth import auth_middleware
from streams.dashboard.queries import DashboardQueries

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
Q = TypeVar("Q", bound=BaseModel)
StoreProvider = Callable[[], ClickHouseStore | None]
QUERIES_KEY = web.AppKey("queries", object)


def _json(model: BaseModel | list[Any], status: int = 200) -> web.Response:
    if isinstance(model, BaseModel):
        body = model.model_dump_json()
    else:
        body = "[" + ",".join(m.model_dump_json() for m in model) + "]"
    return web.Response(text=body, status=status, content_type="application/json")


def bad_request(error: str, details: list[dict[str, str]] | None = None) -> web.HTTPBadRequest:
    body = json.dumps({"error": error, "details": details or []})
    return web.HTTPBadRequest(text=body, content_type="application/json")


def parse_query(request: web.Request, model: type[Q], lists: tuple[str, ...] = ()) -> Q:
    """The request's query string as ``model``; repeated keys only for ``lists`` (given under the name
    without a trailing s: ``model=a&model=b`` -> ``models``)."""
    data: dict[str, Any] = {}
    for key in set(request.query.keys()):
        values = request.query.getall(key)
        plural = f"{key}s"
        if plural in lists:
            data[plural] = values
        elif len(values) > 1:
            raise bad_request(f"parameter {key!r} given more than once")
        else:
            data[key] = values[0]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = [
            {"field": ".".join(str(p) for p in e["loc"]) or "query", "reason": e["msg"]} for e in exc.errors()
        ]
        raise bad_request("invalid query parameters", details) from None


def _queries(request: web.Request) -> DashboardQueries:
    provider: Callable[[], DashboardQueries | None] = request.app[QUERIES_KEY]  # type: ignore[assignment]
    queries = provider()
    if queries is None:
        raise web.HTTPServiceUnavailable(
            text='{"error": "ClickHouse is not open yet"}', content_type="application/json"
        )
    return queries


async def options(request: web.Request) -> web.Response:
    return _json(await _queries(request).options())


async def overview(request: web.Request) -> web.Response:
    query = parse_query(request, OverviewQuery, lists=("models",))
    return _json(await _queries(request).overview(query))


async def bucket(request: web.Request) -> web.Response:
    return _json(await _queries(request).bucket(parse_query(request, BucketQuery)))


async def interaction(request: web.Request) -> web.Response:
    interaction_id = request.match_info["interaction_id"]
    if not 0 < len(interaction_id) <= 1024:
        raise bad_request("interaction id must be 1-1024 characters")
    detail = await _queries(request).interaction(interaction_id)
    if detail is None:
        raise web.HTTPNotFound(text='{"error": "no such interaction"}', content_type="application/json")
    return _json(detail)


async def alerts(request: web.Request) -> web.Response:
    return _json(await _queries(request).alerts(parse_query(request, AlertsQuery)))


async def index(request: web.Request) -> web.FileResponse:
    return web.FileResponse(STATIC / "index.html", headers={"Cache-Control": "no-store"})


@web.middleware
async def security_headers(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    response = await handler(request)
    response.headers.setdefault("X-Content-Type-Options", "nosniff")
    response.headers.setdefault("Referrer-Policy", "no-referrer")
    response.headers.setdefault(
        "Content-Security-Policy",
        "default-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; frame-ancestors 'none'",
    )
    return response


def dashboard_app(store: StoreProvider, settings: DashboardSettings) -> web.Application:
    """The dashboard as an aiohttp application; ``store`` gives the open ClickHouse store (or None
    while it is opening: the API answers 503)."""
    app = web.Application(middlewares=[security_headers, auth_middleware(settings)])
    cache: dict[int, DashboardQueries] = {}

    def queries() -> DashboardQueries | None:
        current = store()
        if current is None:
            return None
        if id(current) not in cache:
            cache.clear()
            cache[id(current)] = DashboardQueries(current, settings.refresh_seconds)
        return cache[id(current)]

    app[QUERIES_KEY] = queries
    app.router.add_get("/", index)
    app.router.add_get("/api/options", options)
    app.router.add_get("/api/overview", overview)
    app.router.add_get("/api/bucket", bucket)
    app.router.add_get("/api/interactions/{interaction_id}", interaction)
    app.router.add_get("/api/alerts", alerts)
    app.router.add_static("/static/", STATIC, follow_symlinks=False)
    return app


def root_app(store: StoreProvider, settings: DashboardSettings) -> web.Application:
    """A server of its own (``groundwatch dashboard``): the dashboard at /dashboard/, / redirects."""
    app = web.Application()

    async def to_dashboard(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/dashboard/")

    app.router.add_get("/", to_dashboard)
    app.add_subapp("/dashboard/", dashboard_app(store, settings))
    return app
