"""The dashboard's HTTP side: the page, its static files and the JSON API it alone reads (aiohttp).

    GET /                         the page (static/index.html)
    GET /api/options              apps and models with data, window size, metric catalogue
    GET /api/overview             series per app/model over a range (start, end, app, model*, rollup),
                                  the hallucination rate corrected for the judge's errors beside it
    GET /api/bucket               one bucket's interactions, worst first (app, model, start, end, limit,
                                  slice*)
    GET /api/interactions/{id}    one interaction with its statements, verdicts and costs
    GET /api/alerts               alerts in a range (start, end, app, model, limit)
    GET /api/quality              the judge's agreement with people's labels and the corrected rates
                                  (start, end, app, model)
    GET /api/review               the review queue: interactions to label next and the week's progress
                                  (start, end, app, model, limit)
    GET /api/export               one bucket's interactions as the JSONL groundwatch eval reads, a download
                                  (app, model, start, end, slice*)
    POST /api/labels              a reviewer's label (JSON: interaction_id, kind, value, note, reviewer)
    GET /api/slices/...           dimensions, breakdown, what changed, one slice's overview (slices_api.py)
    GET /api/documents            per context document, worst first (insights_api.py)
    GET /api/compare              two slices side by side (insights_api.py)
    GET /api/topics               each topic's share and rates against the period before (topics_api.py)

Query parameters are validated by the models in schemas/dashboard.py: a bad one is a 400 naming the
field and the reason. The same application is mounted at /dashboard/ on the worker's web server and
served by ``groundwatch dashboard``.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Awaitable, Callable
from datetime import timedelta
from pathlib import Path, PurePosixPath
from typing import get_args

from aiohttp import web
from pydantic import ValidationError

from pipeline.clock import SYSTEM_CLOCK, Clock
from pipeline.privacy.mask import PrivacyGuard
from pipeline.review import drawn, inclusion_probability
from schemas.dashboard import (
    AlertsQuery,
    BucketQuery,
    ExportQuery,
    LabelRequest,
    OverviewQuery,
    QualityQuery,
    ReviewQuery,
)
from schemas.label import CONVERSATION_KINDS, Label, LabelSource, label_targets
from schemas.settings import DashboardSettings, JudgeKind, PrivacySettings, Settings
from schemas.validation import problems
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.auth import auth_middleware
from streams.dashboard.conversations import has_conversation
from streams.dashboard.http import (
    QUERIES_KEY,
    SETTINGS_KEY,
    bad_request,
    json_body,
    json_response,
    parse_query,
    queries_of,
)
from streams.dashboard.insights_api import add_routes as add_insight_routes
from streams.dashboard.queries import DashboardQueries
from streams.dashboard.slices_api import add_routes as add_slice_routes
from streams.dashboard.topics_api import add_routes as add_topic_routes

log = logging.getLogger(__name__)

STATIC = Path(__file__).resolve().parent / "static"
# the static files' types by extension, whatever the machine's MIME table says (/etc/mime.types, the Windows
# registry): with nosniff a browser runs the page's ES modules only when they come as JavaScript
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html"}
StoreProvider = Callable[[], ClickHouseStore | None]
DASHBOARD_KEY = web.AppKey("dashboard", DashboardSettings)


class NoteMasker:
    """``privacy.mode`` all: reviewers' notes masked before they are stored. The worker's dashboard
    uses the worker's guard; ``groundwatch dashboard`` loads the detectors at the first note."""

    def __init__(self, settings: PrivacySettings, guard: PrivacyGuard | None = None) -> None:
        self.settings = settings
        self.guard = guard
        self._lock = asyncio.Lock()

    async def label_for_storage(self, label: Label) -> Label:
        if self.settings.mode != "all" or not label.note:
            return label
        async with self._lock:
            if self.guard is None:
                self.guard = await asyncio.to_thread(PrivacyGuard, self.settings)
        return await asyncio.to_thread(self.guard.label_for_storage, label)


NOTES_KEY = web.AppKey("notes", NoteMasker)
CLOCK_KEY = web.AppKey("clock", Clock)


async def options(request: web.Request) -> web.Response:
    return json_response(await queries_of(request).options())


