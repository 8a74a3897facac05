"""The Conversations page and the conversation view of the dashboard.

    GET /api/conversations    closed conversations whose last turn is in [start, end), worst first
                              (start, end, slice*, limit): a slice keeps the conversations with a turn in it
    GET /api/conversation     one conversation: a page of its turns in order with their verdicts (app,
                              model, id, offset, limit), and the reviewers' ``resolved`` labels on it

The list reads ``conversations FINAL`` (the latest rollup of each); the view reads the turns from
``evaluations FINAL`` and recomputes the rollup from them (pipeline.conversations), so a conversation
still open shows as it stands.
"""

from __future__ import annotations

import asyncio

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from pipeline.conversations import contradictions, reasks, rollup
from schemas.conversation import (
    ConversationList,
    ConversationRollup,
    ConversationsQuery,
    ConversationTurn,
    ConversationView,
    TurnView,
)
from schemas.label import CONVERSATION_KINDS, Label
from schemas.settings import ConversationSettings
from streams.clickhouse.conversations import ROLLUP_COLUMNS, TURN_COLUMNS
from streams.clickhouse.labels import LabelStore
from streams.clickhouse.slices import slice_condition
from streams.clickhouse.sql import TS as _TS
from streams.clickhouse.store import ClickHouseStore
from streams.dashboard.http import SETTINGS_KEY, json_response, parse_query, queries_of

#: worst first (pipeline.conversations.badness), then the latest
WORST_FIRST = (
    "ended_unresolved DESC, hallucinated_turns DESC, contradictions DESC, reasked_turns DESC, refusals DESC, "
    "last_turn_at DESC, conversation_id"
)


class ConversationKeyQuery(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    app: str = Field(min_length=1, max_length=200)
    model: str = Field(min_length=1, max_length=200)
    id: str = Field(min_length=1, max_length=1000, description="the conversation_id")
    offset: int = Field(0, ge=0, description="the first turn of the page (0: the first turn)")
    limit: int = Field(50, ge=1, le=500, description="at most this many turns from offset")


class ConversationPage(ConversationView):
    """What the conversation view shows: the conversation (its rollup over every turn), a page of its turns
    (``turns``: from ``offset``, at most ``limit``, of ``total``) and the reviewers' labels on it."""

    turns: list[TurnView] = Field(description="the page's turns, in event-time order")
    total: int = Field(description="how many turns are stored")
    offset: int = Field(description="the index of the page's first turn")
    limit: int = Field(description="the most turns a page holds")
    labels: list[Label] = Field(description="the current labels of a conversation kind on its id")


def list_sql(db: str, condition: str, sliced: bool) -> str:
    """The range's conversations with an id (an interaction without one has its own row, counted in the
    conversation metrics, and its own drill-down); with a slice, those with a turn in it (the turns'
    evaluations rows)."""
    where = f"last_turn_at >= {{start:{_TS}}} AND last_turn_at < {{end:{_TS}}} AND interaction_id = ''"
    if sliced:
        where += (
            " AND (app, model, conversation_id) IN (SELECT app, model, assumeNotNull(conversation_id) "
            f"FROM {db}.evaluations FINAL WHERE conversation_id IS NOT NULL AND timestamp < {{end:{_TS}}} "
            f"AND {condition})"
        )
    return f"SELECT {ROLLUP_COLUMNS}, count() OVER () AS total FROM {db}.conversations FINAL WHERE {where} "


async def read_conversations(store: ClickHouseStore, q: ConversationsQuery) -> ConversationList:
    condition, params = slice_condition(q.slice, "s")
    sliced = condition != "1"
    sql = list_sql(store.db, condition, sliced) + f"ORDER BY {WORST_FIRST} LIMIT {{limit:UInt32}}"
    rows = await store.query(sql, {**params, "start": q.start, "end": q.end, "limit": q.limit})
    total = int(rows[0]["total"]) if rows else 0
    found = [ConversationRollup.model_validate({k: v for k, v in r.items() if k != "total"}) for r in rows]
    return ConversationList(start=q.start, end=q.end, slice=q.slice, conversations=found, total=total)


async def has_conversation(store: ClickHouseStore, conversation_id: str) -> bool:
    """Whether a turn of this conversation is stored (of any app/model): what a label on it needs."""
    rows = await store.query(
        f"SELECT 1 AS found FROM {store.db}.evaluations WHERE conversation_id = {{id:String}} LIMIT 1",
        {"id": conversation_id},
    )
    return bool(rows)


def _outcome(
    key: ConversationKeyQuery, turns: list[ConversationTurn], similarity: float
) -> tuple[ConversationRollup, list[bool], list[bool]]:
    """The conversation's rollup and each turn's re-ask and contradiction flags (CPU work: in a thread)."""
    rolled = rollup(key.app, key.model, key.id, turns, similarity)
    return rolled, reasks([t.question for t in turns], similarity), contradictions([t.answer for t in turns])


async def read_conversation(
    store: ClickHouseStore, key: ConversationKeyQuery, settings: ConversationSettings
) -> ConversationView | None:
    where = {"app": key.app, "model": key.model, "id": key.id}
    rows = await store.query(
        f"SELECT {TURN_COLUMNS}, context_entailment FROM {store.db}.evaluations FINAL "
        "WHERE app = {app:String} AND model = {model:String} AND conversation_id = {id:String} "
        "ORDER BY timestamp, interaction_id",
        where,
    )
    if not rows:
        return None
    turns = [ConversationTurn.model_validate(r) for r in rows]
    c, asked, contra = await asyncio.to_thread(_outcome, key, turns, settings.reask_similarity)
    kept = await store.query(
        f"SELECT {ROLLUP_COLUMNS} FROM {store.db}.conversations FINAL WHERE app = {{app:String}} "
        "AND model = {model:String} AND conversation_id = {id:String} AND interaction_id = ''",
        where,
    )
    stored = bool(kept)
    if kept and (kept_rollup := ConversationRollup.model_validate(kept[0])).turns == c.turns:
        c = kept_rollup  # its re-asks and contradictions as the configured judge decided them
    views = [
        TurnView(
            **t.model_dump(include={"interaction_id", "timestamp", "question", "answer", "judged"}),
            hallucination=t.hallucination, answer_refusal=t.answer_refusal,
            context_entailment=r["context_entailment"], reasked=a, contradicts=x,
            unresolving=t.interaction_id == c.unresolving_turn_id,
        )
        for t, r, a, x in zip(turns, rows, asked, contra, strict=True)
    ]  # fmt: skip
    return ConversationView(rollup=c, stored=stored, turns=views)


async def conversations(request: web.Request) -> web.Response:
    q = parse_query(request, ConversationsQuery, repeated=("slice",))
    return json_response(await read_conversations(queries_of(request).store, q))


async def conversation(request: web.Request) -> web.Response:
    key = parse_query(request, ConversationKeyQuery)
    store = queries_of(request).store
    view = await read_conversation(store, key, request.app[SETTINGS_KEY].conversations)
    if view is None:
        raise web.HTTPNotFound(text='{"error": "no such conversation"}', content_type="application/json")
    labels = [lb for lb in await LabelStore(store).of_interaction(key.id) if lb.kind in CONVERSATION_KINDS]
    page = ConversationPage(
        rollup=view.rollup, stored=view.stored, turns=view.turns[key.offset : key.offset + key.limit],
        total=len(view.turns), offset=key.offset, limit=key.limit, labels=labels,
    )  # fmt: skip
    return json_response(page)


def add_routes(app: web.Application) -> None:
    app.router.add_get("/api/conversations", conversations)
    app.router.add_get("/api/conversation", conversation)
