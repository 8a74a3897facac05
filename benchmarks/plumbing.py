"""What the stream's plumbing costs over the judging: the worker against ``groundwatch eval`` on the same
records, this tree against a baseline checkout, in one run.

    python benchmarks/plumbing.py --baseline ../base [--count 3000] [--rounds 2] [--data ../shared/data]
        [--judge lexical] [--env GROUNDWATCH_X=Y ...] [--json build/bench/plumbing.json]

For each tree (this one, then ``--baseline``, alternating for ``--rounds``):

- **eval's marginal CPU an interaction**: ``groundwatch eval FILE --judge J`` on ``count`` and on
  ``2 x count`` records (the stream benchmark's traffic: the dev sets' long texts cycled with fresh ids;
  the judge cache off), user + system CPU of each run; (CPU(2n) - CPU(n)) / n leaves start-up and the
  report's fixed cost out;
- **the worker**: ``benchmarks/stream_throughput.py``'s backlog of ``count`` (Tansu, chDB, one worker):
  CPU an interaction over every process of the worker, end-to-end rate, time until the first tenth of
  the rows are in ClickHouse;
- then eval's end-to-end rate on ``count`` records (records / wall seconds, start-up included).

Prints, per tree, the medians and the ratios the stream is held to: worker CPU / eval marginal CPU and
the worker's rate / eval's. Nothing here is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import Machine, git_commit, write_json  # noqa: E402
from benchmarks.streamkit import DEFAULT_DATA, RunConfig, figures, run, traffic  # noqa: E402


def write_records(data: Path, count: int, out: Path) -> None:
    records, _ = traffic(data)
    with out.open("w", encoding="utf-8") as f:
        for i in range(count):
            record = dict(records[i % len(records)])
            record["interaction_id"] = f"plumbing-{i}"
            f.write(json.dumps(record) + "\n")


def eval_run(
    tree: Path, records: Path, judge: str, env: dict[str, str], workdir: Path
) -> tuple[float, float]:
    """(CPU seconds, wall seconds) of one ``groundwatch eval`` from ``tree``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "groundwatch", "eval", str(records), "--judge", judge,
         "--out", str(workdir / f"{records.stem}.json"), "--quiet"],
        cwd=tree, env={**env, "PYTHONPATH": str(tree), "GROUNDWATCH_JUDGE__CACHE_ENABLED": "false"},
        check=True, capture_output=True,
    )  # fmt: skip
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), wall


def one_round(
    tree: Path, args: argparse.Namespace, files: tuple[Path, Path], workdir: Path
) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GROUNDWATCH_")}
    cpu_n, wall_n = eval_run(tree, files[0], args.judge, env, workdir)
    cpu_2n, _ = eval_run(tree, files[1], args.judge, env, workdir)
    cfg = RunConfig(
        workdir=workdir / f"stream-{tree.name}-{time.strftime('%H%M%S')}",
        judge=args.judge,
        count=args.count,
        data=args.data,
        extra_env=dict(e.split("=", 1) for e in args.env),
        tree=tree,
        processes=None,  # each tree's default worker (this one: every core judges)
    )
    machine = Machine.start()
    fig = figures(run(cfg, machine, log=lambda s: None))
    return {
        "eval_marginal_cpu_ms": 1000.0 * (cpu_2n - cpu_n) / args.count,
        "eval_rate": args.count / wall_n,
        "worker_cpu_ms": fig.get("cpu_ms_per_interaction"),
        "worker_rate": fig.get("throughput_overall"),
        "first_tenth_s": fig.get("first_tenth_in_s"),
        "rows_distinct": fig.get("rows_distinct"),
    }


def summary(rounds: list[dict[str, Any]]) -> dict[str, Any]:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in rounds)

    out = {
        k: med(k)
        for k in ("eval_marginal_cpu_ms", "eval_rate", "worker_cpu_ms", "worker_rate", "first_tenth_s")
    }
    out["cpu_ratio"] = out["worker_cpu_ms"] / out["eval_marginal_cpu_ms"]
    out["rate_ratio"] = out["worker_rate"] / out["eval_rate"]
    out["rounds"] = rounds
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--baseline", type=Path, help="a checkout of the starting commit (git worktree add)")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--judge", choices=["lexical", "openai"], default="lexical")
    ap.add_argument("--data", type=Path, default=DEFAULT_DATA)
    ap.add_argument("--env", action="append", default=[], help="extra GROUNDWATCH_X=Y for the worker")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    machine = Machine.start()
    print(machine.describe_start(), flush=True)
    workdir = REPO / "build" / "bench" / f"plumbing-{time.strftime('%H%M%S')}"
    workdir.mkdir(parents=True, exist_ok=True)
    files = (workdir / "n.jsonl", workdir / "2n.jsonl")
    write_records(args.data, args.count, files[0])
    write_records(args.data, 2 * args.count, files[1])
    trees = {"this tree": REPO, **({"baseline": args.baseline.resolve()} if args.baseline else {})}
    rounds: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
    for i in range(args.rounds):
        for name, tree in trees.items():
            result = one_round(tree, args, files, workdir)
            rounds[name].append(result)
            print(f"round {i + 1}, {name} ({git_commit_of(tree)}): {json.dumps(result)}", flush=True)
    machine.finish()
    out = {name: summary(r) for name, r in rounds.items()}
    print()
    for name, s in out.items():
        print(
            f"{name}: worker {s['worker_cpu_ms']:.2f} ms CPU an interaction against eval's marginal "
            f"{s['eval_marginal_cpu_ms']:.2f} ms ({s['cpu_ratio']:.2f}x); worker {s['worker_rate']:.0f}/s "
            f"end to end against eval {s['eval_rate']:.0f}/s ({s['rate_ratio']:.2f}); first tenth of rows "
            f"in ClickHouse after {s['first_tenth_s']:.2f} s (medians of {len(s['rounds'])})"
        )
    print(machine.describe())
    write_json(args.json, {"machine": machine.as_dict(), "results": out})
    return 0


def git_commit_of(tree: Path) -> str:
    if tree == REPO:
        return git_commit()
    done = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    )
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
