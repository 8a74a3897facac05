"""A worker's throughput with conversation rollups on against off, in one run:

    python -m benchmarks.conversations_throughput [--count 3000] [--turns 3] [--rounds 2] [--judge lexical]

Each round starts the stack of benchmarks/streamkit.py twice (Tansu, one ``groundwatch worker``, its own
chDB), on then off, with the same backlog of ``--count`` interactions in conversations of ``--turns``
turns (consecutive records share a conversation_id). On: ``conversations.enabled`` with
``idle_seconds`` and ``quiet_seconds`` of 2 s, so conversations close, are rolled up and counted in the
windows while the backlog drains; off: ``conversations.enabled=false``. Figures per run: interactions/s
end to end (first produce to last row), the insert rate over the middle 80 %, and (on) the conversation
rows written (read back after the stop). Work directories under build/bench/conversations/.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.machine import REPO, Machine, write_json
from benchmarks.streamkit import DEFAULT_DATA, RunConfig, figures, run

COUNT_ROWS = """
import os, sys
from schemas.settings import ClickHouseSettings
from streams.clickhouse.store import ClickHouseStore
store = ClickHouseStore.open_sync(ClickHouseSettings(url="chdb://" + sys.argv[1]))
print(store.query_sync(f"SELECT count() AS n FROM {store.db}.conversations FINAL")[0]["n"])
store.close()
"""


def conversation_rows(chdb: Path) -> int:
    out = subprocess.run(
        [sys.executable, "-c", COUNT_ROWS, str(chdb)], capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )  # fmt: skip
    if out.returncode != 0:
        raise RuntimeError(out.stderr[-2000:])
    return int(out.stdout.strip())


def one(label: str, env: dict[str, str], args: argparse.Namespace, machine: Machine) -> dict[str, Any]:
    workdir = REPO / "build" / "bench" / "conversations" / f"{label}-{time.strftime('%H%M%S')}"
    cfg = RunConfig(
        workdir=workdir, judge=args.judge, count=args.count, partitions=2, data=args.data,
        drain_timeout_s=args.drain_timeout, extra_env=env, conversation_turns=args.turns,
    )  # fmt: skip
    result = run(cfg, machine, log=lambda s: print(f"[{label}] {s}", flush=True))
    fig = figures(result)
    rows = conversation_rows(workdir / "worker0" / "chdb")
    out = {
        "run": label,
        "interactions": fig["rows_distinct"],
        "throughput": fig.get("throughput_overall"),
        "insert_rate_middle80": fig.get("insert_rate_middle80"),
        "conversation_rows": rows,
    }
    print(json.dumps(out), flush=True)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--turns", type=int, default=3)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--judge", choices=["openai", "lexical"], default="lexical")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--drain-timeout", type=float, default=900.0)
    ap.add_argument("--json", type=Path, help="write the figures here")
    args = ap.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    on = {
        "GROUNDWATCH_CONVERSATIONS__ENABLED": "true",
        "GROUNDWATCH_CONVERSATIONS__IDLE_SECONDS": "2",
        "GROUNDWATCH_CONVERSATIONS__QUIET_SECONDS": "2",
    }
    off = {"GROUNDWATCH_CONVERSATIONS__ENABLED": "false"}
    runs = []
    for r in range(args.rounds):
        runs.append(one(f"on{r + 1}", on, args, machine))
        runs.append(one(f"off{r + 1}", off, args, machine))
    machine.finish()
    print()
    for x in runs:
        print(
            f"{x['run']:>5}: {x['throughput']:.1f} interactions/s end to end, middle-80% insert rate "
            f"{x['insert_rate_middle80']:.1f}/s, {x['interactions']} interactions, "
            f"{x['conversation_rows']} conversation rows"
        )
    print(machine.describe())
    write_json(args.json, {"machine": machine.as_dict(), "runs": runs})
    return 0


if __name__ == "__main__":
    sys.exit(main())
