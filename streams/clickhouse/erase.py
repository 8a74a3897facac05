"""Erasing one person's rows: an interaction, a conversation, or every interaction holding a keyed
pseudonym (``privacy.pseudonym_key``), from every table that has an ``interaction_id`` column.

The interactions are resolved first (a conversation's from ``evaluations``; a pseudonym's from the
texts of ``evaluations``, ``evaluation_statements`` and ``labels``), then each table's rows of them
are counted and removed with ClickHouse's lightweight ``DELETE`` (the rows vanish from every read at
once; the parts are rewritten in the background). A conversation's erasure also deletes its rollup
(``conversations``, ids and counts, no text) and the labels on the conversation (a conversation kind's,
``interaction_id`` its conversation_id: ``schemas.label_kinds.CONVERSATION_KINDS``). Window aggregates,
alerts and deliveries hold no text and no interaction's rows: they are left as they are. Each erasure is
recorded in ``erasures``: what was asked, which interactions, how many rows per table, when (ids only,
never a text).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from schemas.label_kinds import CONVERSATION_KINDS
from streams.clickhouse.client import check_identifier
from streams.clickhouse.store import ClickHouseStore

EraseKind = Literal["interaction", "conversation", "pseudonym"]

#: where a pseudonym may be written: table -> its text columns
TEXT_COLUMNS: dict[str, tuple[str, ...]] = {
    "evaluations": ("payload",),
    "evaluation_statements": ("hypothesis", "statement", "reason"),
    "labels": ("statements", "note"),
}


@dataclass(frozen=True)
class Erasure:
    kind: EraseKind
    target: str
    erased_at: datetime
    interaction_ids: list[str]
    rows: dict[str, int] = field(default_factory=dict)

    @property
    def total_rows(self) -> int:
        return sum(self.rows.values())

    @property
    def erasure_id(self) -> str:
        key = f"{self.kind}\x00{self.target}\x00{self.erased_at.isoformat()}"
        return hashlib.sha256(key.encode()).hexdigest()[:32]


def interaction_tables(store: ClickHouseStore) -> list[str]:
    """Every table of the database with an ``interaction_id`` column that holds rows of its own (not a
    view, not a Distributed table over the others)."""
    rows = store.query_sync(
        "SELECT t.name AS name FROM system.tables AS t "
        "WHERE t.database = {db:String} AND t.engine NOT LIKE '%View' AND t.engine != 'Distributed' "
        "AND t.name IN ("
        "SELECT table FROM system.columns WHERE database = {db:String} AND name = 'interaction_id') "
        "ORDER BY name",
        {"db": store.db},
    )
    return [str(r["name"]) for r in rows]


def source(store: ClickHouseStore, table: str, cluster: str | None = None) -> str:
    """Where a table's rows are read: the table itself, or with a ``cluster`` every shard's rows (the
    ``cluster`` table function: one replica of each shard), so an interaction stored on another shard
    than the one connected to is found and counted."""
    if cluster:
        names = ", ".join(f"'{check_identifier(n)}'" for n in (cluster, store.db, table))
        return f"cluster({names})"
    return f"{store.db}.{table}"


def resolve(store: ClickHouseStore, kind: EraseKind, target: str, cluster: str | None = None) -> list[str]:
    """The interaction ids an erasure covers (on every shard of a ``cluster``)."""
    if kind == "interaction":
        return [target]
    if kind == "conversation":
        sql = (
            f"SELECT DISTINCT interaction_id FROM {source(store, 'evaluations', cluster)} "
            "WHERE conversation_id = {t:String}"
        )
        return sorted(str(r["interaction_id"]) for r in store.query_sync(sql, {"t": target}))
    found: set[str] = set()
    for table, columns in TEXT_COLUMNS.items():
        where = " OR ".join(f"position(ifNull({c}, ''), {{t:String}}) > 0" for c in columns)
        sql = f"SELECT DISTINCT interaction_id FROM {source(store, table, cluster)} WHERE {where}"
        found |= {str(r["interaction_id"]) for r in store.query_sync(sql, {"t": target})}
    return sorted(found)


def erase(
    store: ClickHouseStore, kind: EraseKind, target: str, now: datetime, cluster: str | None = None
) -> Erasure:
    """Delete the interactions' rows from every table and record the erasure (see the module docstring).
    With a ``cluster`` (``clickhouse.cluster``) the interactions are found and counted on every shard
    and the DELETE runs ``ON CLUSTER``, so every shard's rows go."""
    on_cluster = f" ON CLUSTER {check_identifier(cluster)}" if cluster else ""
    ids = resolve(store, kind, target, cluster)
    rows: dict[str, int] = {}
    for table in interaction_tables(store) if ids else []:
        where = "has({ids:Array(String)}, ifNull(interaction_id, ''))"
        count_sql = f"SELECT count() AS n FROM {source(store, table, cluster)} WHERE {where}"
        counted = store.query_sync(count_sql, {"ids": ids})
        rows[table] = int(counted[0]["n"]) if counted else 0
        if rows[table]:
            store.command_sync(f"DELETE FROM {store.db}.{table}{on_cluster} WHERE {where}", {"ids": ids})
    if kind == "conversation":
        where = "conversation_id = {t:String}"
        counted = store.query_sync(
            f"SELECT count() AS n FROM {source(store, 'conversations', cluster)} WHERE {where}", {"t": target}
        )
        rows["conversations"] = int(counted[0]["n"]) if counted else 0
        if rows["conversations"]:
            delete = f"DELETE FROM {store.db}.conversations{on_cluster} WHERE {where}"
            store.command_sync(delete, {"t": target})
        on_it = "interaction_id = {t:String} AND has({kinds:Array(String)}, kind)"
        params = {"t": target, "kinds": sorted(k.value for k in CONVERSATION_KINDS)}
        counted = store.query_sync(
            f"SELECT count() AS n FROM {source(store, 'labels', cluster)} WHERE {on_it}", params
        )
        labels = int(counted[0]["n"]) if counted else 0
        if labels:
            store.command_sync(f"DELETE FROM {store.db}.labels{on_cluster} WHERE {on_it}", params)
            rows["labels"] = rows.get("labels", 0) + labels
    erasure = Erasure(kind, target, now, ids, rows)
    store.insert_rows_sync(
        "erasures",
        [[erasure.erasure_id, now, kind, target, ids, rows, erasure.total_rows]],
        ["erasure_id", "erased_at", "kind", "target", "interaction_ids", "rows", "total_rows"],
    )
    return erasure
