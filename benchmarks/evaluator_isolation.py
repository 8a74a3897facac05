"""What running python evaluators in subprocesses costs: ``groundwatch eval`` with three python evaluators,
in this checkout (a pool of processes per evaluator) against another checkout (e.g. a worktree of a commit
where they ran in threads of the eval process), and without evaluators, in alternating rounds of one run.

    git worktree add /tmp/base <commit>
    python benchmarks/evaluator_isolation.py --baseline /tmp/base [--file F] [--repeat 4] [--rounds 3]

Each run is a child process (``python -m groundwatch eval --judge lexical``) with ``PYTHONPATH`` at its
checkout; its CPU is the user + system time of it and everything it started (the evaluator processes
included: ``RUSAGE_CHILDREN`` after it is waited for). Printed: interactions per CPU second and per wall
second, median over the rounds, for each configuration.
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

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.machine import write_json  # noqa: E402

EVALUATORS = """
evaluators:
  - {name: same_language, version: '1', kind: python, function: 'language:same_language', output: pass_fail}
  - {name: answer_in_context, version: '1', kind: python, function: 'overlap:answer_in_context'}
  - {name: long_answer, version: '1', kind: python, function: 'overlap:long_answer', output: pass_fail}
"""

LONG_ANSWER = "\n\ndef long_answer(interaction):\n    return len(interaction.answer) > 400\n"


def lines_of(path: Path, repeat: int) -> list[str]:
    """The file ``repeat`` times, each copy with fresh interaction ids."""
    base = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    out = []
    for r in range(repeat):
        for line in base:
            record = json.loads(line)
            key = "id" if "id" in record else "interaction_id"
            record[key] = f"{record.get(key, 'x')}-r{r}"
            out.append(json.dumps(record))
    return out


def run_eval(checkout: Path, data: Path, evaluators: Path | None, out: Path) -> tuple[float, float]:
    """(CPU seconds of the eval and its children, wall seconds) of one ``groundwatch eval``."""
    argv = [sys.executable, "-m", "groundwatch", "eval", str(data), "--judge", "lexical", "--quiet",
            "--out", str(out)]  # fmt: skip
    if evaluators is not None:
        argv += ["--evaluators", str(evaluators)]
    env = {**os.environ, "PYTHONPATH": str(checkout)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.monotonic()
    subprocess.run(argv, cwd=checkout, env=env, check=True, stdout=subprocess.DEVNULL)
    wall = time.monotonic() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return cpu, wall


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline", type=Path, required=True, help="the other checkout (a git worktree)")
    ap.add_argument("--file", type=Path, default=REPO / "groundwatch" / "data" / "sample_interactions.jsonl")
    ap.add_argument("--repeat", type=int, default=4, help="copies of the file, fresh ids each")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json", type=Path, default=None, help="write the figures here too")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        data = work / "interactions.jsonl"
        lines = lines_of(args.file, args.repeat)
        data.write_text("\n".join(lines) + "\n", encoding="utf-8")
        folder = work / "evaluators"
        folder.mkdir()
        for name in ("language.py", "overlap.py"):
            (folder / name).write_text((REPO / "deploy" / "evaluators" / name).read_text(encoding="utf-8"))
        with (folder / "overlap.py").open("a", encoding="utf-8") as f:
            f.write(LONG_ANSWER)
        evaluators = folder / "evaluators.yaml"
        evaluators.write_text(EVALUATORS, encoding="utf-8")
        configs = {
            "this checkout, no evaluators": (REPO, None),
            "this checkout, 3 python evaluators (subprocesses)": (REPO, evaluators),
            "baseline, 3 python evaluators": (args.baseline.resolve(), evaluators),
        }
        results: dict[str, list[tuple[float, float]]] = {name: [] for name in configs}
        for r in range(args.rounds):
            for name, (checkout, file) in configs.items():
                results[name].append(run_eval(checkout, data, file, work / f"report-{r}.json"))
        figures = {}
        print(f"{len(lines)} interactions, lexical judge, {args.rounds} rounds (median)")
        for name, runs in results.items():
            per_cpu = statistics.median(len(lines) / cpu for cpu, _ in runs)
            per_wall = statistics.median(len(lines) / wall for _, wall in runs)
            figures[name] = {"per_cpu_second": per_cpu, "per_wall_second": per_wall}
            print(f"  {name}: {per_cpu:,.0f} interactions per CPU second, {per_wall:,.0f} per wall second")
    write_json(args.json, figures)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
