"""One connection to ClickHouse (a server, or the embedded chDB), async on top of the synchronous client.

Every call runs in a worker thread under a lock. chDB has no async client and one engine per process: one
client and one lock for everything. A ClickHouse server gets two clients, each with its lock: one for the
writes (inserts, commands) and one for the reads (the dashboard's, the closers', the alert rules'), so a
slow dashboard query never holds up the sink's inserts, nor an insert a read. Only ``{name:Type}`` query
parameters carry values; the database name is a checked identifier.

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
from datetime import UTC, datetime
from typing import Any, TypeVar

from pipeline.clock import SYSTEM_CLOCK, Clock
from streams.clickhouse.client import Target

log = logging.getLogger(__name__)
T = TypeVar("T")

#: how often (at most) an embedded chDB returns the memory its allocator freed to the OS (see above)
CHDB_PURGE_INTERVAL_S = 60.0


class Connection:
    """A ClickHouse client and its database: inserts and commands one at a time on ``client``, queries
    one at a time on ``reader`` (a second client of a server; chDB's one client and lock otherwise)."""

    def __init__(
        self, client: Any, target: Target, clock: Clock | None = None, reader: Any | None = None
    ) -> None:
        self.client = client
        self.reader = reader if reader is not None else client
        self.clock: Clock = clock or SYSTEM_CLOCK  # when chDB's freed pages were last handed back
        self.target = target
        self.db = target.database
        self._lock = threading.Lock()
        self._read_lock = threading.Lock() if self.reader is not client else self._lock
        self._purged_at = self.clock.monotonic()
        self.purges = 0

    def describe(self) -> str:
        return self.target.describe()

    def close(self) -> None:
        if self.target.kind != "chdb":  # the embedded engine lives as long as the process
            self.client.close()
            if self.reader is not self.client:
                self.reader.close()

    async def aclose(self) -> None:
        await asyncio.to_thread(self.close)

    def _locked(self, fn: Callable[[], T]) -> T:
        with self._lock:
            return fn()

    async def _run(self, fn: Callable[[], T]) -> T:
        return await asyncio.to_thread(self._locked, fn)

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

    # ---- statements -----------------------------------------------------------------------------
    def insert_rows_sync(self, table: str, rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> None:
        data = [list(r) for r in rows]
        self._locked(lambda: self.client.insert(f"{self.db}.{table}", data, column_names=list(columns)))

    async def insert_rows(self, table: str, rows: Sequence[Sequence[Any]], columns: Sequence[str]) -> None:
        await asyncio.to_thread(self.insert_rows_sync, table, rows, columns)

    def command_sync(self, sql: str, parameters: dict[str, Any] | None = None) -> None:
        self._locked(lambda: self.client.command(sql, parameters=parameters))

    def query_sync(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        def go() -> list[dict[str, Any]]:
            with self._read_lock:
                result = self.reader.query(sql, parameters=parameters or {})
            names = list(result.column_names)
            return [dict(zip(names, row, strict=True)) for row in result.result_rows]

        return go()

    async def query(self, sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        return await asyncio.to_thread(self.query_sync, sql, parameters)

    def server_now_sync(self) -> datetime:
        """The ClickHouse server's clock (UTC, milliseconds): what its rows' ``inserted_at`` are stamped
        with, so a stamp compared with them is taken from it too, whatever the worker's clock says."""
        [row] = self.query_sync("SELECT toUnixTimestamp64Milli(now64(3)) AS ms")
        return datetime.fromtimestamp(int(row["ms"]) / 1000, tz=UTC)

    async def server_now(self) -> datetime:
        return await asyncio.to_thread(self.server_now_sync)

    def ping_sync(self) -> bool:
        """ClickHouse answers a query (tells a bad row from an outage)."""
        try:
            self.query_sync("SELECT 1 AS ok")
            return True
        except Exception:
            return False

    async def ping(self) -> bool:
        return await asyncio.to_thread(self.ping_sync)
