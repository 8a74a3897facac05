"""The dashboard's HTTP plumbing shared by its route modules (``api``, ``slices_api``, ``insights_api``):
the application's keys, JSON answers, the one 400 shape, and reading a query string or a JSON body as a
pydantic model."""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from typing import Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ValidationError

from schemas.json_input import read_json
from schemas.settings import Settings
from schemas.validation import problems
from streams.dashboard.queries import DashboardQueries

Q = TypeVar("Q", bound=BaseModel)
QUERIES_KEY = web.AppKey("queries", object)
SETTINGS_KEY = web.AppKey("settings", Settings)


def json_response(model: BaseModel | list[Any], status: int = 200) -> web.Response:
    if isinstance(model, BaseModel):
        body = model.model_dump_json()
    else:
        body = "[" + ",".join(m.model_dump_json() for m in model) + "]"
    return web.Response(text=body, status=status, content_type="application/json")


def bad_request(error: str, details: list[dict[str, str]] | None = None) -> web.HTTPBadRequest:
    body = json.dumps({"error": error, "details": details or []})
    return web.HTTPBadRequest(text=body, content_type="application/json")


async def json_body(request: web.Request, max_depth: int) -> Any:
    """The request's JSON body, read as untrusted input (``schemas.json_input.read_json``: nesting checked
    without recursion); a charset Python does not know, bytes that are not in it, or text that is not
    JSON is a 400 saying which."""
    charset = request.charset or "utf-8"
    try:
        codecs.lookup(charset)
    except LookupError:
        reason = f"unknown charset {charset[:40]!r}"
        raise bad_request("invalid label", [{"field": "body", "reason": reason}]) from None
    raw = await request.read()
    try:
        text = raw.decode(charset)
    except UnicodeDecodeError:
        raise bad_request("invalid label", [{"field": "body", "reason": f"not {charset} text"}]) from None
    try:
        return read_json(text, max_depth)
    except ValueError as exc:
        raise bad_request("invalid label", [{"field": "body", "reason": f"not valid JSON: {exc}"}]) from None


def parse_query(
    request: web.Request, model: type[Q], lists: tuple[str, ...] = (), repeated: tuple[str, ...] = ()
) -> Q:
    """The request's query string as ``model``; repeated keys only for ``lists`` (given under the name
    without a trailing s: ``model=a&model=b`` -> ``models``) and for ``repeated`` (list fields named as
    their key: ``a=app:x&a=model:y`` -> ``a``)."""
    data: dict[str, Any] = {}
    for key in set(request.query.keys()):
        values = request.query.getall(key)
        if key in repeated:
            data[key] = values
        elif f"{key}s" in lists:
            data[f"{key}s"] = values
        elif len(values) > 1:
            raise bad_request(f"parameter {key!r} given more than once")
        else:
            data[key] = values[0]
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = [{"field": p.where or "query", "reason": p.why} for p in problems(exc)]
        raise bad_request("invalid query parameters", details) from None


def queries_of(request: web.Request) -> DashboardQueries:
    provider: Callable[[], DashboardQueries | None] = request.app[QUERIES_KEY]  # type: ignore[assignment]
    queries = provider()
    if queries is None:
        raise web.HTTPServiceUnavailable(
            text='{"error": "ClickHouse is not open yet"}', content_type="application/json"
        )
    return queries
