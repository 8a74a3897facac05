"""The ``conversations`` table (migrations 014 and 017): reading a conversation's stored turns, writing its
rollup, and finding the conversations and windows a crashed worker left behind.

Every read of turns is of ``evaluations FINAL`` (one row per interaction, however often it was
delivered) and every read of rollups of ``conversations FINAL`` (the latest version of each)."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from schemas.conversation import ConversationRollup, ConversationTurn
from schemas.evaluation_row import EvalRow
from streams.clickhouse.rows import utc
from streams.clickhouse.sql import TS as _TS
from streams.clickhouse.store import ClickHouseStore

CONVERSATION_COLUMNS = [
    *ConversationRollup.model_fields,
    "written_at",
    "version",
    "turns_stored_at",
    "turns_digest",
]
ROLLUP_COLUMNS = ", ".join(ConversationRollup.model_fields)
_EVAL_ROW = ", ".join(EvalRow.model_fields)

#: a stored turn: the columns of ConversationTurn, the texts and the end mark from the payload's interaction
TURN_COLUMNS = (
    "interaction_id, timestamp, conversation_id, judged, hallucination, answer_refusal, input_tokens, "
    "output_tokens, cost_usd, inserted_at AS stored_at, version, "
    "JSONExtractString(payload, 'interaction', 'question') AS question, "
    "JSONExtractString(payload, 'interaction', 'answer') AS answer, "
    "lower(JSONExtractRaw(payload, 'interaction', 'metadata', 'conversation_end')) IN ('true', '\"true\"') "
    "AS ends"
)


#: a rollup to write: the rollup, its version, when the latest turn it was computed from was stored, and
#: which turns those were (``pipeline.conversations.turns_digest``; '' for an interaction of one turn)
Written = tuple[ConversationRollup, int, datetime | None, str]
#: a stored rollup: its last turn's time, its version and its turns digest
Current = tuple[datetime, int, str]


def conversation_row(
    c: ConversationRollup, written_at: datetime, version: int, stored: datetime | None, digest: str
) -> list[Any]:
    values = c.model_dump()
    values["first_turn_at"], values["last_turn_at"] = utc(c.first_turn_at), utc(c.last_turn_at)
    extra = [utc(written_at), version, utc(stored) if stored is not None else None, digest]
    return [values[f] for f in ConversationRollup.model_fields] + extra


class ConversationRows:
    """Reads and writes of the conversation rollups, through the one store (its lock and thread)."""

    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        self.db = store.db

    def turns_sync(self, app: str, model: str, ids: Sequence[str]) -> dict[str, list[ConversationTurn]]:
        """The stored turns (deduplicated) of these conversations of one app and model, by id."""
        if not ids:
            return {}
        rows = self.store.query_sync(
            f"SELECT {TURN_COLUMNS} FROM {self.db}.evaluations FINAL WHERE app = {{app:String}} "
            "AND model = {model:String} AND conversation_id IN {ids:Array(String)}",
            {"app": app, "model": model, "ids": list(dict.fromkeys(ids))},
        )
        out: dict[str, list[ConversationTurn]] = defaultdict(list)
        for r in rows:
            out[str(r.pop("conversation_id"))].append(ConversationTurn.model_validate(r))
        return dict(out)

    async def turns(self, app: str, model: str, ids: Sequence[str]) -> dict[str, list[ConversationTurn]]:
        return await asyncio.to_thread(self.turns_sync, app, model, list(ids))

    def current_sync(self, app: str, model: str, ids: Sequence[str]) -> dict[str, Current]:
        """(last turn time, version, turns digest) of the stored rollups of these conversations, by id."""
        if not ids:
            return {}
        rows = self.store.query_sync(
            f"SELECT conversation_id, last_turn_at, version, turns_digest FROM {self.db}.conversations FINAL "
            "WHERE app = {app:String} AND model = {model:String} AND conversation_id IN {ids:Array(String)} "
            "AND interaction_id = ''",
            {"app": app, "model": model, "ids": list(dict.fromkeys(ids))},
        )
        return {
            str(r["conversation_id"]): (utc(r["last_turn_at"]), int(r["version"]), str(r["turns_digest"]))
            for r in rows
        }

    async def current(self, app: str, model: str, ids: Sequence[str]) -> dict[str, Current]:
        return await asyncio.to_thread(self.current_sync, app, model, list(ids))

    def insert_sync(self, rows: Sequence[Written], written_at: datetime) -> None:
        """Rollups with their versions, in one insert (a higher version replaces a conversation's row)."""
        if rows:
            data = [conversation_row(c, written_at, v, stored, digest) for c, v, stored, digest in rows]
            self.store.insert_rows_sync("conversations", data, CONVERSATION_COLUMNS)

    async def insert(self, rows: Sequence[Written], written_at: datetime) -> None:
        await asyncio.to_thread(self.insert_sync, list(rows), written_at)

    def of_windows_sync(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[ConversationRollup]:
        """The conversations of one app and model whose last turn falls in the windows beginning at
        ``starts`` (``size_seconds`` long); not the rows of interactions without a conversation_id (a
        window counts those from its evaluations)."""
        if not starts:
            return []
        first = min(utc(s) for s in starts)
        size = timedelta(seconds=size_seconds)
        rows = self.store.query_sync(
            f"SELECT {ROLLUP_COLUMNS} FROM {self.db}.conversations FINAL WHERE app = {{app:String}} "
            f"AND model = {{model:String}} AND interaction_id = '' AND last_turn_at >= {{start:{_TS}}} "
            f"AND last_turn_at < {{end:{_TS}}} "
            f"AND intDiv(toUnixTimestamp64Milli(last_turn_at) - toUnixTimestamp64Milli({{start:{_TS}}}), "
            "{size_ms:Int64}) IN {offsets:Array(Int64)}",
            {
                "app": app, "model": model, "start": first, "end": max(utc(s) for s in starts) + size,
                "size_ms": int(size_seconds) * 1000,
                "offsets": sorted({int((utc(s) - first) / size) for s in starts}),
            },
        )  # fmt: skip
        return [ConversationRollup.model_validate(r) for r in rows]

    async def of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[ConversationRollup]:
        return await asyncio.to_thread(self.of_windows_sync, app, model, list(starts), size_seconds)

    def unrolled_sync(self, since: datetime) -> list[tuple[str, str, str, datetime, bool]]:
        """(app, model, conversation_id, last turn time, end marked) of the conversations with turns
        written since ``since`` whose stored rollup is missing, counts other turns, or was begun before
        one of its turns was stored after the turns it was computed from (a turn's evaluation replaced
        by a later one, an incomplete verdict by a complete one: the turn count is the same, the verdicts
        are not): what a crashed worker left open. Both times are the evaluations' ``inserted_at`` (the
        server's clock); a rollup written before ``turns_stored_at`` existed is compared by turns only."""
        rows = self.store.query_sync(
            "SELECT t.app AS app, t.model AS model, t.cid AS cid, t.last AS last, t.ends AS ends "
            "FROM (SELECT app, model, assumeNotNull(conversation_id) AS cid, count() AS n, "
            "max(inserted_at) AS stored, "
            "max(timestamp) AS last, max(lower(JSONExtractRaw(payload, 'interaction', 'metadata', "
            "'conversation_end')) IN ('true', '\"true\"')) AS ends "
            f"FROM {self.db}.evaluations FINAL WHERE conversation_id IS NOT NULL AND cid IN ("
            f"SELECT DISTINCT assumeNotNull(conversation_id) FROM {self.db}.evaluations "
            f"WHERE inserted_at >= {{since:{_TS}}} AND conversation_id IS NOT NULL) "
            "GROUP BY app, model, cid) AS t "
            f"LEFT JOIN (SELECT app, model, conversation_id, turns, turns_stored_at FROM {self.db}."
            "conversations FINAL WHERE interaction_id = '') AS c "
            "ON t.app = c.app AND t.model = c.model AND t.cid = c.conversation_id "
            "WHERE c.turns != t.n OR t.stored > ifNull(c.turns_stored_at, t.stored)",
            {"since": utc(since)},
        )
        return [(r["app"], r["model"], str(r["cid"]), utc(r["last"]), bool(r["ends"])) for r in rows]

    async def unrolled(self, since: datetime) -> list[tuple[str, str, str, datetime, bool]]:
        return await asyncio.to_thread(self.unrolled_sync, since)

    def singles_sync(self, ids: Sequence[str]) -> list[tuple[EvalRow, int, datetime]]:
        """(row, version, when stored) of these interactions, those without a conversation_id."""
        if not ids:
            return []
        rows = self.store.query_sync(
            f"SELECT {_EVAL_ROW}, version AS _version, inserted_at AS _stored FROM {self.db}.evaluations "
            "FINAL WHERE interaction_id IN {ids:Array(String)} AND conversation_id IS NULL",
            {"ids": list(dict.fromkeys(ids))},
        )
        return [(EvalRow.model_validate(r), int(r.pop("_version")), utc(r.pop("_stored"))) for r in rows]

    async def singles(self, ids: Sequence[str]) -> list[tuple[EvalRow, int, datetime]]:
        return await asyncio.to_thread(self.singles_sync, list(ids))

    def unrolled_singles_sync(self, since: datetime) -> list[tuple[str, str, str]]:
        """(app, model, interaction_id) of the interactions without a conversation_id stored since
        ``since`` whose row here is missing or older than their stored evaluation (its version)."""
        rows = self.store.query_sync(
            "SELECT e.app AS app, e.model AS model, e.interaction_id AS iid FROM (SELECT app, model, "
            f"interaction_id, version FROM {self.db}.evaluations FINAL WHERE conversation_id IS NULL "
            f"AND inserted_at >= {{since:{_TS}}}) AS e LEFT JOIN (SELECT app, model, interaction_id, version "
            f"FROM {self.db}.conversations FINAL WHERE interaction_id != '') AS c "
            "ON e.app = c.app AND e.model = c.model AND e.interaction_id = c.interaction_id "
            "WHERE c.version < e.version",
            {"since": utc(since)},
        )
        return [(str(r["app"]), str(r["model"]), str(r["iid"])) for r in rows]

    async def unrolled_singles(self, since: datetime) -> list[tuple[str, str, str]]:
        return await asyncio.to_thread(self.unrolled_singles_sync, since)

    def last_stored_sync(self) -> datetime | None:
        """When the latest evaluation was stored (the server's clock); None with none."""
        rows = self.store.query_sync(
            f"SELECT count() AS n, max(inserted_at) AS at FROM {self.db}.evaluations"
        )
        return utc(rows[0]["at"]) if rows and int(rows[0]["n"]) else None

    async def last_stored(self) -> datetime | None:
        return await asyncio.to_thread(self.last_stored_sync)

    def stale_windows_sync(self, size_seconds: int, since: datetime) -> list[tuple[str, str, datetime]]:
        """(app, model, window start) of windows a conversation row stored since ``since`` counts in and
        that were computed before it was stored (or never): the worker stopped between the two writes,
        or a window round read the conversations while the row was being written. As for the rows of a
        window (``ClickHouseStore.stale_windows_sync``), the row's ``inserted_at`` (the server's clock)
        is compared with the window's ``computed_at`` (stamped before its reads)."""
        size_ms = int(size_seconds) * 1000
        params = {"size_ms": size_ms, "since": utc(since)}
        written = self.store.query_sync(
            "SELECT app, model, intDiv(toUnixTimestamp64Milli(last_turn_at), {size_ms:Int64}) AS bucket, "
            f"max(inserted_at) AS written FROM {self.db}.conversations "
            f"WHERE inserted_at >= {{since:{_TS}}} GROUP BY app, model, bucket",
            params,
        )
        computed = self.store.query_sync(
            "SELECT app, model, intDiv(toUnixTimestamp64Milli(window_start), {size_ms:Int64}) AS bucket, "
            f"max(computed_at) AS computed FROM {self.db}.window_aggregates "
            f"WHERE computed_at >= {{since:{_TS}}} GROUP BY app, model, bucket",
            params,
        )
        done = {(r["app"], r["model"], int(r["bucket"])): utc(r["computed"]) for r in computed}
        out = []
        for r in written:
            key = (r["app"], r["model"], int(r["bucket"]))
            if key not in done or utc(r["written"]) >= done[key]:
                out.append((key[0], key[1], datetime.fromtimestamp(key[2] * size_ms / 1000, tz=UTC)))
        return out

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[tuple[str, str, datetime]]:
        return await asyncio.to_thread(self.stale_windows_sync, size_seconds, since)

    def count_sync(self, singles: bool = False) -> int:
        """Stored conversations; with ``singles``, the interactions without a conversation_id too."""
        where = "" if singles else " WHERE interaction_id = ''"
        rows = self.store.query_sync(f"SELECT count() AS n FROM {self.db}.conversations FINAL{where}")
        return int(rows[0]["n"]) if rows else 0

    def all_sync(self, singles: bool = False) -> list[ConversationRollup]:
        """Every conversation; with ``singles``, the interactions without a conversation_id too."""
        where = "" if singles else "WHERE interaction_id = '' "
        rows = self.store.query_sync(
            f"SELECT {ROLLUP_COLUMNS} FROM {self.db}.conversations FINAL {where}"
            "ORDER BY app, model, conversation_id, interaction_id"
        )
        return [ConversationRollup.model_validate(r) for r in rows]
