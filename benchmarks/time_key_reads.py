"""Rows read by the time-ranged reads of ``evaluations``, on a data set ``dashboard_latency.py`` built.

    python benchmarks/time_key_reads.py --workdir DIR [--migrate] [--json OUT]

1. Opens the chDB path ``DIR/chdb`` through the product's store. With ``--migrate`` the store applies
   the migrations this checkout has and the seconds that takes are reported (how long migration 011
   takes to copy the data set into the time-keyed tables); without it, nothing is migrated.
2. ``OPTIMIZE TABLE ... FINAL`` on ``evaluations`` and ``window_aggregates``: one part per partition, the
   state background merges reach, where a sorting key that does not start with time spreads an hour's
   rows over every granule.
3. Runs the product's own reads over one hour in the middle of the data of the busiest series (the SQL
   is recorded as the product sends it, not copied here): the bucket drill-down (``DashboardQueries.bucket``,
   its list and its count), the recompute of one 1-minute window (``ClickHouseStore.rows_between_sync``)
   and the export of the hour (``LabelStore.export_rows``). For each statement: the rows and granules
   ``EXPLAIN ESTIMATE`` says it reads (chDB keeps no ``system.query_log``, and its result's
   ``rows_read`` counts the rows returned), and the median of 5 runs' wall time.

Run it in a checkout of the baseline and in this one, on copies of one build, to compare layouts.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine, write_json  # noqa: E402
from schemas.dashboard import BucketQuery  # noqa: E402
from schemas.settings import ClickHouseSettings  # noqa: E402
from streams.clickhouse.labels import LabelStore  # noqa: E402
from streams.clickhouse.store import ClickHouseStore  # noqa: E402
from streams.dashboard.queries import DashboardQueries  # noqa: E402

Statement = tuple[str, dict[str, Any]]


class Recording:
    """Records the statements the product sends through ``store.query_sync`` (and still runs them)."""

    def __init__(self, store: ClickHouseStore) -> None:
        self.store = store
        self.statements: list[Statement] = []
        self._query_sync = store.query_sync

    def __enter__(self) -> Recording:
        def record(sql: str, parameters: dict[str, Any] | None = None) -> list[dict[str, Any]]:
            self.statements.append((sql, dict(parameters or {})))
            return self._query_sync(sql, parameters)

        self.store.query_sync = record  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        self.store.query_sync = self._query_sync  # type: ignore[method-assign]


def estimate(store: ClickHouseStore, statement: Statement) -> dict[str, int]:
    """Rows, marks (granules) and parts EXPLAIN ESTIMATE gives, summed over the tables the statement reads."""
    sql, params = statement
    result = store.client.query("EXPLAIN ESTIMATE " + sql, parameters=params)
    names = list(result.column_names)
    rows = [dict(zip(names, r, strict=True)) for r in result.result_rows]
    return {
        "rows": sum(int(r["rows"]) for r in rows),
        "marks": sum(int(r["marks"]) for r in rows),
        "parts": sum(int(r["parts"]) for r in rows),
    }


def timed(store: ClickHouseStore, statement: Statement, repeat: int = 5) -> float:
    sql, params = statement
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        store.client.query(sql, parameters=params)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1000


def busiest_hour(store: ClickHouseStore) -> tuple[str, str, datetime]:
    rows = store.query_sync(
        f"SELECT app, model, count() AS n, min(timestamp) AS lo, max(timestamp) AS hi "
        f"FROM {store.db}.evaluations GROUP BY app, model ORDER BY n DESC LIMIT 1"
    )
    r = rows[0]
    lo, hi = r["lo"].replace(tzinfo=UTC), r["hi"].replace(tzinfo=UTC)
    middle = (lo + (hi - lo) / 2).replace(minute=0, second=0, microsecond=0)
    return str(r["app"]), str(r["model"]), middle


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workdir", type=Path, required=True, help="a dashboard_latency.py build (DIR/chdb)")
    ap.add_argument("--migrate", action="store_true", help="apply this checkout's migrations first (timed)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    settings = ClickHouseSettings(url=f"chdb://{(args.workdir / 'chdb').resolve()}")
    t = time.perf_counter()
    store = ClickHouseStore.open_sync(settings, migrate=args.migrate)
    migrate_s = time.perf_counter() - t
    if args.migrate:
        print(f"opened with migrations in {migrate_s:.1f} s", flush=True)
    t = time.perf_counter()
    for table in ("evaluations", "window_aggregates"):
        store.client.command(f"OPTIMIZE TABLE {store.db}.{table} FINAL")
    optimize_s = time.perf_counter() - t
    layout = store.query_sync(
        "SELECT table, partition_key, sorting_key FROM system.tables "
        f"WHERE database = '{store.db}' AND name IN ('evaluations', 'window_aggregates') ORDER BY table"
    )
    parts = store.query_sync(
        "SELECT table, count() AS parts, sum(rows) AS rows, sum(bytes_on_disk) AS bytes FROM system.parts "
        f"WHERE database = '{store.db}' AND active AND table = 'evaluations' GROUP BY table"
    )
    total = int(parts[0]["rows"])
    app, model, hour = busiest_hour(store)
    print(f"OPTIMIZE FINAL {optimize_s:.1f} s; {total} rows in {parts[0]['parts']} parts; {layout}")
    print(f"series {app}/{model}, hour {hour:%Y-%m-%d %H:%M} UTC", flush=True)

    cases: dict[str, list[Statement]] = {}
    with Recording(store) as rec:
        asyncio.run(
            DashboardQueries(store).bucket(
                BucketQuery(app=app, model=model, start=hour, end=hour + timedelta(hours=1))
            )
        )
    cases["drill-down of one hour (list, count)"] = rec.statements
    with Recording(store) as rec:
        store.rows_between_sync(app, model, hour, hour + timedelta(minutes=1))
    cases["window recompute (1 minute)"] = rec.statements
    with Recording(store) as rec:
        asyncio.run(LabelStore(store).export_rows(hour, hour + timedelta(hours=1), app=app, model=model))
    cases["export of one hour (one series)"] = rec.statements[:1]  # the labels lookup is by id

    out: dict[str, Any] = {
        "rows": total,
        "layout": layout,
        "series": [app, model],
        "hour": hour.isoformat(),
        "migrate_s": migrate_s if args.migrate else None,
        "optimize_s": optimize_s,
        "cases": {},
    }
    print()
    print("| read | statement | rows read (EXPLAIN ESTIMATE) | of the table | granules | median ms |")
    print("|---|---|---|---|---|---|")
    for name, statements in cases.items():
        figures = []
        for i, st in enumerate(statements, 1):
            est = estimate(store, st)
            ms = timed(store, st)
            figures.append({**est, "ms": ms})
            share = est["rows"] / total
            print(f"| {name} | {i} | {est['rows']:,} | {share:.1%} | {est['marks']:,} | {ms:.0f} |")
        out["cases"][name] = figures
    machine.finish()
    out["machine"] = machine.as_dict()
    write_json(args.json, out)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
