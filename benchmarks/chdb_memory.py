"""How much of a worker's RSS growth is the embedded chDB: the sink's ClickHouse work alone, replayed.

    python benchmarks/chdb_memory.py EVALUATIONS.jsonl [--batch 30] [--status-counts]

Reads Evaluations (one JSON a line, e.g. the ``payload`` column of a finished benchmark's
``evaluations`` table), and writes them into a fresh embedded chDB path with the worker's own store
(``streams.clickhouse.store.ClickHouseStore``: same DDL, same inserts of evaluations and statements) in
batches of ``--batch`` (the sink's batch at 30 interactions/s and ``batch_seconds`` 1), optionally
running the worker's status counts (4 ``count() ... FINAL``) after each batch as the worker does when
``clickhouse.status_file`` is set. Prints this process's RSS every 10% of the rows. No Kafka, no judge,
no faust: what grows here grows in the worker because of chDB.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine, rss_mb  # noqa: E402
from schemas.evaluation import Evaluation  # noqa: E402
from schemas.settings import ClickHouseSettings  # noqa: E402
from streams.clickhouse.store import ClickHouseStore  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("evaluations", type=Path)
    ap.add_argument("--batch", type=int, default=30)
    ap.add_argument("--repeat", type=int, default=1, help="write the evaluations N times (new ids each time)")
    ap.add_argument("--status-counts", action="store_true", help="count every table FINAL after each batch")
    args = ap.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    lines = args.evaluations.read_text().splitlines()
    base = [Evaluation.model_validate_json(line) for line in lines if line]
    rows = [
        e.model_copy(update={"interaction_id": f"{e.interaction_id}#{k}"}) if k else e
        for k in range(args.repeat)
        for e in base
    ]
    path = Path(tempfile.mkdtemp(prefix="gw-chdb-memory-")) / "chdb"
    store = ClickHouseStore.open_sync(ClickHouseSettings(url=f"chdb://{path}"))
    pid = os.getpid()
    start_rss = rss_mb(pid)
    print(f"{len(rows)} evaluations loaded; RSS after opening chDB: {start_rss:.0f} MB")
    started = time.perf_counter()
    step = max(1, len(rows) // (10 * args.repeat))
    series = []
    for i in range(0, len(rows), args.batch):
        store.insert_evaluations_sync(rows[i : i + args.batch])
        if args.status_counts:
            store.counts_sync()
        done = min(len(rows), i + args.batch)
        if done // step != (done - args.batch) // step or done == len(rows):
            series.append((done, rss_mb(pid)))
    took = time.perf_counter() - started
    print(
        f"inserted {len(rows)} in batches of {args.batch} in {took:.1f}s"
        + (" with the status counts after each batch" if args.status_counts else "")
    )
    print("RSS (MB) by rows written: " + ", ".join(f"{n}: {v:.0f}" for n, v in series))
    growth = (series[-1][1] or 0) - (start_rss or 0)
    print(f"growth: {growth:.0f} MB = {1024 * growth / len(rows):.1f} KB per evaluation")
    machine.finish()
    print(machine.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main())
