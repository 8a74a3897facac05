"""All groundwatch reads and writes of ClickHouse (evaluations, windows, alerts, dead letters), over one
``streams.clickhouse.connection.Connection``; the alert-delivery ledger is ``streams.clickhouse.leases``
and people's labels ``streams.clickhouse.labels``."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from pipeline.clock import Clock
from pipeline.privacy.mask import without_texts
from schemas.alert import Alert
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.settings import ClickHouseSettings, DimensionSettings
from schemas.utc import utc
from schemas.window import WindowAggregate
from streams.clickhouse.client import Target, connect, parse_url
from streams.clickhouse.connection import Connection
from streams.clickhouse.dead_letter_rows import DEAD_LETTER_COLUMNS
from streams.clickhouse.dimensions import DimensionWriter
from streams.clickhouse.migrations import apply_migrations, ddl_dir
from streams.clickhouse.rows import (
    ALERT_COLUMNS,
    EVALUATION_COLUMNS,
    STATEMENT_COLUMNS,
    WINDOW_COLUMNS,
    alert_row,
    evaluation_row,
    statement_rows,
    window_row,
)
from streams.clickhouse.sql import TS

_ROW_FIELDS = list(EvalRow.model_fields)

#: the rows of one app and model in [start, end): the leading columns of the evaluations' sorting key
#: (migration 011), so FINAL reads the granules of the range, not the table
WINDOW_ROWS = (
    "app = {app:String} AND model = {model:String} "
    f"AND timestamp >= {{start:{TS}}} AND timestamp < {{end:{TS}}}"
)


class ClickHouseStore(Connection):
    """The reads and writes of groundwatch's tables over one connection."""

    def __init__(
        self,
        client: Any,
        target: Target,
        dimensions: DimensionSettings | None = None,
        store_payload: bool = True,
        clock: Clock | None = None,
        reader: Any | None = None,
    ) -> None:
        super().__init__(client, target, clock, reader)
        #: clickhouse.store_payload: false writes evaluations without their texts (privacy.mask.without_texts)
        self.store_payload = store_payload
        # the dimensions written with each evaluation (their cardinality guard reads back this table)
        self.dimensions = DimensionWriter(dimensions or DimensionSettings(), self.db, self.query_sync)

    # ---- lifecycle -------------------------------------------------------------------------------
    @classmethod
    def open_sync(
        cls, settings: ClickHouseSettings, migrate: bool = True, dimensions: DimensionSettings | None = None
    ) -> ClickHouseStore:
        target = parse_url(settings.url.get_secret_value(), settings.database)
        client = connect(target)
        if migrate:
            apply_migrations(
                client,
                target.database,
                settings.ttl_days,
                ddl_dir(settings.migrations_dir),
                cluster=settings.cluster,
                distributed=settings.distributed,
                aggregate_ttl_days=settings.aggregate_ttl_days,
                shared=target.kind != "chdb",
            )
        reader = connect(target) if target.kind != "chdb" else None  # reads apart from writes on a server
        return cls(client, target, dimensions, settings.store_payload, reader=reader)

    @classmethod
    async def open(
        cls, settings: ClickHouseSettings, migrate: bool = True, dimensions: DimensionSettings | None = None
    ) -> ClickHouseStore:
        return await asyncio.to_thread(cls.open_sync, settings, migrate, dimensions)

    # ---- writes ---------------------------------------------------------------------------------
    def insert_evaluations_sync(self, evaluations: Sequence[Evaluation]) -> None:
        if not evaluations:
            return
        dimensions = self.dimensions.rows(evaluations)  # from the texts, before they may be left out
        if not self.store_payload:
            evaluations = [without_texts(e) for e in evaluations]
        self._locked(
            lambda: self.client.insert(
                f"{self.db}.evaluations",
                [evaluation_row(e, d) for e, d in zip(evaluations, dimensions, strict=True)],
                column_names=EVALUATION_COLUMNS,
            )
        )
        statements = [row for e in evaluations for row in statement_rows(e)]
        if statements:
            self._locked(
                lambda: self.client.insert(
                    f"{self.db}.evaluation_statements", statements, column_names=STATEMENT_COLUMNS
                )
            )
        self.release_memory_if_due()

    async def insert_evaluations(self, evaluations: Sequence[Evaluation]) -> None:
        await asyncio.to_thread(self.insert_evaluations_sync, evaluations)

    async def insert_window(self, window: WindowAggregate, computed_at: datetime) -> None:
        await self.insert_windows([window], computed_at)

    async def insert_windows(self, windows: Sequence[WindowAggregate], computed_at: datetime) -> None:
        """Window aggregates in one insert (a rewrite of a window replaces it: the later computed_at)."""
        rows = [window_row(w, computed_at) for w in windows]
        if rows:
            await self._run(
                lambda: self.client.insert(f"{self.db}.window_aggregates", rows, column_names=WINDOW_COLUMNS)
            )

    async def insert_dead_letter_rows(self, rows: Sequence[Sequence[Any]]) -> None:
        """Rows of ``streams.clickhouse.dead_letter_rows`` (idempotent: keyed by the letter's hash)."""
        if rows:
            data = [list(r) for r in rows]
            await self._run(
                lambda: self.client.insert(f"{self.db}.dead_letters", data, column_names=DEAD_LETTER_COLUMNS)
            )

    async def insert_alert(self, alert: Alert) -> None:
        row = alert_row(alert)
        await self._run(lambda: self.client.insert(f"{self.db}.alerts", [row], column_names=ALERT_COLUMNS))

    # ---- reads ----------------------------------------------------------------------------------
    def rows_between_sync(self, app: str, model: str, start: datetime, end: datetime) -> list[EvalRow]:
        """Deduplicated evaluation rows of one app/model with start <= timestamp < end."""
        cols = ", ".join(_ROW_FIELDS)
        rows = self.query_sync(
            f"SELECT {cols} FROM {self.db}.evaluations FINAL WHERE {WINDOW_ROWS}",
            {"app": app, "model": model, "start": utc(start), "end": utc(end)},
        )
        return [EvalRow.model_validate(r) for r in rows]

    async def rows_between(self, app: str, model: str, start: datetime, end: datetime) -> list[EvalRow]:
        return await asyncio.to_thread(self.rows_between_sync, app, model, start, end)

    def rows_of_windows_sync(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[EvalRow]:
        """Deduplicated evaluation rows of one app/model in the windows of ``size_seconds`` that begin at
        ``starts``: one read over their time range (the sorting key's granules), only their rows kept
        (counted in windows from the first start, so the division never sees a negative time)."""
        if not starts:
            return []
        first = min(utc(s) for s in starts)
        size = timedelta(seconds=size_seconds)
        cols = ", ".join(_ROW_FIELDS)
        rows = self.query_sync(
            f"SELECT {cols} FROM {self.db}.evaluations FINAL WHERE {WINDOW_ROWS} AND intDiv("
            f"toUnixTimestamp64Milli(timestamp) - toUnixTimestamp64Milli({{start:{TS}}}), "
            "{size_ms:Int64}) IN {offsets:Array(Int64)}",
            {
                "app": app, "model": model, "start": first,
                "end": max(utc(s) for s in starts) + size, "size_ms": int(size_seconds) * 1000,
                "offsets": sorted({int((utc(s) - first) / size) for s in starts}),
            },
        )  # fmt: skip
        return [EvalRow.model_validate(r) for r in rows]

    async def rows_of_windows(
        self, app: str, model: str, starts: Sequence[datetime], size_seconds: int
    ) -> list[EvalRow]:
        return await asyncio.to_thread(self.rows_of_windows_sync, app, model, list(starts), size_seconds)

    def current_rows_sync(self, interaction_ids: Sequence[str]) -> list[EvalRow]:
        """The stored (deduplicated) rows of these interactions: where they count today."""
        if not interaction_ids:
            return []
        cols = ", ".join(_ROW_FIELDS)
        rows = self.query_sync(
            f"SELECT {cols} FROM {self.db}.evaluations FINAL WHERE interaction_id IN {{ids:Array(String)}}",
            {"ids": list(dict.fromkeys(interaction_ids))},
        )
        return [EvalRow.model_validate(r) for r in rows]

    async def current_rows(self, interaction_ids: Sequence[str]) -> list[EvalRow]:
        return await asyncio.to_thread(self.current_rows_sync, interaction_ids)

    async def has_complete(self, interaction_id: str, where: tuple[str, str, datetime] | None = None) -> bool:
        """A complete Evaluation of the interaction is stored; with ``where`` (app, model, event time),
        in that row only: the same id of another app, model or day is another row (migration 011)."""
        condition = "interaction_id = {iid:String} AND complete = 1"
        params: dict[str, Any] = {"iid": interaction_id}
        if where is not None:
            app, model, at = where
            condition += (
                " AND app = {app:String} AND model = {model:String}"
                f" AND toDate(timestamp) = toDate({{at:{TS}}})"
            )
            params |= {"app": app, "model": model, "at": utc(at)}
        rows = await self.query(
            f"SELECT count() AS n FROM {self.db}.evaluations FINAL WHERE {condition}", params
        )
        return bool(rows and rows[0]["n"])

    async def alert_exists(self, alert_id: str) -> bool:
        rows = await self.query(
            f"SELECT count() AS n FROM {self.db}.alerts WHERE alert_id = {{aid:String}}", {"aid": alert_id}
        )
        return bool(rows and rows[0]["n"])

    async def alert_ids_since(
        self, rule: str, app: str, model: str, since: datetime, slice_: str = ""
    ) -> list[str]:
        """The ids of the rule's transitions for this app/model and slice on windows ending after
        ``since`` (what a run of closes must not make again)."""
        rows = await self.query(
            f"SELECT DISTINCT alert_id FROM {self.db}.alerts "
            "WHERE rule = {rule:String} AND app = {app:String} AND model = {model:String} "
            f"AND slice = {{slice:String}} AND window_end > {{since:{TS}}}",
            {"rule": rule, "app": app, "model": model, "slice": slice_, "since": utc(since)},
        )
        return [str(r["alert_id"]) for r in rows]

    async def last_alert_end(self, rule: str, app: str, model: str, slice_: str = "") -> datetime | None:
        """The end of the window the rule last fired on for this app/model (and slice; its cool-down
        counts from it)."""
        rows = await self.query(
            f"SELECT max(window_end) AS last, count() AS n FROM {self.db}.alerts "
            "WHERE rule = {rule:String} AND app = {app:String} AND model = {model:String} "
            "AND slice = {slice:String} AND state = 'firing'",
            {"rule": rule, "app": app, "model": model, "slice": slice_},
        )
        if not rows or not rows[0]["n"]:
            return None
        return utc(rows[0]["last"])

    async def latest_alert(self, rule: str, app: str, model: str, slice_: str = "") -> Alert | None:
        """The rule's latest transition for this app/model and slice (by event time; a resolution before
        the firing of the same window): an open alert when its state is firing."""
        rows = await self.query(
            "SELECT " + ", ".join(ALERT_COLUMNS) + f" FROM {self.db}.alerts FINAL "
            "WHERE rule = {rule:String} AND app = {app:String} AND model = {model:String} "
            "AND slice = {slice:String} ORDER BY window_end DESC, state = 'resolved' DESC LIMIT 1",
            {"rule": rule, "app": app, "model": model, "slice": slice_},
        )
        return Alert.model_validate(rows[0]) if rows else None

    async def alert_windows(
        self, app: str, model: str, start: datetime, end: datetime
    ) -> list[WindowAggregate]:
        """The stored windows of one app/model with start <= window_start < end (what alert rules read)."""
        rows = await self.query(
            "SELECT " + ", ".join(WindowAggregate.model_fields) + f" FROM {self.db}.window_aggregates FINAL "
            "WHERE app = {app:String} AND model = {model:String} "
            f"AND window_start >= {{start:{TS}}} AND window_start < {{end:{TS}}} "
            "ORDER BY window_start",
            {"app": app, "model": model, "start": utc(start), "end": utc(end)},
        )
        return [WindowAggregate.model_validate(r) for r in rows]

    def stale_windows_sync(self, size_seconds: int, since: datetime) -> list[tuple[str, str, datetime]]:
        """(app, model, window start) of windows whose rows were written after their aggregate (or that
        have none), among rows written since ``since``: what a crashed worker left unclosed."""
        size_ms = int(size_seconds) * 1000
        params = {"size_ms": size_ms, "since": utc(since)}
        rows = self.query_sync(
            "SELECT app, model, intDiv(toUnixTimestamp64Milli(timestamp), {size_ms:Int64}) AS bucket, "
            f"max(inserted_at) AS last_insert FROM {self.db}.evaluations "
            f"WHERE inserted_at >= {{since:{TS}}} GROUP BY app, model, bucket",
            params,
        )
        computed = self.query_sync(
            "SELECT app, model, intDiv(toUnixTimestamp64Milli(window_start), {size_ms:Int64}) AS bucket, "
            f"max(computed_at) AS computed FROM {self.db}.window_aggregates "
            f"WHERE computed_at >= {{since:{TS}}} GROUP BY app, model, bucket",
            params,
        )
        done = {(r["app"], r["model"], int(r["bucket"])): utc(r["computed"]) for r in computed}
        out = []
        for r in rows:
            key = (r["app"], r["model"], int(r["bucket"]))
            if key not in done or utc(r["last_insert"]) >= done[key]:
                start = datetime.fromtimestamp(key[2] * size_ms / 1000, tz=UTC)
                out.append((key[0], key[1], start))
        return out

    async def stale_windows(self, size_seconds: int, since: datetime) -> list[tuple[str, str, datetime]]:
        return await asyncio.to_thread(self.stale_windows_sync, size_seconds, since)

    def counts_sync(self) -> dict[str, int]:
        """Rows per table, deduplicated (FINAL): what a replay or a restart must not inflate."""
        out: dict[str, int] = {}
        sources = {
            "evaluations": "evaluations FINAL",
            # only the statements of each interaction's current evaluation (migration 002)
            "evaluation_statements": "evaluation_statements_current",
            "window_aggregates": "window_aggregates FINAL",
            "alerts": "alerts FINAL",
            "dead_letters": "dead_letters FINAL",
            # the conversations with a conversation_id (an interaction without one has a row of its own)
            "conversations": "conversations FINAL WHERE interaction_id = ''",
        }
        for table, source in sources.items():
            rows = self.query_sync(f"SELECT count() AS n FROM {self.db}.{source}")
            out[table] = int(rows[0]["n"]) if rows else 0
        return out

    async def counts(self) -> dict[str, int]:
        return await asyncio.to_thread(self.counts_sync)

    def windows_sync(self, since: datetime | None = None) -> list[WindowAggregate]:
        rows = self.query_sync(
            "SELECT " + ", ".join(WindowAggregate.model_fields) + f" FROM {self.db}.window_aggregates FINAL "
            f"WHERE window_start >= {{since:{TS}}} ORDER BY app, model, window_start",
            {"since": utc(since) if since else datetime(1970, 1, 1)},
        )
        return [WindowAggregate.model_validate(r) for r in rows]

    def alerts_sync(self, since: datetime | None = None) -> list[Alert]:
        rows = self.query_sync(
            "SELECT " + ", ".join(ALERT_COLUMNS) + f" FROM {self.db}.alerts FINAL "
            f"WHERE window_end >= {{since:{TS}}} ORDER BY fired_at",
            {"since": utc(since) if since else datetime(1970, 1, 1)},
        )
        return [Alert.model_validate(r) for r in rows]