async def overview(request: web.Request) -> web.Response:
    from streams.judge_quality import corrected_lines

    query = parse_query(request, OverviewQuery, lists=("models",))
    queries = queries_of(request)
    result = await queries.overview(query)
    settings = request.app[SETTINGS_KEY]
    lines = await corrected_lines(result, LabelStore(queries.store), settings, query.app, query.models)
    return json_response(lines)


async def bucket(request: web.Request) -> web.Response:
    query = parse_query(request, BucketQuery, repeated=("slice",))
    return json_response(await queries_of(request).bucket(query))


async def export(request: web.Request) -> web.Response:
    """The drill-down's interactions (one app/model over a range) as eval-format JSONL, the lines
    ``groundwatch export`` writes (``pipeline.export_file``), as a file download."""
    from pipeline.export_file import dumps, export_lines

    q = parse_query(request, ExportQuery)
    rows = await LabelStore(queries_of(request).store).export_rows(
        q.start, q.end, app=q.app, model=q.model, slice_filter=q.slice
    )
    body = "".join(dumps(line) + "\n" for line in export_lines(rows, request.app[SETTINGS_KEY]))
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", f"{q.app}-{q.model}-{q.start:%Y%m%dT%H%M}")[:120]
    return web.Response(
        text=body,
        content_type="application/x-ndjson",
        headers={"Content-Disposition": f'attachment; filename="groundwatch-{name}.jsonl"'},
    )


async def interaction(request: web.Request) -> web.Response:
    interaction_id = request.match_info["interaction_id"]
    if not 0 < len(interaction_id) <= 1024:
        raise bad_request("interaction id must be 1-1024 characters")
    detail = await queries_of(request).interaction(interaction_id)
    if detail is None:
        raise web.HTTPNotFound(text='{"error": "no such interaction"}', content_type="application/json")
    return json_response(detail)


async def alerts(request: web.Request) -> web.Response:
    return json_response(await queries_of(request).alerts(parse_query(request, AlertsQuery)))


async def quality(request: web.Request) -> web.Response:
    from streams.judge_quality import read_quality

    q = parse_query(request, QualityQuery)
    queries = queries_of(request)
    report = await read_quality(
        LabelStore(queries.store), request.app[SETTINGS_KEY], q.start, q.end, q.app, q.model
    )
    return json_response(report)


async def review(request: web.Request) -> web.Response:
    q = parse_query(request, ReviewQuery)
    settings = request.app[SETTINGS_KEY]
    labels = LabelStore(queries_of(request).store)
    threshold = settings.pipeline.threshold_for("context_entailment", settings.judge.kind)
    items = await labels.queue(
        q.start,
        q.end,
        settings.labels,
        threshold,
        overrides=settings.pipeline.app_threshold_overrides("hallucination"),
        by_judge={k: settings.pipeline.threshold_for("context_entailment", k) for k in get_args(JudgeKind)},
        app=q.app,
        model=q.model,
        limit=q.limit,
    )
    since = request.app[CLOCK_KEY].now() - timedelta(days=7)
    progress = await labels.progress(since, settings.labels.weekly_target, q.app, q.model)
    body = {
        "items": [i.model_dump(mode="json") for i in items],
        "progress": [p.model_dump(mode="json") for p in progress],
        "review_rate": settings.labels.review_rate,
        "weekly_target": settings.labels.weekly_target,
    }
    return web.json_response(body)


async def label_kinds(request: web.Request) -> web.Response:
    """The label kinds a reviewer is asked about on the interaction page, as ``schemas.label`` declares
    them (question, the two answers' words and keys): the fixed kinds with keys, then each pattern and
    pass/fail evaluator of the evaluators file (``custom.<name>``; keys for the first four only). With
    ``on=conversation``: the kinds a reviewer gives on a conversation (``CONVERSATION_KINDS``) instead."""
    on = request.query.get("on", "interaction")
    if on not in ("interaction", "conversation"):
        raise bad_request("on must be interaction or conversation")
    fields = {"kind", "question", "yes_text", "no_text", "keys"}
    targets = label_targets().values()
    if on == "conversation":
        chosen = [t for t in targets if t.kind in CONVERSATION_KINDS]
    else:
        chosen = [t for t in targets if t.keys is not None or t.evaluator is not None]
    asked = [t.model_dump(mode="json", include=fields) for t in chosen]
    return web.json_response(asked)


