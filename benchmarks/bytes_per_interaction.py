"""ClickHouse rows and bytes per interaction, from Evaluations the product wrote (``groundwatch eval``).

    groundwatch eval DATA.jsonl --judge lexical --out R.json --evaluations E.jsonl
    python benchmarks/bytes_per_interaction.py E.jsonl [E2.jsonl ...] [--copies 20] [--workdir DIR]

Each Evaluation is written ``--copies`` times (new ids, one second apart, so that neighbouring rows in the
sorting key are different records, as in real traffic) through the product's own store
(``ClickHouseStore.insert_evaluations``: the ``evaluations`` row and its ``evaluation_statements``) into a
fresh embedded chDB, merged (``OPTIMIZE TABLE ... FINAL``), then ``system.parts`` gives each table's rows
and bytes on disk (compressed) and uncompressed, per interaction. Used by docs/capacity.md.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import write_json  # noqa: E402
from schemas.evaluation import Evaluation  # noqa: E402
from schemas.settings import ClickHouseSettings  # noqa: E402
from streams.clickhouse.store import ClickHouseStore  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("evaluations", type=Path, nargs="+", help="Evaluations JSONL (groundwatch eval)")
    ap.add_argument("--copies", type=int, default=20, help="times each Evaluation is written")
    ap.add_argument("--workdir", type=Path, help="where the chDB path goes (default: a temporary directory)")
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    originals = [
        Evaluation.model_validate_json(line)
        for path in args.evaluations
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.strip()
    ]
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="groundwatch-bytes-"))
    store = ClickHouseStore.open_sync(ClickHouseSettings(url=f"chdb://{(workdir / 'chdb').resolve()}"))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    n = len(originals)
    for copy in range(args.copies):
        batch = []
        for i, e in enumerate(originals):
            at = start + timedelta(seconds=copy * n + i)
            moved = {"interaction_id": f"{copy}-{i}", "timestamp": at}
            interaction = e.interaction.model_copy(update=moved) if e.interaction else None
            batch.append(e.model_copy(update={**moved, "interaction": interaction}))
        asyncio.run(store.insert_evaluations(batch))
    for table in ("evaluations", "evaluation_statements"):
        store.client.command(f"OPTIMIZE TABLE {store.db}.{table} FINAL")
    rows = store.query_sync(
        "SELECT table, sum(rows) AS rows, sum(bytes_on_disk) AS disk, sum(data_uncompressed_bytes) AS raw "
        f"FROM system.parts WHERE database = '{store.db}' AND active "
        "AND table IN ('evaluations', 'evaluation_statements') GROUP BY table ORDER BY table DESC"
    )
    interactions = n * args.copies
    out = {"interactions": interactions, "sources": [str(p) for p in args.evaluations], "tables": {}}
    print(f"{interactions} interactions ({n} Evaluations x {args.copies})")
    print("| table | rows per interaction | bytes on disk per interaction | uncompressed per interaction |")
    print("|---|---|---|---|")
    for r in rows:
        per = {k: int(r[k]) / interactions for k in ("rows", "disk", "raw")}
        out["tables"][r["table"]] = per
        print(f"| {r['table']} | {per['rows']:.2f} | {per['disk']:,.0f} | {per['raw']:,.0f} |")
    write_json(args.json, out)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
