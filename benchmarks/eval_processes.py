"""``groundwatch eval`` on one process against several: how its judging scales with the cores.

    python benchmarks/eval_processes.py [--count 6000] [--processes 1 2] [--rounds 2] [--data ../shared/data]
        [--judge lexical] [--json build/bench/eval_processes.json]

The records are ``plumbing.py``'s (the dev sets' long texts cycled with fresh ids; the judge cache off).
For each round and each ``--processes`` value in turn: one ``groundwatch eval FILE --processes P
--bootstrap 0``, its wall time (start-up and report included), the judging's own wall time (the report's
``wall_seconds``: from the first line judged to the last) and the CPU of the command with every judging
process (user + system, from the children's rusage). Prints the medians per value and the judging
speed-up over the first value. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine, write_json  # noqa: E402
from benchmarks.plumbing import write_records  # noqa: E402
from benchmarks.streamkit import DEFAULT_DATA  # noqa: E402


def one_run(records: Path, processes: int, judge: str, workdir: Path) -> dict[str, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDWATCH_")}
    out = workdir / f"report-{processes}.json"
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "groundwatch", "eval", str(records), "--judge", judge, "--out", str(out),
         "--quiet", "--bootstrap", "0", "--processes", str(processes)],
        cwd=REPO, env={**env, "PYTHONPATH": str(REPO), "GROUNDWATCH_JUDGE__CACHE_ENABLED": "false"},
        check=True, capture_output=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    report = json.loads(out.read_text(encoding="utf-8"))
    return {
        "wall_s": wall,
        "judging_s": float(report["wall_seconds"]),
        "cpu_s": (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime),
        "evaluated": float(report["evaluated"]),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=6000)
    ap.add_argument("--processes", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--judge", choices=["lexical"], default="lexical")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    runs: dict[int, list[dict[str, float]]] = {p: [] for p in args.processes}
    with tempfile.TemporaryDirectory() as tmp:
        records = Path(tmp) / "records.jsonl"
        write_records(args.data, args.count, records)
        for r in range(args.rounds):
            for p in args.processes:
                runs[p].append(one_run(records, p, args.judge, Path(tmp)))
                print(f"round {r + 1}, {p} process(es): {json.dumps(runs[p][-1])}", flush=True)
    first = statistics.median(x["judging_s"] for x in runs[args.processes[0]])
    out: dict[str, Any] = {}
    for p, xs in runs.items():
        med = {k: statistics.median(x[k] for x in xs) for k in ("wall_s", "judging_s", "cpu_s")}
        med["judging_rate"] = args.count / med["judging_s"]
        med["cpu_ms_per_interaction"] = 1000.0 * med["cpu_s"] / args.count
        med["judging_speedup"] = first / med["judging_s"]
        out[str(p)] = {**med, "runs": xs}
        print(
            f"{p} process(es): judging {med['judging_s']:.2f} s ({med['judging_rate']:.0f}/s, "
            f"x{med['judging_speedup']:.2f}), whole command {med['wall_s']:.2f} s, CPU "
            f"{med['cpu_ms_per_interaction']:.2f} ms an interaction (medians of {len(xs)})"
        )
    machine.finish()
    print(machine.describe())
    write_json(args.json, {"machine": machine.as_dict(), "count": args.count, "by_processes": out})
    return 0


if __name__ == "__main__":
    sys.exit(main())