async def add_label(request: web.Request) -> web.Response:
    """Store a reviewer's label. JSON only (a cross-site form cannot send it); the reviewer is the
    dashboard's basic-auth user when it has one. An interaction the review queue draws keeps its
    inclusion probability, so agreement weighs it back to the whole traffic."""
    if request.content_type != "application/json":
        raise bad_request("send the label as application/json")
    data = await json_body(request, request.app[SETTINGS_KEY].limits.max_json_depth)
    try:
        req = LabelRequest.model_validate(data)
    except ValidationError as exc:
        details = [{"field": p.where or "body", "reason": p.why} for p in problems(exc)]
        raise bad_request("invalid label", details) from None
    dashboard = request.app[DASHBOARD_KEY]
    reviewer = dashboard.username if dashboard.username and dashboard.password else req.reviewer
    if not reviewer:
        raise bad_request("invalid label", [{"field": "reviewer", "reason": "who is labeling? give a name"}])
    queries = queries_of(request)
    probability: float | None = None
    if req.kind in CONVERSATION_KINDS:  # a label on a conversation: its turns must be stored
        if not await has_conversation(queries.store, req.interaction_id):
            raise web.HTTPNotFound(text='{"error": "no such conversation"}', content_type="application/json")
    else:
        detail = await queries.interaction(req.interaction_id)
        if detail is None:
            raise web.HTTPNotFound(text='{"error": "no such interaction"}', content_type="application/json")
        settings = request.app[SETTINGS_KEY]
        e = detail.evaluation
        threshold = settings.pipeline.threshold_for("context_entailment", e.judge, e.app, e.model)
        probability = inclusion_probability(e.context_entailment, threshold, settings.labels)
    label = Label(
        interaction_id=req.interaction_id,
        kind=req.kind,
        value=req.value,
        reviewer=reviewer,
        source=LabelSource.REVIEWER,
        labeled_at=request.app[CLOCK_KEY].now(),
        note=req.note,
        inclusion_probability=probability if probability and drawn(req.interaction_id, probability) else None,
    )
    label = await request.app[NOTES_KEY].label_for_storage(label)
    await LabelStore(queries.store).insert([label])
    return json_response(label, status=201)


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


@web.middleware
async def static_types(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    response = await handler(request)
    if isinstance(response, web.FileResponse):
        kind = STATIC_TYPES.get(PurePosixPath(request.path).suffix)
        if kind is not None:
            response.content_type = kind  # set before the response is prepared: no guess from the machine
    return response


def dashboard_app(
    store: StoreProvider,
    settings: DashboardSettings,
    full: Settings | None = None,
    privacy: PrivacyGuard | None = None,
    clock: Clock | None = None,
) -> web.Application:
    """The dashboard as an aiohttp application (``clock``: what "this week" of the review queue's
    progress counts from; the system's by default); ``store`` gives the open ClickHouse store (or None
    while it is opening: the API answers 503); ``full`` the settings the judge-quality pages read
    (thresholds, labels, privacy; from the environment when not given); ``privacy`` the worker's guard,
    which masks reviewers' notes in mode ``all`` (without it, one is loaded at the first note)."""
    app = web.Application(middlewares=[security_headers, static_types, auth_middleware(settings)])
    app[SETTINGS_KEY] = full = full or Settings()
    app[DASHBOARD_KEY] = settings
    app[NOTES_KEY] = NoteMasker(full.privacy, privacy)
    app[CLOCK_KEY] = clock or SYSTEM_CLOCK
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
    app.router.add_get("/api/export", export)
    app.router.add_get("/api/interactions/{interaction_id}", interaction)
    app.router.add_get("/api/alerts", alerts)
    app.router.add_get("/api/quality", quality)
    app.router.add_get("/api/review", review)
    app.router.add_post("/api/labels", add_label)
    app.router.add_get("/api/label-kinds", label_kinds)
    add_slice_routes(app)
    add_insight_routes(app)
    add_topic_routes(app)
    app.router.add_static("/static/", STATIC, follow_symlinks=False)
    return app


def root_app(
    store: StoreProvider, settings: DashboardSettings, full: Settings | None = None
) -> web.Application:
    """A server of its own (``groundwatch dashboard``): the dashboard at /dashboard/, / redirects."""
    app = web.Application()

    async def to_dashboard(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound("/dashboard/")

    app.router.add_get("/", to_dashboard)
    app.add_subapp("/dashboard/", dashboard_app(store, settings, full))
    return app
