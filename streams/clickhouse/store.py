"""All groundwatch reads and writes of ClickHouse, async on top of the synchronous client.

chDB has no async client and one engine per process: one store (one client) per process, every call run
in a worker thread under a lock. Only ``{name:Type}`` query parameters carry values; the database name is
a checked identifier.

Memory of the embedded engine: chDB allocates through its own jemalloc, which keeps pages that inserts,
merges and queries freed ("dirty") in the process until it decides to return them. So after an insert,
at most every ``CHDB_PURGE_INTERVAL_S``, the store asks the engine to hand them back (``SYSTEM JEMALLOC
PURGE``, ~5 ms; live memory is untouched). In two 20-minute soaks at 20 interactions/s
(benchmarks/soak.py, one run each, under different loads: docs/performance.md) the RSS slope after the
warm-up was +2.35 MB/min without it and +0.05 MB/min with it.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pipeline.clock import SYSTEM_CLOCK, Clock
from pipeline.privacy.mask import without_texts
from schemas.alert import Alert
from schemas.evaluation import Evaluation
from schemas.evaluation_row import EvalRow
from schemas.settings import ClickHouseSettings, DimensionSettings
from schemas.utc import utc
from schemas.window import WindowAggregate
from streams.clickhouse.client import Target, connect, parse_url
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

log = logging.getLogger(__name__)
T = TypeVar("T")

_ROW_FIELDS = list(EvalRow.model_fields)

#: how often (at most) an embedded chDB returns the memory its allocator freed to the OS (see above)
CHDB_PURGE_INTERVAL_S = 60.0


@dataclass(frozen=True)
class Claim:
    """A delivery claimed in the ledger (``claim_delivery``), as ``release_deliveries`` gives it up."""

    delivery_id: str
    alert_id: str
    receiver: str
    claimed_at: datetime


#: the ledger rows that hold a delivery: an outcome (delivered, failed) or a claim younger than the lease
#: (a released claim, or one older than the lease, holds nothing); ``stale`` is the lease's start
LIVE_OR_SETTLED = (
    "(status IN ('delivered', 'failed') "
    "OR (status = 'claimed' AND claimed_at >= {stale:DateTime64(3, 'UTC')}))"
)

DELIVERY_COLUMNS = [
    "delivery_id", "alert_id", "receiver", "claimant", "claimed_at",
    "status", "attempts", "error", "updated_at",
]  # fmt: skip

#: the rows of one app and model in [start, end): the leading columns of the evaluations' sorting key
#: (migration 011), so FINAL reads the granules of the range, not the table
WINDOW_ROWS = (
    "app = {app:String} AND model = {model:String} "
    "AND timestamp >= {start:DateTime64(3, 'UTC')} AND timestamp < {end:DateTime64(3, 'UTC')}"
)


class ClickHouseStore:
    def __init__(
        self,
        client: Any,
        target: Target,
        dimensions: DimensionSettings | None = None,
        store_payload: bool = True,
        clock: Clock | None = None,
    ) -> None:
        self.client = client
        self.clock: Clock = clock or SYSTEM_CLOCK  # when chDB's freed pages were last handed back
        #: clickhouse.store_payload: false writes evaluations without their texts (privacy.mask.without_texts)
        self.store_payload = store_payload
        self.target = target
        self.db = target.database
        self._lock = threading.Lock()
        # the dimensions written with each evaluation (their cardinality guard reads back this table)
        self.dimensions = DimensionWriter(dimensions or DimensionSettings(), self.db, self.query_sync)
        self._purged_at = self.clock.monotonic()
        self.purges = 0

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
        return cls(client, target, dimensions, settings.store_payload)

    @classmethod
    async def open(
        cls, settings: ClickHouseSettings, migrate: bool = True, dimensions: DimensionSettings | None = None
    ) -> ClickHouseStore:
        return await asyncio.to_thread(cls.open_sync, settings, migrate, dimensions)

    def describe(self) -> str:
        return self.target.describe()

    def close(self) -> None:
        if self.target.kind != "chdb":  # the embedded engine lives as long as the process
            self.client.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def _locked(self, fn: Callable[[], T]) -> T:
        with self._lock:
            return fn()

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(self._locked, fn)

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

    def release_memory_if_due(self, now: float | None = None) -> bool:
        """Embedded chDB only: hand the pages its allocator freed back to the OS, at most every
        ``CHDB_PURGE_INTERVAL_S`` (module docstring). True when it purged now."""
        now = self.clock.monotonic() if now is None else now
        if self.target.kind != "chdb" or now - self._purged_at < CHDB_PURGE_INTERVAL_S:
            return False
        self._purged_at = now
        try:
            self._locked(lambda: self.client.command("SYSTEM JEMALLOC PURGE"))
        except Exception as exc:  # an engine built without jemalloc: nothing to hand back
            log.debug("chDB memory purge failed: %r", exc)
            return False
        self.purges += 1
        return True

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

    def insert_rows_sync(self, table: str, rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> None:
        data = [list(r) for r in rows]
        self._locked(lambda: self.client.insert(f"{self.db}.{table}", data, column_names=list(columns)))

    def command_sync(self, sql: str, parameters: dict[str, Any] | None = None) -> None:
        self._locked(lambda: self.client.command(sql, parameters=parameters))

    async def insert_alert(self, alert: Alert) -> None:
        row = alert_row(alert)
        await self._run(lambda: self.client.insert(f"{self.db}.alerts", [row], column_names=ALERT_COLUMNS))

    # ---- reads ----------------------------------------------------------------------------------
    def query_sync(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        def go() -> list[dict[str, Any]]:
            result = self.client.query(sql, parameters=parameters or {})
            names = list(result.column_names)
            return [dict(zip(names, row, strict=True)) for row in result.result_rows]

        return self._locked(go)

    async def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.query_sync, sql, parameters)

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
            "toUnixTimestamp64Milli(timestamp) - toUnixTimestamp64Milli({start:DateTime64(3, 'UTC')}), "
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
                " AND toDate(timestamp) = toDate({at:DateTime64(3, 'UTC')})"
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
            "AND slice = {slice:String} AND window_end > {since:DateTime64(3, 'UTC')}",
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
            "AND window_start >= {start:DateTime64(3, 'UTC')} AND window_start < {end:DateTime64(3, 'UTC')} "
            "ORDER BY window_start",
            {"app": app, "model": model, "start": utc(start), "end": utc(end)},
        )
        return [WindowAggregate.model_validate(r) for r in rows]

    async def claim_delivery(
        self,
        delivery_id: str,
        alert_id: str,
        receiver: str,
        claimant: str,
        claimed_at: datetime,
        stale_before: datetime | None = None,
    ) -> bool:
        """Claim a notification (the ledger of migration 004); True when this claim arrived first (the
        server's insert time) among the live ones, so this claimant sends; a delivery already recorded
        as delivered or failed is never claimed again. Any reader that sees a later claim also sees the
        first one. A claim made before ``stale_before`` without an outcome is dead (its worker stopped
        between claiming and recording): it no longer counts, so another claimant takes the delivery;
        nor does a released one (``release_delivery``)."""
        at = utc(claimed_at)
        # a claim's version (updated_at) is the epoch: an outcome row always replaces it, never the reverse
        row = [
            delivery_id,
            alert_id,
            receiver,
            claimant,
            at,
            "claimed",
            0,
            "",
            datetime(1970, 1, 1, tzinfo=UTC),
        ]
        await self._run(
            lambda: self.client.insert(f"{self.db}.alert_deliveries", [row], column_names=DELIVERY_COLUMNS)
        )
        rows = await self.query(
            f"SELECT claimant, status FROM {self.db}.alert_deliveries FINAL WHERE delivery_id = {{d:String}} "
            f"AND {LIVE_OR_SETTLED} "
            "ORDER BY status = 'claimed' ASC, inserted ASC, claimant ASC LIMIT 1",
            {
                "d": delivery_id,
                "stale": utc(stale_before) if stale_before else datetime(1970, 1, 1, tzinfo=UTC),
            },
        )
        return bool(rows) and rows[0]["status"] == "claimed" and rows[0]["claimant"] == claimant

    async def undelivered(
        self, receivers: Sequence[str], since: datetime, stale_before: datetime
    ) -> list[tuple[Alert, str]]:
        """(alert, receiver) of the transitions since ``since`` (wall time) that no receiver outcome
        records and no live claim covers: a worker stopped after writing the transition and before its
        notification was recorded, or released it unsent. Oldest first."""
        if not receivers:
            return []
        alerts = await self.query(
            "SELECT " + ", ".join(ALERT_COLUMNS) + f" FROM {self.db}.alerts FINAL "
            "WHERE fired_at >= {since:DateTime64(3, 'UTC')} ORDER BY fired_at, alert_id",
            {"since": utc(since)},
        )
        if not alerts:
            return []
        settled = await self.query(
            f"SELECT DISTINCT delivery_id FROM {self.db}.alert_deliveries FINAL "
            f"WHERE claimed_at >= {{since:DateTime64(3, 'UTC')}} AND {LIVE_OR_SETTLED}",
            {"since": utc(since) - timedelta(days=1), "stale": utc(stale_before)},
        )
        done = {r["delivery_id"] for r in settled}
        out = []
        for row in alerts:
            alert = Alert.model_validate(row)
            out += [(alert, r) for r in receivers if f"{alert.alert_id}|{r}" not in done]
        return out

    async def finish_delivery(
        self, delivery_id: str, claimant: str, status: str, attempts: int, error: str, at: datetime
    ) -> None:
        """Record the outcome of a claimed delivery (replaces the claim row of this claimant)."""
        rows = await self.query(
            "SELECT " + ", ".join(DELIVERY_COLUMNS) + f" FROM {self.db}.alert_deliveries FINAL "
            "WHERE delivery_id = {d:String} AND claimant = {c:String}",
            {"d": delivery_id, "c": claimant},
        )
        claim: dict[str, Any] = rows[0] if rows else {"alert_id": "", "receiver": "", "claimed_at": at}
        row = [delivery_id, claim["alert_id"], claim["receiver"], claimant, utc(claim["claimed_at"]),
               status, attempts, error[:2000], utc(at)]  # fmt: skip
        await self._run(
            lambda: self.client.insert(f"{self.db}.alert_deliveries", [row], column_names=DELIVERY_COLUMNS)
        )

    async def release_deliveries(self, claims: Sequence[Claim], claimant: str, at: datetime) -> None:
        """Give up claims without an outcome (the worker stops): each delivery is anyone's again at once,
        without waiting for the lease. One insert; each row replaces its claim (``at`` is a later
        version than a claim's) even if the claim's own insert lands after it, and stays, with status
        ``released``."""
        if not claims:
            return
        rows = [
            [c.delivery_id, c.alert_id, c.receiver, claimant, utc(c.claimed_at), "released", 0,
             "released without an outcome at a stop", utc(at)]
            for c in claims
        ]  # fmt: skip
        await self._run(
            lambda: self.client.insert(f"{self.db}.alert_deliveries", rows, column_names=DELIVERY_COLUMNS)
        )

    def deliveries_sync(self) -> list[dict[str, Any]]:
        """Every claim and outcome in the ledger (deduplicated), oldest claim first."""
        return self.query_sync(
            "SELECT " + ", ".join(DELIVERY_COLUMNS) + f" FROM {self.db}.alert_deliveries FINAL "
            "ORDER BY claimed_at, delivery_id, claimant"
        )

    def stale_windows_sync(self, size_seconds: int, since: datetime) -> list[tuple[str, str, datetime]]:
        """(app, model, window start) of windows whose rows were written after their aggregate (or that
        have none), among rows written since ``since``: what a crashed worker left unclosed."""
        size_ms = int(size_seconds) * 1000
        params = {"size_ms": size_ms, "since": utc(since)}
        rows = self.query_sync(
            "SELECT app, model, intDiv(toUnixTimestamp64Milli(timestamp), {size_ms:Int64}) AS bucket, "
            f"max(inserted_at) AS last_insert FROM {self.db}.evaluations "
            "WHERE inserted_at >= {since:DateTime64(3, 'UTC')} GROUP BY app, model, bucket",
            params,
        )
        computed = self.query_sync(
            "SELECT app, model, intDiv(toUnixTimestamp64Milli(window_start), {size_ms:Int64}) AS bucket, "
            f"max(computed_at) AS computed FROM {self.db}.window_aggregates "
            "WHERE computed_at >= {since:DateTime64(3, 'UTC')} GROUP BY app, model, bucket",
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
            "conversations": "conversations FINAL",
        }
        for table, source in sources.items():
            rows = self.query_sync(f"SELECT count() AS n FROM {self.db}.{source}")
            out[table] = int(rows[0]["n"]) if rows else 0
        return out

    def ping_sync(self) -> bool:
        """ClickHouse answers a query (tells a bad row from an outage)."""
        try:
            self.query_sync("SELECT 1 AS ok")
            return True
        except Exception:
            return False

    async def ping(self) -> bool:
        return await asyncio.to_thread(self.ping_sync)

    async def counts(self) -> dict[str, int]:
        return await asyncio.to_thread(self.counts_sync)

    def windows_sync(self, since: datetime | None = None) -> list[WindowAggregate]:
        rows = self.query_sync(
            "SELECT " + ", ".join(WindowAggregate.model_fields) + f" FROM {self.db}.window_aggregates FINAL "
            "WHERE window_start >= {since:DateTime64(3, 'UTC')} ORDER BY app, model, window_start",
            {"since": utc(since) if since else datetime(1970, 1, 1)},
        )
        return [WindowAggregate.model_validate(r) for r in rows]

    def alerts_sync(self, since: datetime | None = None) -> list[Alert]:
        rows = self.query_sync(
            "SELECT " + ", ".join(ALERT_COLUMNS) + f" FROM {self.db}.alerts FINAL "
            "WHERE window_end >= {since:DateTime64(3, 'UTC')} ORDER BY fired_at",
            {"since": utc(since) if since else datetime(1970, 1, 1)},
        )
        return [Alert.model_validate(r) for r in rows]
