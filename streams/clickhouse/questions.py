"""The questions of stored evaluations, for fitting topics on a range of traffic (``groundwatch topics
--since``): each interaction's question as stored (masked where ``privacy.mode`` all masked it before
storage; none where ``clickhouse.store_payload`` is off: then there is nothing to fit on)."""

from __future__ import annotations

from datetime import datetime

from schemas.utc import utc
from streams.clickhouse.sql import TS
from streams.clickhouse.store import ClickHouseStore


def stored_questions(
    store: ClickHouseStore, start: datetime, end: datetime, app: str | None, limit: int
) -> list[str]:
    """The questions of the evaluations with ``start <= timestamp < end`` (of ``app``; None: every app),
    the latest ``limit`` of them, deduplicated by interaction (the current row of each)."""
    rows = store.query_sync(
        "SELECT JSONExtractString(payload, 'interaction', 'question') AS question "
        f"FROM {store.db}.evaluations FINAL "
        f"WHERE timestamp >= {{start:{TS}}} AND timestamp < {{end:{TS}}} "
        "AND ({app:Nullable(String)} IS NULL OR app = {app:Nullable(String)}) "
        "AND question != '' ORDER BY timestamp DESC LIMIT {limit:UInt32}",
        {"start": utc(start), "end": utc(end), "app": app, "limit": limit},
    )
    return [str(r["question"]) for r in rows]
