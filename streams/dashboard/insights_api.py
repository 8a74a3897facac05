"""The Documents and Compare endpoints of the dashboard's JSON API.

    GET /api/documents    per context document, worst first (start, end, slice*, limit)
    GET /api/compare      two slices side by side (start, end, a*, b*, questions)

the conversation routes of streams/dashboard/conversations.py and your own evaluators' health
(``GET /api/evaluators``, streams/dashboard/evaluator_health.py).

``slice``, ``a`` and ``b`` are each a slice filter: repeated ``key:value`` terms, ``app``, ``model`` or a
dimension (``schemas.slice_filter.SliceFilter``).
"""

from __future__ import annotations

from aiohttp import web

from schemas.compare import CompareQuery
from schemas.documents import DocumentsQuery
from streams.dashboard.compare import read_compare
from streams.dashboard.documents import read_documents
from streams.dashboard.http import json_response, parse_query, queries_of


async def documents(request: web.Request) -> web.Response:
    q = parse_query(request, DocumentsQuery, repeated=("slice",))
    return json_response(await read_documents(queries_of(request).store, q))


async def compare(request: web.Request) -> web.Response:
    q = parse_query(request, CompareQuery, repeated=("a", "b"))
    return json_response(await read_compare(queries_of(request).store, q))


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/documents", documents)
    app.router.add_get("/api/compare", compare)
    from streams.dashboard.conversations import add_routes as conversation_routes
    from streams.dashboard.evaluator_health import add_routes as evaluator_routes

    conversation_routes(app)
    evaluator_routes(app)
